"""README snippets that need no endpoint run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_memory_store_snippet_runs_as_written():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [snippet] = [b for b in blocks if "InMemoryScheduleStore()" in b]
    exec(compile(snippet, "README.md", "exec"), {})  # its own asserts check what it shows
