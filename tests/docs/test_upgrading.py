"""docs/upgrading.md's table of 0.1's module paths is the one the package keeps (``_moved.MOVED``)."""

from __future__ import annotations

import re
from pathlib import Path

from hexeract_scheduler import _moved

UPGRADING = Path(__file__).resolve().parents[2] / "docs" / "upgrading.md"
ROW = re.compile(r"^\| `(?P<old>[\w.]+)` \| (?P<new>`[\w.]+`(?:, `[\w.]+`)*) \|$")


def test_the_module_path_table_is_every_moved_module_and_where_it_went():
    rows = [m for line in UPGRADING.read_text().splitlines() if (m := ROW.match(line))]
    documented = {m["old"]: tuple(re.findall(r"`([\w.]+)`", m["new"])) for m in rows}
    assert len(rows) == len(documented), "a module is listed twice"
    assert documented == _moved.MOVED
