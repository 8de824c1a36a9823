"""The dispatcher function's run: when it stops (its window), and the worker's run within it,
publishing metrics as it goes; in on-demand mode, only while something is due before the next run
starts. The handler is a few lines of wiring over this module and ``service.compose``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hexeract_scheduler.domain.clock import Clock, to_ms
from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.service.bounds import SCHEDULER_DELIVERY_WINDOW_SECONDS
from hexeract_scheduler.service.settings import Settings

log = logging.getLogger("hexeract_scheduler")

# How often a dispatcher run publishes its metrics (so alarms see a run's trouble within about a
# minute, not when the run ends).
METRICS_EVERY_SECONDS = 60.0
# On-demand: how long after the latest next start (plus one dispatch timeout, for a batch claimed
# just before it) a run may still work, so that the two runs overlap instead of leaving a gap.
ON_DEMAND_OVERLAP_SECONDS = 5.0


@dataclass(frozen=True)
class RunWindow:
    """When a dispatcher run stops (``clock.monotonic()`` instants).

    ``deadline``: no cycle starts unless a whole batch fits before it. ``hard_deadline``: half the
    stop margin later, no AWS call is awaited any more, so the invocation returns within its stop
    margin even when an endpoint hangs (a request's own timeouts and retries can take far longer).
    ``idle_until`` (on-demand mode only): the latest instant the next run may start. The worker's
    claims look ahead to it, and the run returns as soon as nothing is due before it.
    """

    deadline: float
    hard_deadline: float
    idle_until: float | None = None


def next_start_in(settings: Settings, now: datetime, scheduled: datetime | None) -> float:
    """Seconds from ``now`` to the latest instant the next run may start: this run's scheduled start
    (``now`` if unknown) + one period + EventBridge Scheduler's delivery window, never negative
    (a retried run, started late, only catches up) and never more than a period and a window."""
    period = (settings.dispatch_period_minutes or 1) * 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS
    start = now if scheduled is None else scheduled
    return min(max((start - now) / timedelta(seconds=1) + period, 0.0), float(period))


def dispatcher_window(
    settings: Settings, clock: Clock, remaining_ms: int, scheduled: datetime | None = None
) -> RunWindow:
    """When this run stops, the hard deadline half a stop margin later.

    Continuous mode: ``RUN_SECONDS`` from now. On-demand mode: once nothing is due before the
    latest next start (``next_start_in``; ``scheduled`` is this run's scheduled start), and at the
    latest one dispatch timeout and ``ON_DEMAND_OVERLAP_SECONDS`` after it, within ``RUN_SECONDS``.
    Either way, never later than the invocation's remaining time less ``STOP_MARGIN_SECONDS``.
    """
    wanted = settings.run_seconds
    idle_in: float | None = None
    if settings.on_demand:
        idle_in = next_start_in(settings, clock.now(), scheduled)
        stay = idle_in + settings.dispatch_timeout_seconds + ON_DEMAND_OVERLAP_SECONDS
        wanted = min(wanted, stay)
    available = remaining_ms / 1000 - settings.stop_margin_seconds
    budget = min(wanted, available)
    if budget < wanted:
        log.warning(
            "the invocation has %.1fs left: running %.1fs instead of %.1fs "
            "(function Timeout < RUN_SECONDS + STOP_MARGIN_SECONDS + cold start leaves gaps between runs)",
            remaining_ms / 1000,
            max(budget, 0.0),
            wanted,
        )
    start = clock.monotonic()
    deadline = start + max(budget, 0.0)
    idle_until = None if idle_in is None else start + idle_in
    return RunWindow(deadline, deadline + settings.stop_margin_seconds / 2, idle_until)


def scheduled_time(event: Any) -> datetime | None:
    """The event's ``scheduled_time`` (the ``<aws.scheduler.scheduled-time>`` context attribute the
    template puts in the input), if it has a valid one with a time zone."""
    raw = event.get("scheduled_time") if isinstance(event, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        scheduled = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return scheduled if scheduled.tzinfo is not None else None


def invocation_delay_ms(event: Any, now: datetime) -> int | None:
    """How late EventBridge Scheduler invoked us: now less the event's ``scheduled_time``, if any."""
    scheduled = scheduled_time(event)
    return None if scheduled is None else max(to_ms(now) - to_ms(scheduled), 0)


def run_dispatcher(
    worker: SchedulerWorker,
    window: RunWindow,
    publish: Callable[[CycleSummary], None] | None = None,
) -> CycleSummary:
    """Run ``worker`` within ``window``; hand a summary to ``publish`` about once a minute and at
    the end. Returns the whole run's summary.

    The run is cut into chunks of cycles, never of time: a time-limited chunk would stop polling
    one dispatch timeout before its end, leaving a gap each time. With ``window.idle_until`` (on
    demand) the worker also returns once nothing is due before it; a chunk of fewer cycles than
    asked tells the run is over, so a chunk has at least 2 (an idle first round returns after 1).
    """
    cycles = max(1, round(METRICS_EVERY_SECONDS / worker.config.poll_interval.total_seconds()))
    if window.idle_until is not None:
        cycles = max(cycles, 2)
    total = CycleSummary()
    while True:
        chunk = worker.run(
            deadline=window.deadline, cycles=cycles, hard_deadline=window.hard_deadline, idle_until=window.idle_until
        )
        total.add(chunk)
        if publish is not None:
            publish(chunk)
        if chunk.cycles < cycles:  # the deadline, stop() or (on demand) nothing more due ended it
            return total
