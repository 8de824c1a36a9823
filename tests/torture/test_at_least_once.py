"""At-least-once under racing workers and kill -9 at random points of claim → send → ack.

Real OS processes against one moto server over HTTP. Sizes are seeded; the kill timing depends
on the OS scheduler, so each run explores different interleavings with the same invariants.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED

from ..conftest import Backend, unique
from .harness import Consumer, run_workers, seed_schedules, verify

# Short leases so a killed worker's occurrences come back quickly; the config rule
# lease >= batch_size x dispatch_timeout holds (10 x 0.3 s <= 3 s).
CRASHY: dict[str, Any] = {"lease": 3.0, "dispatch_timeout": 0.3}


def _size(name: str, default: int) -> int:
    return int(os.environ.get(f"HEXERACT_TORTURE_{name}", default))


def _clients(backend: Backend) -> ClientFactory:
    return ClientFactory(backend.connection)


def _crash_run(backend: Backend, tmp_path: Path, *, n: int, processes: int, kills: int, seed: int, **opts: Any) -> None:
    clients = _clients(backend)
    table = unique("torture-crash")
    seeded = seed_schedules(clients, table, n, seed)
    with Consumer(clients, seeded.queue_url) as consumer:
        report = run_workers(
            backend.aws_url,
            table,
            dynamodb_endpoint=backend.dynamodb_url,
            processes=processes,
            kills=kills,
            seed=seed,
            tmp=tmp_path,
            **(CRASHY | opts),
        )
    verdict = verify(seeded, clients, consumer)
    print(
        f"\ncrash run seed={seed}: {processes} processes, {report.kills} kills {dict(report.kill_points)}, "
        f"{report.seconds:.1f}s; {verdict.line()}"
    )
    assert report.kills == kills
    assert verdict.delivered + verdict.dead_lettered == n
    # Crashes are the only failures here: a dead letter can only be a budget crashes used up.
    timeout = f"dispatch timed out after {(CRASHY | opts)['dispatch_timeout']:g}s"
    assert set(verdict.dead_errors) <= {CRASH_EXHAUSTED, timeout}


def test_fast_racing_and_kills(backend: Backend, tmp_path: Path) -> None:
    """The subset `make test` runs: 2 processes, 200 occurrences, 3 kills early in the run."""
    _crash_run(backend, tmp_path, n=200, processes=2, kills=3, seed=11, kill_window=20, lease=2.0, dispatch_timeout=0.2)


@pytest.mark.torture
@pytest.mark.timeout(1800)
def test_racing_workers(backend: Backend, tmp_path: Path) -> None:
    """8 workers race for one backlog; no kills, long lease: exactly one delivery each."""
    n = _size("RACING_N", 1_000)
    clients = _clients(backend)
    table = unique("torture-race")
    t0 = time.monotonic()
    seeded = seed_schedules(clients, table, n, seed=1)
    seeded_s = time.monotonic() - t0
    with Consumer(clients, seeded.queue_url) as consumer:
        report = run_workers(
            backend.aws_url,
            table,
            dynamodb_endpoint=backend.dynamodb_url,
            processes=8,
            kills=0,
            seed=1,
            tmp=tmp_path,
            concurrency=4,
        )
    verdict = verify(seeded, clients, consumer)
    print(
        f"\nracing: {n} schedules seeded in {seeded_s:.1f}s, drained by 8 processes in {report.seconds:.1f}s "
        f"({n / report.seconds:.0f}/s); lost claims {report.total('lost_claims')}; {verdict.line()}"
    )
    assert verdict.delivered == n
    assert report.total("dispatched") == n
    # No lease expired, so no occurrence was claimed twice: no duplicates at all.
    assert verdict.duplicates == report.total("lease_lost") == 0


@pytest.mark.torture
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", [101, 202, 303])
def test_kill_minus_nine_at_random_points(backend: Backend, tmp_path: Path, seed: int) -> None:
    """≥ 50 kills across the three runs (20 each), restarted workers finish the job."""
    _crash_run(backend, tmp_path, n=_size("CRASH_N", 500), processes=4, kills=20, seed=seed)


@pytest.mark.torture
@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", ["claim.after", "send.after"])
def test_crash_on_last_attempt_is_swept_to_dead_letter(backend: Backend, tmp_path: Path, point: str) -> None:
    """max_attempts=1 and a kill right after the claim (or the send): the budget is spent, so the
    next worker sweeps the schedule to dead-letter once the lease expires; the rest are delivered."""
    clients = _clients(backend)
    table = unique("torture-last")
    seeded = seed_schedules(clients, table, 30, seed=7, max_attempts=1)
    with Consumer(clients, seeded.queue_url) as consumer:
        report = run_workers(
            backend.aws_url,
            table,
            dynamodb_endpoint=backend.dynamodb_url,
            processes=1,
            kills=1,
            seed=7,
            tmp=tmp_path,
            kill_window=1,
            kill_points=point,
            **CRASHY,
        )
    verdict = verify(seeded, clients, consumer)
    print(f"\nlast attempt, kill at {point}: {verdict.line()}")
    assert report.kills == 1 and report.kill_points == {point: 1}
    assert verdict.dead_lettered >= 1
    assert set(verdict.dead_errors) == {CRASH_EXHAUSTED}
    assert report.total("swept") == verdict.dead_lettered
    if point == "send.after":  # sent, then the worker died before the ack: delivered AND dead-lettered
        assert verdict.delivered_dead >= 1
    else:
        assert verdict.delivered_dead == 0
