"""Fixtures for the ``hexeract`` command line: click's runner against this run's endpoints.

``--conn`` names the moto endpoint; in-process, the clients built for it send DynamoDB requests to
the backend under test (moto or dynalite), as ``AWS_ENDPOINT_URL_DYNAMODB`` would in a process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.cli import commands
from hexeract_scheduler.cli.commands import main

from ..conftest import Backend

Hexeract = Callable[..., Result]


_DEFAULT = "<this test's table>"


@pytest.fixture
def hexeract(backend: Backend, request: pytest.FixtureRequest, reuse_clients: None) -> Hexeract:
    """``hexeract("scheduler", "list", ...)``: runs the CLI in-process with ``--conn`` (the session
    endpoint) and ``--table`` (this test's table, created on first use) appended; pass ``conn=None``
    / ``table=None`` to leave one out."""

    def run(*args: str, conn: str | None = backend.aws_url, table: str | None = _DEFAULT, **kw: Any) -> Result:
        argv = list(args)
        if args and args[0] == "scheduler":
            if table == _DEFAULT:
                # Only tests that reach the endpoint pay for a table.
                table = request.getfixturevalue("store").table_name if conn == backend.aws_url else "hexeract-schedules"
            if conn is not None:
                argv += ["--conn", conn]
            if table is not None:
                argv += ["--table", table]
        return CliRunner().invoke(main, argv, catch_exceptions=False, **kw)

    return run


_factories: dict[tuple[Backend, str | None, int, float], ClientFactory] = {}


@pytest.fixture
def reuse_clients(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    """Each real invocation is its own process; in-process, building boto3 clients again for every
    command (~150 ms each) would dominate the run time, so tests share one factory per endpoint.
    The run's own endpoint gets the backend's connection (DynamoDB on the backend under test)."""
    real = commands.clients_for

    def cached(
        conn: str | None, *, retries: int = commands.CLI_RETRIES, read_timeout: float = commands.CLI_READ_TIMEOUT
    ) -> ClientFactory:
        key = (backend, conn, retries, read_timeout)
        if key not in _factories:
            factory = real(conn, retries=retries, read_timeout=read_timeout)
            if conn == backend.aws_url:
                factory = ClientFactory(
                    backend.connection,
                    connect_timeout=commands.CLI_CONNECT_TIMEOUT,
                    read_timeout=read_timeout,
                    retries=retries,
                )
            _factories[key] = factory
        return _factories[key]

    monkeypatch.setattr(commands, "clients_for", cached)
