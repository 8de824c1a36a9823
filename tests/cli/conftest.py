"""Fixtures for the ``hexeract`` command line: click's runner against the session moto server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hexeract_scheduler import cli
from hexeract_scheduler.aws import ClientFactory
from hexeract_scheduler.cli import main
from hexeract_scheduler.local import LocalEndpoint

Hexeract = Callable[..., Result]


_DEFAULT = "<this test's table>"


@pytest.fixture
def hexeract(endpoint: LocalEndpoint, request: pytest.FixtureRequest) -> Hexeract:
    """``hexeract("scheduler", "list", ...)``: runs the CLI in-process with ``--conn`` (the session
    endpoint) and ``--table`` (this test's table, created on first use) appended; pass ``conn=None``
    / ``table=None`` to leave one out."""

    def run(*args: str, conn: str | None = endpoint.url, table: str | None = _DEFAULT, **kw: Any) -> Result:
        argv = list(args)
        if args and args[0] == "scheduler":
            if table == _DEFAULT:
                # Only tests that reach the endpoint pay for a table.
                table = request.getfixturevalue("store").table_name if conn == endpoint.url else "hexeract-schedules"
            if conn is not None:
                argv += ["--conn", conn]
            if table is not None:
                argv += ["--table", table]
        return CliRunner().invoke(main, argv, catch_exceptions=False, **kw)

    return run


_factories: dict[tuple[str | None, int], ClientFactory] = {}


@pytest.fixture(autouse=True)
def reuse_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each real invocation is its own process; in-process, building boto3 clients again for every
    command (~150 ms each) would dominate the run time, so tests share one factory per endpoint."""
    real = cli.clients_for

    def cached(conn: str | None, *, retries: int = cli.CLI_RETRIES) -> ClientFactory:
        key = (conn, retries)
        if key not in _factories:
            _factories[key] = real(conn, retries=retries)
        return _factories[key]

    monkeypatch.setattr(cli, "clients_for", cached)
