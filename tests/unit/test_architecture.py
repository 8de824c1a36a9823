"""The seams the code keeps: the contracts stand between the worker and any storage, and only the
composition roots build the DynamoDB store."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "core" / "hexeract_scheduler"
# Composition roots inside the package: the command line's entry builds the store for its commands.
ROOTS = {"cli.py"}
MAX_LINES = 340


def _imports_dynamo(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and (node.module or "").startswith("dynamo"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("hexeract_scheduler.dynamo") for a in node.names):
            return True
    return False


def test_no_module_outside_the_dynamo_package_imports_it_but_the_roots():
    assert _imports_dynamo(PACKAGE / "cli.py")  # the check sees a root's import
    # (the package's __init__ exposes DynamoScheduleStore lazily, on first use)
    offenders = [p.name for p in PACKAGE.glob("*.py") if p.name not in ROOTS | {"__init__.py"} and _imports_dynamo(p)]
    assert offenders == []


@pytest.mark.parametrize(
    "module",
    [
        "hexeract_scheduler",
        "hexeract_scheduler.worker",
        "hexeract_scheduler.lambda_ops",
        "hexeract_scheduler.settings",
        "hexeract_scheduler.memory",
        "hexeract_scheduler.observability",
    ],
)
def test_importing_the_core_never_loads_the_dynamo_store(module):
    code = f"import sys, {module}; assert not [m for m in sys.modules if 'dynamo' in m and 'hexeract' in m], module"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_source_file_of_the_core_is_much_over_300_lines():
    sizes = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_repository_names_no_folder_beside_it():
    """Tests once read a `shared` folder laid beside the checkout (and skipped without it): a clone
    must be complete. The vectors are vendored in tests/data; nothing may point outside the clone."""
    root = PACKAGE.parents[2]
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    outside = re.compile(r"\.\./shared\b|parents?\s*/\s*[\"']shared[\"']|(ROOT|REPO)\.parent\b")
    text_files = {".py", ".md", ".toml", ".yaml", ".json", ".txt"}
    offenders = []
    for name in listed.stdout.splitlines():
        path = root / name
        if path.is_file() and (path.suffix in text_files or path.name == "Makefile"):
            text = path.read_text(errors="replace")
            offenders += [f"{name}: {m.group(0)}" for m in outside.finditer(text)]
    assert offenders == []
