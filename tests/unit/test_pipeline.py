"""The worker's pipelined run loop and its on-demand exit, on the memory store (no network).

The memory store keeps the same contract as the DynamoDB one (tests/contract), so what is checked
here is the worker: how many batches it keeps in flight, that one look at the due index claims
several batches, that a stopping or caught-up worker settles what it claimed, and when a run with
``idle_until`` returns.
"""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import pytest

from hexeract_scheduler import (
    Dispatcher,
    InMemoryScheduleStore,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
)
from hexeract_scheduler.domain.model import ScheduleStatus
from hexeract_scheduler.errors import ConfigError

TARGET = "sqs:arn:aws:sqs:eu-west-1:123456789012:q"


class GatedSink:
    """Records sends; each send_batch waits until the gate opens, and the most batches ever being
    sent at once is kept."""

    def __init__(self, *, open_: bool = True) -> None:
        self.gate = threading.Event()
        if open_:
            self.gate.set()
        self.sent: list = []
        self.active = 0
        self.most_active = 0
        self.started = threading.Semaphore(0)
        self._lock = threading.Lock()

    def send_batch(self, target, occurrences):
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        self.started.release()
        assert self.gate.wait(10), "the test never opened the gate"
        with self._lock:
            self.active -= 1
            self.sent += occurrences
        return [None] * len(occurrences)


class CountingStore(InMemoryScheduleStore):
    def __init__(self) -> None:
        super().__init__()
        self.claim_limits: list[int] = []

    def claim_due(self, now, lease, limit, **kwargs):
        self.claim_limits.append(limit)
        return super().claim_due(now, lease, limit, **kwargs)


def backlog(store, clock, n: int) -> None:
    for _ in range(n):
        store.insert(ScheduledMessage.delay(TARGET, after=timedelta(0), now=clock.now()), clock.now())


def worker(store, sink, clock, **config) -> SchedulerWorker:
    return SchedulerWorker(store, Dispatcher({"sqs": sink}), SchedulerWorkerConfig(**config), clock=clock)


def test_one_look_at_the_index_claims_batches_for_every_free_lane():
    clock, store, sink = ManualClock(), CountingStore(), GatedSink()
    backlog(store, clock, 45)
    with worker(store, sink, clock, batch_size=10, batches_in_flight=4) as w:
        summary = w.run(cycles=1)
    assert store.claim_limits == [40]  # four batches' worth in one claim
    assert summary.claimed == summary.dispatched == 40 and len(sink.sent) == 40


def test_batches_overlap_up_to_the_depth_and_never_beyond():
    clock, store, sink = ManualClock(), CountingStore(), GatedSink(open_=False)
    backlog(store, clock, 60)
    with worker(store, sink, clock, batch_size=5, batches_in_flight=3, concurrency=16) as w:
        done: list = []
        runner = threading.Thread(target=lambda: done.append(w.run(cycles=30)))
        runner.start()
        for _ in range(3):  # three batches are being sent at once, none of them acked yet
            assert sink.started.acquire(timeout=10)
        assert not sink.started.acquire(timeout=0.3)  # and no fourth while they are in flight
        assert store.claim_limits == [15]
        sink.gate.set()
        runner.join(10)
    [summary] = done
    assert sink.most_active == 3
    assert summary.dispatched == len(sink.sent) == 60
    assert store.claim_limits[0] == 15 and max(store.claim_limits) <= 15
    assert min(store.claim_limits) >= 10  # a claim waits until at least half the lanes are free
    assert store.list_pending(limit=10) == []


def test_a_stopping_worker_settles_every_batch_it_claimed():
    clock, store, sink = ManualClock(), InMemoryScheduleStore(), GatedSink(open_=False)
    backlog(store, clock, 30)
    with worker(store, sink, clock, batch_size=10, batches_in_flight=3) as w:
        done: list = []
        runner = threading.Thread(target=lambda: done.append(w.run()))
        runner.start()
        for _ in range(3):
            assert sink.started.acquire(timeout=10)
        w.stop()
        sink.gate.set()
        runner.join(10)
    [summary] = done
    assert summary.claimed == summary.dispatched == 30
    assert all(store.inspect(o.schedule_id).status is ScheduleStatus.DELIVERED for o in sink.sent)


