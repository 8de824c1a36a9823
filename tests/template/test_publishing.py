"""What publishing needs: the dual licence, and application metadata the Serverless Application
Repository accepts (with its one placeholder flagged)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from ..support.cfn_eval import ROOT


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_project_is_dual_licensed_mit_or_apache(template):
    project = pyproject()["project"]
    assert project["license"] == "MIT OR Apache-2.0"
    assert sorted(project["license-files"]) == ["LICENSE-APACHE", "LICENSE-MIT"]
    mit = (ROOT / "LICENSE-MIT").read_text()
    apache = (ROOT / "LICENSE-APACHE").read_text()
    assert mit.startswith("MIT License") and "Copyright (c) 2026 the hexeract-scheduler authors" in mit
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "Copyright (c) 2026 the hexeract-scheduler authors" in apache
    # PEP 639's license expression needs setuptools 77 to build
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in _build_requires())


def _build_requires() -> list[str]:
    return pyproject()["build-system"]["requires"]  # type: ignore[no-any-return]


def test_the_application_metadata_is_what_the_serverless_application_repository_accepts(template):
    app = template["Metadata"]["AWS::ServerlessRepo::Application"]
    # no intrinsic function: SAR reads the values as written
    assert all(isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v)) for v in app.values())
    assert re.fullmatch(r"[a-zA-Z0-9\-]+", app["Name"]) and len(app["Name"]) <= 140
    assert re.fullmatch(r"^[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?$", app["Author"]) and len(app["Author"]) <= 127
    assert 1 <= len(app["Description"]) <= 256
    assert app["SemanticVersion"] == pyproject()["project"]["version"]
    # one SPDX identifier (SAR takes no expression), one of the project's, with its own text
    assert app["SpdxLicenseId"] in pyproject()["project"]["license"].split(" OR ")
    assert app["LicenseUrl"] == {"Apache-2.0": "LICENSE-APACHE", "MIT": "LICENSE-MIT"}[app["SpdxLicenseId"]]
    for local in ("LicenseUrl", "ReadmeUrl"):  # local files `sam package` uploads
        assert (ROOT / app[local]).is_file(), local
    for url in ("SourceCodeUrl", "HomePageUrl"):
        assert app[url].startswith("https://"), url
    labels = app.get("Labels", [])
    assert len(labels) <= 10 and all(re.fullmatch(r"[a-zA-Z0-9+\-_:/@]{1,127}", label) for label in labels)


# The public repository's URL does not exist yet: until it does, the template holds this
# placeholder, the one value to set before `sam publish`.
PLACEHOLDER_SOURCE_URL = "https://github.com/nubster-opensources/hexeract-scheduler-aws"


def test_the_placeholder_source_code_url_is_flagged_as_the_value_to_set_before_publishing(template):
    app = template["Metadata"]["AWS::ServerlessRepo::Application"]
    if app["SourceCodeUrl"] != PLACEHOLDER_SOURCE_URL:
        return  # set: nothing left to flag
    assert app["HomePageUrl"] == PLACEHOLDER_SOURCE_URL  # set both together
    lines = (ROOT / "template.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("SourceCodeUrl:"))
    comment = " ".join(line.strip() for line in lines[max(at - 5, 0) : at] if line.strip().startswith("#"))
    assert "SET BEFORE PUBLISHING" in comment and "SourceCodeUrl" in comment, comment
    deploy = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    assert "is the one value to set before `sam publish`" in deploy
