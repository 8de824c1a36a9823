"""Poison items mixed among healthy schedules, with worker processes killed at random points.

Every healthy schedule is delivered (the at-least-once verdict of the other torture runs), and
every poison item ends quarantined: dead-lettered with a reason that names its problem. The fast
subset runs in ``make test``; ``make torture`` runs the full size.
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.store.dynamo import shard_of

from ..conftest import Backend, unique
from ..support.poison import CORRUPTIONS
from .harness import Consumer, run_workers, seed_schedules, verify

KINDS = list(CORRUPTIONS)


def _poison_run(
    backend: Backend, tmp_path: Path, *, n: int, poison: int, processes: int, kills: int, seed: int
) -> None:
    clients = ClientFactory(backend.connection)
    table = unique("torture-poison")
    seeded = seed_schedules(clients, table, n, seed)
    store, ddb = seeded.store, seeded.store.client
    template = next(iter(_items(ddb, table, limit=1)))
    expected: dict[str, str] = {}
    for i, kind in zip(range(poison), itertools.cycle(KINDS), strict=False):
        corrupt, reason = CORRUPTIONS[kind]
        sid = uuid.UUID(int=(seed << 64) + i, version=4)
        item = corrupt({**template, "schedule_id": {"S": str(sid)}, "due_shard": {"S": str(shard_of(sid, 4))}})
        if kind == "schedule_id not a UUID":
            item["schedule_id"] = {"S": f"poison-{i}"}
        ddb.put_item(TableName=table, Item=item)
        expected[item["schedule_id"]["S"]] = reason

    with Consumer(clients, seeded.queue_url) as consumer:
        report = run_workers(
            backend.aws_url,
            table,
            dynamodb_endpoint=backend.dynamodb_url,
            processes=processes,
            kills=kills,
            seed=seed,
            tmp=tmp_path,
            kill_window=30,
            lease=3.0,
            dispatch_timeout=0.3,
        )
    # Every poison item quarantined with its reason, then removed so the verdict sees the rest.
    for key, reason in expected.items():
        got = ddb.get_item(TableName=table, Key={"schedule_id": {"S": key}}, ConsistentRead=True)["Item"]
        assert got["status"]["S"] == "dead_lettered", f"{key}: {got['status']}"
        assert reason in got["last_error"]["S"], f"{key}: {got['last_error']['S']!r} lacks {reason!r}"
        assert "due_shard" not in got
        ddb.delete_item(TableName=table, Key={"schedule_id": {"S": key}})
    verdict = verify(seeded, clients, consumer)
    print(
        f"\npoison seed={seed}: {n} healthy + {poison} poison, {processes} processes, {report.kills} kills, "
        f"{report.seconds:.1f}s; quarantined {report.total('quarantined')}; {verdict.line()}"
    )
    assert report.kills == kills
    assert verdict.delivered + verdict.dead_lettered == n
    assert report.total("failed_cycles") == 0
    del store


def _items(ddb: Any, table: str, *, limit: int) -> list[dict[str, Any]]:
    items = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    return [i for i in items if i["schedule_id"]["S"] != "#meta"][:limit]


def test_fast_poison_among_healthy_with_kills(backend: Backend, tmp_path: Path) -> None:
    """The subset `make test` runs: 100 healthy, one item of each poison kind, 2 kills."""
    _poison_run(backend, tmp_path, n=100, poison=len(KINDS), processes=2, kills=2, seed=17)


@pytest.mark.torture
@pytest.mark.timeout(1800)
def test_poison_among_healthy_with_kills(backend: Backend, tmp_path: Path) -> None:
    n = int(os.environ.get("HEXERACT_TORTURE_POISON_N", 600))
    _poison_run(backend, tmp_path, n=n, poison=60, processes=4, kills=12, seed=23)
