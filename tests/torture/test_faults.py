"""Sink faults and DynamoDB throttling: every schedule ends delivered or dead-lettered, and the
workers' own counts reconcile exactly with the table and the queue."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED

from ..conftest import Backend, unique
from .harness import INJECTED, Consumer, run_workers, seed_schedules, verify


def _fault_run(backend: Backend, tmp_path: Path, *, n: int, processes: int, seed: int) -> None:
    clients = ClientFactory(backend.connection)
    table = unique("torture-faults")
    seeded = seed_schedules(clients, table, n, seed, max_attempts=4)
    with Consumer(clients, seeded.queue_url) as consumer:
        report = run_workers(
            backend.aws_url,
            table,
            dynamodb_endpoint=backend.dynamodb_url,
            processes=processes,
            kills=0,
            seed=seed,
            tmp=tmp_path,
            fail_rate=0.3,
            throttle_rate=0.05,
            lease=5.0,
            dispatch_timeout=0.5,
        )
    verdict = verify(seeded, clients, consumer)
    print(
        f"\nfaults seed={seed}: {processes} processes, {report.seconds:.1f}s, "
        f"sink failures {report.total('sink_failed')}, throttled {report.total('throttled')}, "
        f"retried {report.total('retried')}, acks lost {report.total('lease_lost')}; "
        f"{verdict.line()}"
    )
    assert verdict.delivered + verdict.dead_lettered == n
    # Exact reconciliation between what the workers said and what the table and queue hold:
    # every delivered schedule was acked once by exactly one worker, every dead letter counted once.
    assert report.total("dispatched") == verdict.delivered
    assert report.total("dead_lettered") + report.total("swept") == verdict.dead_lettered
    assert report.total("sink_sent") == verdict.messages
    # A dead letter carries its cause: the injected sink error, or (when throttling ate the ack
    # of the last attempt) the crash-sweep reason.
    # A real send may also time out on a loaded machine: that is a failed attempt like any other.
    timeout = "dispatch timed out after 0.5s"
    assert set(verdict.dead_errors) <= {INJECTED, CRASH_EXHAUSTED, timeout}
    assert verdict.dead_errors[INJECTED] + verdict.dead_errors[timeout] == report.total("dead_lettered")
    # Each claim ends in exactly one of: sent and acked, retried, dead-lettered, ack lost, skipped.
    assert report.total("claimed") == sum(
        report.total(k) for k in ("dispatched", "retried", "dead_lettered", "lease_lost", "skipped")
    )


@pytest.mark.torture
@pytest.mark.timeout(600)
def test_small_sink_faults_and_throttling(backend: Backend, tmp_path: Path) -> None:
    _fault_run(backend, tmp_path, n=200, processes=2, seed=5)


@pytest.mark.torture
@pytest.mark.timeout(1800)
def test_sink_faults_and_throttling(backend: Backend, tmp_path: Path) -> None:
    _fault_run(backend, tmp_path, n=int(os.environ.get("HEXERACT_TORTURE_FAULTS_N", 600)), processes=4, seed=55)
