"""Torture tests: the full sizes run with ``make torture`` (``pytest -m torture``) only.

Tests marked ``torture`` are deselected unless the ``-m`` expression names the marker, so a plain
``pytest`` / ``make test`` runs just the fast subset of this directory.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "torture" in (config.getoption("markexpr") or ""):
        return
    keep = [i for i in items if i.get_closest_marker("torture") is None]
    dropped = [i for i in items if i.get_closest_marker("torture") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
