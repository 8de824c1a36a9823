"""Every relative link of README.md, CHANGELOG.md and docs/*.md reaches a file, and its anchor, if
any, a heading of that file (GitHub's slugs): what ``mkdocs build --strict`` would check, also for
the pages outside docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(path: Path) -> list[str]:
    """The lines outside fenced blocks."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors: a heading's slug, then ``-1``, ``-2`` for its repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path):
        if m := re.match(r"^#{1,6}\s+(.*)$", line):
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def broken(path: Path) -> list[str]:
    found = []
    for line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                found.append(f"{target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                found.append(f"{target}: no such heading in {dest.name}")
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(path):
    assert broken(path) == []


def test_the_check_sees_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [file](other.md) [anchor](#nowhere)\n```\n[in a fence](gone.md)\n```\n")
    assert broken(page) == ["other.md: no such file", "#nowhere: no such heading in page.md"]
