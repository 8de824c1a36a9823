"""Every fenced code block of README.md, CHANGELOG.md and docs/*.md runs, as written, against a
local endpoint.

The rule (docs/development.md, "Documentation"): a fenced block is run unless the line right before
its opening fence is ``<!-- not run: REASON -->``, with a reason (needs AWS, sample output, a file
tree, serves until Ctrl-C...). That comment is the only way out; a block that runs is, by its info
string:

- ``python``: exec'd in this process, in a temporary directory;
- ``sh``, ``bash``, ``shell`` or none: run by ``bash -eu -o pipefail`` in a temporary directory,
  in an environment like a new terminal's (system ``PATH``, no AWS variables).

Any other info string (``text``, ``json``...) fails the test: exempt the block, or mark it runnable.

Both kinds run as a reader runs them after the tour's first steps (docs/tour.md): with the local
endpoint started as the tour starts it, ``python -m hexeract_scheduler.local --demo-targets`` (on the
free port it picks, once for the module), and with the ``export`` lines it prints applied (``PATH``
with the venv's bin, ``HEXERACT_CONN``, ``QUEUE_URL``, ``TOPIC_ARN``): in the shell's script before
the block, in ``os.environ`` for Python. The blocks share that endpoint and its table
``hexeract-schedules``, so each one is self-contained (``table create`` is idempotent).

Nothing in a block is rewritten before it runs: a block that cannot run as a reader would paste it
is fixed in the docs. So no runnable block names a local port; the endpoint's address is
``$HEXERACT_CONN``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hexeract_scheduler.local import spawn_local_endpoint

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"", "sh", "bash", "shell"}
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^`\s]*)")
# A local endpoint's address with its port: the tour's endpoint takes a free one, so a block that
# names one fails for every reader whose endpoint got another.
LOCAL_PORT = re.compile(r"(?:127\.0\.0\.1|localhost):\d+")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    code: str
    not_run: str | None  # the reason, when exempted

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file (an unclosed fence runs to the end, as CommonMark)."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            # A fence indented (in a list) indents its block as much: take that much off each line.
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
            j += 1
        before = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        reason = before["reason"] if before else None
        found.append(Block(path, i + 1, opening["info"].lower(), "\n".join(body) + "\n", reason))
        i = j + 1
    return found


BLOCKS = [block for path in DOCS for block in blocks_of(path)]
RUN = [b for b in BLOCKS if b.not_run is None]


def test_blocks_are_found_and_every_exemption_says_why():
    assert {b.path.name for b in BLOCKS} >= {"README.md", "tour.md", "cli.md", "deploy.md", "contracts.md"}
    assert any(b.info == "python" for b in RUN) and any(b.info in SHELL for b in RUN)
    assert [b.name for b in BLOCKS if b.not_run is not None and not b.not_run] == []


def test_no_runnable_block_names_a_local_port():
    assert [b.name for b in RUN if LOCAL_PORT.search(b.code)] == []


@dataclass(frozen=True)
class Tour:
    """The endpoint of the tour (docs/tour.md), and the export lines it printed."""

    url: str
    exports: list[str]
    env: dict[str, str]  # HEXERACT_CONN, QUEUE_URL, TOPIC_ARN


@pytest.fixture(scope="module")
def tour() -> Iterator[Tour]:
    """``python -m hexeract_scheduler.local --demo-targets``, as the tour starts it."""
    endpoint = spawn_local_endpoint(demo_targets=True)
    try:
        assert endpoint.process is not None and endpoint.process.stdout is not None
        printed = []
        while (line := endpoint.process.stdout.readline().rstrip("\n")) != "# serving until Ctrl-C":
            assert line, f"the endpoint stopped printing before serving: {printed}"
            printed.append(line)
        exports = [line for line in printed if line.startswith("export ")]
        # What the tour says the lines are: the venv's bin on PATH, then the three variables.
        assert exports[0] == f'export PATH={Path(sys.executable).parent.absolute()}:"$PATH"', printed
        variables = dict(word.split("=", 1) for word in shlex.split(exports[1])[1:])
        assert set(variables) == {"HEXERACT_CONN", "QUEUE_URL", "TOPIC_ARN"}, printed
        assert variables["HEXERACT_CONN"] == endpoint.url
        yield Tour(endpoint.url, exports, variables)
    finally:
        endpoint.stop()


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.name)
def test_block_runs_as_written(block: Block, tour: Tour, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    code = block.code
    if block.info == "python":
        monkeypatch.chdir(tmp_path)
        for name, value in tour.env.items():
            monkeypatch.setenv(name, value)
        exec(compile(code, block.name, "exec"), {"__name__": "__doc_snippet__"})  # its own asserts check it
    elif block.info in SHELL:
        script = "\n".join([*tour.exports, code])
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": os.environ.get("LANG", "C.UTF-8")}
        done = subprocess.run(
            ["bash", "-eu", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{block.name} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    else:
        pytest.fail(
            f"{block.name}: a ```{block.info} block is not runnable: mark it python or sh, or put "
            "`<!-- not run: REASON -->` on the line before its fence"
        )
