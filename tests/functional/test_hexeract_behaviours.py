"""hexeract behaviours its own tests assert, on both DynamoDB backends (and the two paths a strict
DynamoDB used to refuse: a cron's reschedule and a failed attempt's retry)."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest

from hexeract_scheduler import OccurrenceId, ScheduledMessage, ScheduleStatus
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.errors import ConfigError, StoreError, TableMissing

from ..conftest import T0, Backend, make_worker

S = timedelta(seconds=1)


def _attr(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def test_a_cron_firing_every_second_delivers_every_instant(store, clients, clock, queue):
    msg = ScheduledMessage.cron(queue.target, "* * * * * *")
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    for _ in range(10):
        clock.advance(1)
        summary = worker.run_once()
        assert (summary.dispatched, summary.rescheduled, summary.lease_lost) == (1, 1, 0)
    messages = queue.receive_all()
    stamps = sorted(_attr(m, "scheduled_for") for m in messages)
    assert stamps == [f"2026-12-02T10:00:{s:02d}.000Z" for s in range(1, 11)]  # every instant, once
    assert len({_attr(m, "occurrence_id") for m in messages}) == 10
    snap = store.inspect(msg.schedule_id)
    assert (snap.status, snap.attempts, snap.scheduled_for) == (ScheduleStatus.PENDING, 0, T0 + 11 * S)


def test_a_reschedule_is_logged_and_counted_apart_from_a_final_delivery(store, clients, clock, queue, caplog):
    cron = ScheduledMessage.cron(queue.target, "* * * * * *")
    once = ScheduledMessage.delay(queue.target, at=clock.now() + S)
    store.insert(cron, clock.now())
    store.insert(once, clock.now())
    worker = make_worker(store, clients, clock)
    clock.advance(1)
    with caplog.at_level(logging.INFO, logger="hexeract_scheduler"):
        summary = worker.run_once()
    assert (summary.dispatched, summary.rescheduled) == (2, 1)
    assert summary.as_dict()["rescheduled"] == 1
    [record] = [r for r in caplog.records if r.getMessage().startswith("rescheduled")]
    assert record.schedule_id == str(cron.schedule_id)  # type: ignore[attr-defined]
    assert record.occurrence_id == str(OccurrenceId.derive(cron.schedule_id, T0 + S))  # type: ignore[attr-defined]
    assert "2026-12-02T10:00:02.000Z" in record.getMessage()


def test_a_failed_attempt_records_its_error_and_backoff(store, clients, clock, backend: Backend):
    broken = f"sqs:{backend.aws_url}/123456789012/missing-{uuid.uuid4().hex[:8]}"
    msg = ScheduledMessage.delay(broken, at=clock.now(), max_attempts=3)
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock, retry_base_delay=S, retry_max_delay=60 * S)
    summary = worker.run_once()
    assert (summary.retried, summary.lease_lost) == (1, 0)  # the fenced write landed
    snap = store.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.attempts == 1
    assert snap.last_error and "does not exist" in snap.last_error.lower()
    assert snap.leased_until == T0 + 2 * S  # retry_base_delay x 2^attempts, no jitter
    assert snap.next_attempt == T0 + 2 * S


def test_a_delivery_after_failures_keeps_the_last_error(store, clients, clock, backend: Backend):
    """hexeract: mark_delivered keeps ``last_error`` (what failed before the success stays
    inspectable); a cron's reschedule starts its next occurrence with none."""
    broken = f"sqs:{backend.aws_url}/123456789012/late-{uuid.uuid4().hex[:8]}"
    once = ScheduledMessage.delay(broken, at=clock.now(), max_attempts=3)
    cron = ScheduledMessage.cron(broken, "* * * * * *", max_attempts=3)
    store.insert(once, clock.now())
    clock.advance(1)
    store.insert(cron, clock.now() - S)
    worker = make_worker(store, clients, clock, retry_base_delay=S, retry_max_delay=S)
    assert worker.run_once().retried == 2
    clients.sqs().create_queue(QueueName=broken.rsplit("/", 1)[1])
    clock.advance(1)
    assert worker.run_once().dispatched == 2
    delivered = store.inspect(once.schedule_id)
    assert delivered.status is ScheduleStatus.DELIVERED and delivered.last_error
    assert store.inspect(cron.schedule_id).last_error is None


def test_replay_keeps_the_occurrence_id(store, clients, clock, backend: Backend):
    broken = f"sqs:{backend.aws_url}/123456789012/replayed-{uuid.uuid4().hex[:8]}"
    msg = ScheduledMessage.delay(broken, at=clock.now(), max_attempts=1)
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    assert worker.run_once().dead_lettered == 1
    url = clients.sqs().create_queue(QueueName=broken.rsplit("/", 1)[1])["QueueUrl"]
    clock.advance(3600)
    store.replay(msg.schedule_id, clock.now())
    assert worker.run_once().dispatched == 1
    [message] = clients.sqs().receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert _attr(message, "occurrence_id") == str(OccurrenceId.derive(msg.schedule_id, T0))
    assert _attr(message, "scheduled_for") == "2026-12-02T10:00:00.000Z"


class _FailingOnce:
    """The store, except that the first ``claim_due`` fails with ``error``."""

    def __init__(self, store: Any, error: Exception) -> None:
        self._store = store
        self._error: Exception | None = error

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._store.claim_due(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_failed_cycle_is_logged_and_the_loop_goes_on(store, clients, clock, queue, caplog):
    msg = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(msg, clock.now())
    worker = make_worker(
        _FailingOnce(store, StoreError("reading the due index: ValidationException: boom")), clients, clock
    )
    start = clock.monotonic()
    with caplog.at_level(logging.ERROR, logger="hexeract_scheduler"):
        total = worker.run(cycles=2)
    assert (total.failed_cycles, total.dispatched) == (1, 1)
    assert clock.monotonic() - start >= worker.config.poll_interval.total_seconds()  # backed off, no spin
    [record] = [r for r in caplog.records if "poll cycle failed" in r.getMessage()]
    assert record.exc_info and "boom" in str(record.exc_info[1])


@pytest.mark.parametrize("error", [TableMissing("no table"), ConfigError("bad shards")])
def test_configuration_errors_still_end_the_loop(store, clients, clock, error):
    worker = make_worker(_FailingOnce(store, error), clients, clock)
    with pytest.raises(type(error)):
        worker.run(cycles=3)


def test_a_batch_time_that_overflows_is_a_config_error():
    with pytest.raises(ConfigError, match="batch_size"):
        SchedulerWorkerConfig(batch_size=10**12, dispatch_timeout=timedelta(days=10**6), lease=timedelta(days=1))