def test_without_a_backlog_each_round_is_settled_before_the_worker_waits():
    """Caught up, the loop behaves as one cycle at a time: a failure's retry is seen by the next
    round, not raced by it."""
    clock, store = ManualClock(), InMemoryScheduleStore()
    calls = []

    class FailOnce:
        def send_batch(self, target, occurrences):
            calls.append(len(occurrences))
            return ["boom"] if len(calls) == 1 else [None] * len(occurrences)

    store.insert(ScheduledMessage.delay(TARGET, after=timedelta(0), now=clock.now(), max_attempts=2), clock.now())
    w = SchedulerWorker(
        store,
        Dispatcher({"sqs": FailOnce()}),
        SchedulerWorkerConfig(retry_base_delay=timedelta(milliseconds=50), jitter=False),
        clock=clock,
    )
    with w:
        summary = w.run(cycles=10)
    assert summary.retried == 1 and summary.dispatched == 1 and calls == [1, 1]


def test_an_on_demand_run_stays_for_what_is_due_before_the_next_start_then_returns():
    clock, store, sink = ManualClock(), InMemoryScheduleStore(), GatedSink()
    msg = ScheduledMessage.delay(TARGET, after=timedelta(seconds=30), now=clock.now())
    store.insert(msg, clock.now())
    with worker(store, sink, clock) as w:
        start = clock.monotonic()
        summary = w.run(deadline=start + 70, idle_until=start + 60)
    assert summary.dispatched == 1 and sink.sent[0].schedule_id == msg.schedule_id
    assert summary.lag_ms == [0]  # slept until its instant, not a poll interval past it
    assert clock.monotonic() - start == pytest.approx(30, abs=0.2)  # and returned once it was done


def test_an_on_demand_run_with_nothing_due_before_the_next_start_returns_after_one_round():
    clock, store, sink = ManualClock(), InMemoryScheduleStore(), GatedSink()
    store.insert(ScheduledMessage.delay(TARGET, after=timedelta(seconds=90), now=clock.now()), clock.now())
    with worker(store, sink, clock) as w:
        start = clock.monotonic()
        summary = w.run(deadline=start + 70, idle_until=start + 60)
    assert summary.cycles == 1 and summary.claimed == 0 and sink.sent == []
    assert clock.monotonic() == start


def test_the_depth_is_validated_and_derived_from_the_concurrency():
    assert SchedulerWorkerConfig().pipeline_depth == 8  # 16 threads, batches of 10
    assert SchedulerWorkerConfig(concurrency=1, batch_size=5).pipeline_depth == 4
    assert SchedulerWorkerConfig(batches_in_flight=1).pipeline_depth == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="batches_in_flight"):
            SchedulerWorkerConfig(batches_in_flight=bad)


def test_a_caught_up_worker_wakes_for_the_next_instant_its_acks_just_wrote():
    """The look-ahead of a round predates the reschedules its batches write: after settling them
    the worker looks again, so a cron firing every second keeps its lag to the send time and never
    drifts past an instant (skipping it), even with a poll interval of a whole second."""
    clock, store = ManualClock(), InMemoryScheduleStore()
    sent = []

    class SlowSink:  # each send takes 300 ms of the manual clock
        def send_batch(self, target, occurrences):
            clock.advance(0.3)
            sent.extend(occurrences)
            return [None] * len(occurrences)

    store.insert(ScheduledMessage.cron(TARGET, "* * * * * *"), clock.now())
    config = SchedulerWorkerConfig(poll_interval=timedelta(seconds=1), dispatch_timeout=timedelta(seconds=1))
    with SchedulerWorker(store, Dispatcher({"sqs": SlowSink()}), config, clock=clock) as w:
        summary = w.run(deadline=clock.monotonic() + 21)
    instants = [o.scheduled_for for o in sent]
    assert len(instants) >= 18
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(instants))  # none skipped
    assert max(summary.lag_ms) <= 300
