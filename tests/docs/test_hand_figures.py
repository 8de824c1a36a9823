"""docs/benchmarks.md writes no measured figure by hand: every one sits in a generated region.

The rule, applied to the page's prose (everything outside the ``<!-- BEGIN … -->`` regions, fenced
blocks, inline code, HTML comments and link targets): a number is **measured-looking** when

* it is money (``$3.78``) or a multiple (``× 1.17``, ``4×``);
* a unit of what the benchmarks measure follows it: a rate (``occurrences/s``, ``UpdateItem/s``,
  any ``/s``), ``ms`` or ``µs``, capacity units (``WRU``, ``RRU``, write or read units), ``requests``,
  ``calls`` or ``%``;
* it has decimals and ``s``, ``min`` or ``cores`` follows it (``5.93 s``, ``0.83 cores``), or it is a
  fraction below one (``0.54``, a ratio); whole seconds and cores are conditions (``lease 300 s``,
  ``2 cores``, a 30 s run) and pass.

It passes anyway, being a condition or a goal rather than a result, when right before it comes

* ``+``: an injected latency (``+10 ms``);
* a comparison, ``≤ ≥ < >``: a goal or a threshold (``p99 ≤ 1 s``, ``≥ 80 %``);
* the name of a setting it is the value of: lease, timeout, interval, latency, poll (``dispatch
  timeout 0.3 s``).

Counts, sizes and versions (``10 entries``, ``1 KB``, ``Python 3.11``) are not measurements. A
figure that must appear in prose belongs in a renderer of tools/render_docs.py.
"""

from __future__ import annotations

import re

import pytest

from tools.render_docs import ROOT, regions

PAGE = ROOT / "docs" / "benchmarks.md"

NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?!\.?\d)")
UNIT = re.compile(r"\s?(?:[\w-]*/s\b|ms\b|µs\b|WRU\b|RRU\b|(?:write|read) units?\b|(?:AWS )?requests?\b|calls?\b|%)")
DECIMAL_UNIT = re.compile(r"\s?(?:s|min|cores)\b")
MONEY_OR_TIMES = re.compile(r"[$×]\s?$")
EXEMPT = re.compile(r"(?:[+≤≥<>]|\b(?:lease|timeout|interval|latency|poll))\s*$", re.IGNORECASE)

# What is not prose: inline code, HTML comments, link and image targets.
NOT_PROSE = re.compile(r"`[^`]*`|<!--.*?-->|\]\([^)]*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text outside regions and fenced blocks, code and comments blanked."""
    lines = text.splitlines()
    generated = {i for r in regions(lines) for i in range(r.begin, r.end + 1)}
    out, fenced = [], False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and i not in generated:
            out.append((i + 1, NOT_PROSE.sub(" ", line)))
    return out


def figures(line: str) -> list[str]:
    """The measured-looking figures of one line of prose."""
    found = []
    for m in NUMBER.finditer(line):
        before, after, number = line[: m.start()], line[m.end() :], m.group()
        if EXEMPT.search(before):
            continue
        decimal = "." in number
        if (
            MONEY_OR_TIMES.search(before)
            or re.match(r"\s?×", after)
            or UNIT.match(after)
            or (decimal and DECIMAL_UNIT.match(after))
            or (decimal and float(number) < 1)
        ):
            found.append(line[max(0, m.start() - 2) : m.end() + 16].strip())
    return found


def test_the_benchmarks_page_has_no_figure_written_by_hand():
    hand = [f"docs/benchmarks.md:{n}: {f!r}" for n, line in prose(PAGE.read_text()) for f in figures(line)]
    assert hand == [], "render these from bench/results (tools/render_docs.py) or drop them:\n" + "\n".join(hand)


@pytest.mark.parametrize(
    "text",
    [
        "one dispatcher: 169 occurrences/s",
        "626 UpdateItem/s",
        "about $4.40 per million",
        "a speed-up of × 1.39",
        "about 4× EventBridge",
        "0.54 of what the ceiling allows",
        "p99 379 ms",
        "1,257 µs each",
        "6 WRU per one-shot",
        "2.23 AWS requests per occurrence",
        "191 calls",
        "30 % of entries",
        "1,000 in 5.93 s",
        "dynalite used 0.83 cores",
    ],
)
def test_measured_looking_figures_are_caught(text: str):
    assert figures(text), text


@pytest.mark.parametrize(
    "text",
    [
        "on 2 cores",
        "10 entries per batch",
        "at +10 ms per request",
        "items up to 1 KB",
        "goal p99 ≤ 1 s",
        "≥ 80 % of what the ceiling allows",
        "dispatch timeout 0.3 s, lease 3 s",
        "Python 3.11.7 on 127.0.0.1",
        "8 processes, 1,000 due one-shots, 20 kills",
        "poll interval 1 s, lease 300 s",
        "bound by the round trip (16 / RTT)",
    ],
)
def test_conditions_and_goals_pass(text: str):
    assert figures(text) == [], text


def test_code_comments_links_and_regions_are_not_prose():
    text = (
        "Run `--latency-ms 10.5` <!-- 3.2 ms --> ![h](lag-0.5ms.png)\n"
        "<!-- BEGIN bench:lag -->\n169 occurrences/s\n<!-- END bench:lag -->\n"
        "```\n$ 4.40\n```\n"
    )
    assert [(n, figures(line)) for n, line in prose(text)] == [(1, [])]
