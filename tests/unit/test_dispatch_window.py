"""When a dispatcher run stops, in both modes (docs/dispatchers.md: the coverage arithmetic).

Continuous: ``RUN_SECONDS`` from now, within the invocation. On-demand: a run stays while something
is due before the latest instant the next run may start (its scheduled start + one period + the
60 s window), then returns; never past that instant plus one dispatch timeout and a small overlap,
never past the invocation. The runs here are real runs of the worker on the memory store, on a
manual clock (sleeping advances it), through ``run_dispatcher`` as the handler calls it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hexeract_scheduler import Dispatcher, InMemoryScheduleStore, ManualClock, ScheduledMessage, SchedulerWorker
from hexeract_scheduler.errors import ConfigError
from hexeract_scheduler.service.bounds import SCHEDULER_DELIVERY_WINDOW_SECONDS
from hexeract_scheduler.service.dispatcher import (
    ON_DEMAND_OVERLAP_SECONDS,
    dispatcher_window,
    next_start_in,
    run_dispatcher,
    scheduled_time,
)
from hexeract_scheduler.service.settings import ON_DEMAND, Settings

TARGET = "sqs:arn:aws:sqs:eu-west-1:123456789012:q"
START = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
ON_DEMAND_SETTINGS = {"dispatch_mode": ON_DEMAND, "dispatch_period_minutes": 1, "run_seconds": 240.0}
NO_LIMIT_MS = 900_000  # an invocation with its whole 15 minutes left


class Sink:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.sent: list[tuple[datetime, object]] = []

    def send_batch(self, target, occurrences):
        self.sent += [(self.clock.now(), o) for o in occurrences]
        return [None] * len(occurrences)


def setup(**settings: object) -> tuple[Settings, ManualClock, InMemoryScheduleStore, Sink, SchedulerWorker]:
    config = Settings(table_name="schedules", **settings)  # type: ignore[arg-type]
    clock = ManualClock(START)
    store = InMemoryScheduleStore()
    sink = Sink(clock)
    worker = SchedulerWorker(store, Dispatcher({"sqs": sink}), config.worker_config(), clock=clock)
    return config, clock, store, sink, worker


def due_in(store: InMemoryScheduleStore, clock: ManualClock, seconds: float) -> ScheduledMessage:
    msg = ScheduledMessage.delay(TARGET, after=timedelta(seconds=seconds), now=clock.now())
    store.insert(msg, clock.now())
    return msg


# -- the window ----------------------------------------------------------------------------------


def test_a_continuous_run_lasts_run_seconds_within_its_invocation():
    settings, clock, *_ = setup()
    window = dispatcher_window(settings, clock, NO_LIMIT_MS, START)
    assert (window.deadline, window.idle_until) == (400.0, None)
    assert window.hard_deadline == 400.0 + 7.5  # half the stop margin later
    short = dispatcher_window(settings, clock, 100_000, START)  # a function Timeout too short
    assert short.deadline == 100.0 - 15.0


def test_on_demand_the_run_waits_for_the_latest_next_start():
    settings, clock, *_ = setup(**ON_DEMAND_SETTINGS)
    period = 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS  # the next scheduled start, at the latest 60 s late
    stay = settings.dispatch_timeout_seconds + ON_DEMAND_OVERLAP_SECONDS
    on_time = dispatcher_window(settings, clock, NO_LIMIT_MS, START)
    assert (on_time.idle_until, on_time.deadline) == (period, period + stay)
    # Started 60 s late: the next start is 60 s away at the latest.
    late = dispatcher_window(settings, clock, NO_LIMIT_MS, START - timedelta(seconds=60))
    assert (late.idle_until, late.deadline) == (60.0, 60.0 + stay)
    # Invoked by hand (no scheduled_time): as if scheduled now.
    assert dispatcher_window(settings, clock, NO_LIMIT_MS, None).idle_until == period
    # A retry long after its start: the next run has started already; one round, then return.
    retry = dispatcher_window(settings, clock, NO_LIMIT_MS, START - timedelta(minutes=5))
    assert (retry.idle_until, retry.deadline) == (0.0, stay)
    # A scheduled time in the future (a clock skew, a hand-made event) waits no more than a period.
    assert next_start_in(settings, START, START + timedelta(hours=1)) == period


def test_on_demand_the_run_stays_within_run_seconds_and_its_invocation():
    settings, clock, *_ = setup(**{**ON_DEMAND_SETTINGS, "run_seconds": 130.0})
    assert dispatcher_window(settings, clock, NO_LIMIT_MS, START).deadline == 130.0
    settings, clock, *_ = setup(**ON_DEMAND_SETTINGS)
    window = dispatcher_window(settings, clock, 50_000, START)  # 50 s left, 15 s of margin
    assert window.deadline == 35.0 and window.hard_deadline <= 50.0
    assert window.idle_until == 120.0  # the worker stops at the deadline all the same


def test_the_scheduled_time_comes_from_the_event():
    assert scheduled_time({"scheduled_time": "2026-12-03T10:00:00Z"}) == START
    for event in ({}, {"scheduled_time": "<aws.scheduler.scheduled-time>"}, {"scheduled_time": "2026-12-03T10:00:00"}):
        assert scheduled_time(event) is None  # unknown, or without a time zone
    assert scheduled_time(["not", "a", "mapping"]) is None


# -- on-demand runs ------------------------------------------------------------------------------


def test_an_on_demand_run_stays_for_what_is_due_before_the_next_start_then_returns():
    """Next start in 60 s, an occurrence due in 30 s: delivered on time, and the run returns."""
    settings, clock, store, sink, worker = setup(**ON_DEMAND_SETTINGS)
    msg = due_in(store, clock, 30)
    with worker:
        window = dispatcher_window(settings, clock, NO_LIMIT_MS, START - timedelta(seconds=60))
        assert window.idle_until == 60.0
        summary = run_dispatcher(worker, window)
    assert summary.dispatched == 1 and sink.sent[0][1].schedule_id == msg.schedule_id
    assert sink.sent[0][0] == START + timedelta(seconds=30)  # on time: slept until it was due
    # and returned right after it (its settling showed nothing else due), not at the next start
    assert clock.monotonic() == pytest.approx(30, abs=0.1)  # returned once it was sent: nothing else due


def test_an_on_demand_run_with_nothing_due_before_the_next_start_returns_after_one_cycle():
    settings, clock, store, sink, worker = setup(**ON_DEMAND_SETTINGS)
    due_in(store, clock, 90)  # after the next start: the next run's
    published = []
    with worker:
        window = dispatcher_window(settings, clock, NO_LIMIT_MS, START - timedelta(seconds=60))
        summary = run_dispatcher(worker, window, published.append)
    assert summary.cycles == 1 and summary.claimed == 0 and sink.sent == []
    assert clock.monotonic() == 0.0  # no waiting at all: an idle run costs one claim round
    assert len(published) == 1  # its metrics still go out (DispatcherNotRunningAlarm)


def test_an_empty_table_costs_one_cycle_too():
    settings, clock, _, _, worker = setup(**ON_DEMAND_SETTINGS)
    with worker:
        summary = run_dispatcher(worker, dispatcher_window(settings, clock, NO_LIMIT_MS, START))
    assert summary.cycles == 1 and clock.monotonic() == 0.0


def test_an_on_demand_run_delivers_what_is_due_just_before_the_latest_next_start():
    settings, clock, store, sink, worker = setup(**ON_DEMAND_SETTINGS)
    due_in(store, clock, 119.5)
    with worker:
        summary = run_dispatcher(worker, dispatcher_window(settings, clock, NO_LIMIT_MS, START))
    assert summary.dispatched == 1 and sink.sent[0][0] == START + timedelta(seconds=119.5)


def test_an_on_demand_run_never_outlives_the_next_start_plus_the_overlap():
    """A steady stream of due occurrences: the run hands over to the next one instead of staying."""
    settings, clock, store, sink, worker = setup(**ON_DEMAND_SETTINGS)
    for second in range(0, 600, 5):
        due_in(store, clock, second)
    with worker:
        window = dispatcher_window(settings, clock, NO_LIMIT_MS, START)
        run_dispatcher(worker, window)
    limit = 120 + settings.dispatch_timeout_seconds + ON_DEMAND_OVERLAP_SECONDS
    assert window.deadline == limit
    assert 120 <= clock.monotonic() <= window.hard_deadline
    assert max(at for at, _ in sink.sent) <= START + timedelta(seconds=limit)
    assert min(at for at, _ in sink.sent) == START  # what was due at the start went first
    assert all(at == START + timedelta(seconds=5 * i) for i, (at, _) in enumerate(sink.sent))  # all on time


def test_an_on_demand_run_never_outlives_its_invocation():
    settings, clock, store, _, worker = setup(**ON_DEMAND_SETTINGS)
    due_in(store, clock, 30)
    with worker:
        window = dispatcher_window(settings, clock, 20_000, START)  # 20 s left, 15 s of margin
        summary = run_dispatcher(worker, window)
    assert window.deadline == 5.0
    assert clock.monotonic() <= window.hard_deadline < 20.0
    assert summary.dispatched == 0  # due after the run: the next run's


def test_a_continuous_run_polls_until_its_deadline_even_when_idle():
    settings, clock, store, _, worker = setup(run_seconds=130.0, dispatch_period_minutes=1)
    due_in(store, clock, 100)
    with worker:
        summary = run_dispatcher(worker, dispatcher_window(settings, clock, NO_LIMIT_MS, START))
    assert summary.dispatched == 1
    assert 130 - settings.dispatch_timeout_seconds - 1 <= clock.monotonic() <= 130


# -- settings ------------------------------------------------------------------------------------


def test_the_mode_is_read_and_checked_at_cold_start():
    base = {"TABLE_NAME": "schedules", "DISPATCH_PERIOD_MINUTES": "1", "RUN_SECONDS": "240"}
    assert Settings.from_env({**base, "DISPATCH_MODE": "on-demand"}).on_demand
    assert Settings.from_env({**base, "DISPATCH_MODE": "On-Demand"}).on_demand
    assert not Settings.from_env({**base, "DISPATCH_MODE": "continuous"}).on_demand
    assert not Settings.from_env(base).on_demand  # the default
    with pytest.raises(ConfigError, match=r"^DISPATCH_MODE: expected continuous or on-demand, got 'lazy'$"):
        Settings.from_env({**base, "DISPATCH_MODE": "lazy"})
    with pytest.raises(ConfigError, match=r"^DISPATCH_MODE: expected continuous or on-demand, got 'lazy'$"):
        Settings(table_name="schedules", dispatch_mode="lazy")
    with pytest.raises(ConfigError, match=r"^DISPATCH_PERIOD_MINUTES: required with DISPATCH_MODE=on-demand"):
        Settings.from_env({**base, "DISPATCH_MODE": "on-demand", "DISPATCH_PERIOD_MINUTES": ""})


def test_an_on_demand_run_must_be_able_to_reach_the_next_start():
    """RUN_SECONDS >= period + 60 s window + DISPATCH_TIMEOUT_SECONDS, as in continuous mode: the
    template's 240 s accept dispatch timeouts up to 120 s in on-demand mode."""
    ok = Settings(table_name="schedules", **ON_DEMAND_SETTINGS, dispatch_timeout_seconds=120.0, lease_seconds=1200)
    assert ok.on_demand
    with pytest.raises(ConfigError) as info:
        Settings(table_name="schedules", **ON_DEMAND_SETTINGS, dispatch_timeout_seconds=121.0, lease_seconds=1210)
    assert str(info.value) == (
        "RUN_SECONDS (240) is too short, an on-demand run could not stay until the next one starts: it must be "
        ">= DISPATCH_PERIOD_MINUTES x 60 + 60 + DISPATCH_TIMEOUT_SECONDS = 241"
    )
