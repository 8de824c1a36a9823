"""The generated regions of README.md and docs/*.md hold exactly what tools/render_docs.py renders
from their sources (``bench:*``: bench/results/*.json), and the region markers parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import render_docs
from tools.render_docs import ROOT, RegionError, problems, regions, render


def test_every_region_of_the_docs_is_up_to_date():
    said = [f"{path.relative_to(ROOT)}: {p}" for path in render_docs.documents() for p in problems(path.read_text())]
    assert said == [], "run python tools/render_docs.py\n" + "\n".join(said)


def test_check_exits_zero_when_up_to_date():
    assert render_docs.main(["--check"]) == 0


def test_the_benchmarks_page_renders_every_table():
    names = {r.name for r in regions((ROOT / "docs" / "benchmarks.md").read_text().splitlines())}
    assert names >= {f"bench:{n}" for n in ("throughput", "scaleout", "lag", "cost", "cpu", "coldstart")}


@pytest.mark.parametrize("name", sorted(n for n in render_docs.RENDERERS if n.startswith("bench:")))
def test_each_bench_region_names_its_results_and_run(name: str):
    text = render_docs.RENDERERS[name]()
    runs = {json.loads(p.read_text())["conditions"]["when"] for p in render_docs.RESULTS.glob("*.json")}
    assert "bench/results/" in text and any(when in text for when in runs), text


def test_a_changed_measurement_makes_its_regions_out_of_date(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A new run (or a figure edited in bench/results) is caught: the regions built on it disagree."""
    for path in render_docs.RESULTS.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    data = json.loads((tmp_path / "throughput.json").read_text())
    data["runs"][0]["dispatcher"]["per_second"] += 1
    (tmp_path / "throughput.json").write_text(json.dumps(data))
    monkeypatch.setattr(render_docs, "RESULTS", tmp_path)
    said = problems((ROOT / "docs" / "benchmarks.md").read_text())
    assert [p.split(": ", 1)[1] for p in said] == ["bench:throughput is out of date"]


# --- Region parsing, with a registry of its own ------------------------------------------------

FAKE = {"t:a": lambda: "| x |\n| --- |\n| 1 |", "t:b": lambda: "two"}
DOC = """# Title

Prose before.

<!-- BEGIN t:a -->
stale
<!-- END t:a -->

Between. <!-- BEGIN not:a-marker --> (not alone on its line: text)

<!-- BEGIN t:b -->
<!-- END t:b -->
After.
"""


def test_render_fills_each_region_and_keeps_the_rest():
    out = render(DOC, FAKE)
    assert "<!-- BEGIN t:a -->\n\n| x |\n| --- |\n| 1 |\n\n<!-- END t:a -->\n" in out
    assert "<!-- BEGIN t:b -->\n\ntwo\n\n<!-- END t:b -->\nAfter.\n" in out
    assert "stale" not in out
    outside = [line for line in DOC.splitlines() if line not in {"stale"}]
    assert all(line in out.splitlines() for line in outside)


def test_render_is_idempotent_and_check_agrees():
    once = render(DOC, FAKE)
    assert render(once, FAKE) == once
    assert problems(once, FAKE) == []
    assert problems(DOC, FAKE) == ["line 5: t:a is out of date", "line 11: t:b is out of date"]


def test_an_unknown_name_is_refused_and_named():
    doc = "<!-- BEGIN t:nope -->\n<!-- END t:nope -->\n"
    with pytest.raises(RegionError, match="no renderer for t:nope"):
        render(doc, FAKE)
    [said] = problems(doc, FAKE)
    assert said.startswith("line 1: t:nope: no renderer") and "t:a, t:b" in said


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("<!-- BEGIN t:a -->\ntext\n", "line 1: t:a is never closed"),
        ("text\n<!-- END t:a -->\n", "line 2: END t:a closes no open region"),
        ("<!-- BEGIN t:a -->\n<!-- END t:b -->\n", "line 2: END t:b closes no open region"),
        ("<!-- BEGIN t:a -->\n<!-- BEGIN t:b -->\n", "line 2: t:b begins inside t:a"),
        ("<!-- BEGIN t:a\n<!-- END t:a -->\n", "line 1: malformed marker"),
        ("<!-- BEGIN t:a -->\n```\n<!-- END t:a -->\n```\n", "line 1: t:a is never closed"),
    ],
)
def test_misplaced_markers_are_refused(doc: str, message: str):
    with pytest.raises(RegionError, match=message):
        render(doc, FAKE)
    [said] = problems(doc, FAKE)
    assert said.startswith(message)


def test_markers_in_a_fenced_block_are_text():
    doc = "~~~\n<!-- BEGIN t:nope -->\n~~~\n"
    assert regions(doc.splitlines()) == []
    assert render(doc, FAKE) == doc
