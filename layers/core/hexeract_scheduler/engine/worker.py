"""SchedulerWorker: claim due occurrences, dispatch them, acknowledge each with a fenced write."""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from hexeract_scheduler.concurrency import DaemonExecutor, InFlight, map_concurrently, no_answer
from hexeract_scheduler.domain.clock import Clock, SystemClock, from_ms, to_ms
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.engine.config import SchedulerWorkerConfig, retry_delay
from hexeract_scheduler.engine.settle import Settled, occurrence_keys, settle
from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.errors import ConfigError, EndpointUnreachable, RetryableError, TableMissing
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED, ClaimBatch, ScheduleStore

__all__ = ["CycleSummary", "SchedulerWorker", "SchedulerWorkerConfig", "Settled", "retry_delay"]

log = logging.getLogger("hexeract_scheduler")

MAX_UNREACHABLE_IN_ROW = 5
MAX_REPORTED_KEYS = 10_000
STUCK_RECHECK_SECONDS = 300.0


class SchedulerWorker:
    """Claims due occurrences in batches, dispatches them, and settles each with a fenced ack.

    Delivery is at-least-once: an occurrence is sent before it is acked, so a crash in between
    leads to another send of the same occurrence id after the lease expires. Sends and acks of a
    batch run concurrently on a thread pool (boto3 clients are thread-safe); the store runs its
    own claims as it is configured to.
    """

    def __init__(
        self,
        store: ScheduleStore,
        dispatcher: Dispatcher,
        config: SchedulerWorkerConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        executor: Executor | None = None,
        owns_executor: bool = False,
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.config = config or SchedulerWorkerConfig()
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self._own_executor = executor is None or owns_executor  # close() shuts it down
        self.executor = executor or ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="hexeract")
        self._stop = threading.Event()
        self._ready: str | None = None
        self._reported: set[str] = set()  # unreadable keys already logged
        self._stuck: dict[str, float] = {}  # unreadable keys -> clock.monotonic() to look at again
        self._run_by: float | None = None  # run()'s hard deadline
        self._stop_by: float | None = None  # stop()'s grace
        self._lane_pool: Executor | None = None

    def close(self) -> None:
        if self._lane_pool is not None:
            self._lane_pool.shutdown(wait=False)
        if self._own_executor:
            self.executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> SchedulerWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop(self, grace: float | None = None) -> None:
        """Ask ``run`` to return after the current cycle; with ``grace`` (seconds), no AWS call of
        that cycle is awaited longer than that from now (a hung request must not hold a stopping
        worker)."""
        if grace is not None:
            self._stop_by = self.clock.monotonic() + grace
        self._stop.set()

    def _hard_deadline(self) -> float | None:
        """The ``clock.monotonic()`` instant past which no AWS call is awaited, if any."""
        limits = [t for t in (self._run_by, self._stop_by) if t is not None]
        return min(limits) if limits else None

    def _time_left(self) -> float | None:
        hard = self._hard_deadline()
        return None if hard is None else hard - self.clock.monotonic()

    def ready(self, timeout: float | None = None) -> str:
        """Ask the store whether claims can work (a missing table fails here), waiting at most
        ``timeout`` seconds (else the run's deadline); returns what claims read, for messages."""
        if self._ready is None:
            time_left = self._time_left
            if timeout is not None:
                until = self.clock.monotonic() + timeout
                time_left = lambda: until - self.clock.monotonic()  # noqa: E731
            late = no_answer(f"opening {self.store.name}")
            self._ready = map_concurrently(
                self.executor, lambda _: self.store.ready(), [None], time_left=time_left, late=late
            )[0]
        return self._ready

    # -- one cycle -------------------------------------------------------------------------

    def run_once(self) -> CycleSummary:
        """One poll cycle: claim up to ``batch_size`` due occurrences, send them, ack each.

        Under a hard deadline (``run(hard_deadline=...)``, ``stop(grace=...)``) no call is awaited
        past it: a claim not answered in time is left to expire unsent, a send not answered counts
        as a failed attempt, an ack not answered as a lost one (the lease expires, the occurrence
        is claimed again). Nothing is lost, and the cycle returns on time.
        """
        summary, leased = self._claim_round(self.config.batch_size, self.config.poll_interval)
        if leased:
            summary.add(self._deliver(leased))
        return summary

    def _claim_round(
        self, limit: int, horizon: timedelta, in_flight: frozenset[str] = frozenset()
    ) -> tuple[CycleSummary, list[LeasedOccurrence]]:
        """Claim up to ``limit`` due occurrences (one look at the due index for all of them),
        reading past ``in_flight`` (keys this worker holds: a stale index may still show them)."""
        summary = CycleSummary(cycles=1)
        left = self._time_left()
        if left is not None and left <= 0:
            return summary, []
        self.ready()
        now_mono = self.clock.monotonic()
        for key in [k for k, until in self._stuck.items() if until <= now_mono]:
            del self._stuck[key]
        batch = self.store.claim_due(
            self.clock.now(),
            self.config.lease,
            limit,
            horizon=horizon,
            skip=frozenset(self._stuck) | in_flight,
            time_left=self._time_left,
        )
        self._report(batch, summary)
        for occ in batch.leased:
            log.debug("claimed: attempt %d of %d", occ.attempt, occ.max_attempts, extra=occurrence_keys(occ))
        return summary, batch.leased

    def _deliver(self, leased: list[LeasedOccurrence]) -> CycleSummary:
        """Send one claimed batch and settle each occurrence with its fenced ack, within the
        batch's lease (nothing is sent on an expired lease) and the run's hard deadline."""
        cfg = self.config
        summary = CycleSummary()
        # Sending on an expired lease would race the worker that may have re-claimed it.
        now = self.clock.now()
        live = [o for o in leased if not o.lease_expired(now)]
        summary.skipped = len(leased) - len(live)
        sent_at: dict[str, datetime] = {}

        def on_sent(occ: LeasedOccurrence) -> None:
            sent_at[occ.lease_token] = self.clock.now()
            log.debug("sent", extra=occurrence_keys(occ))

        timeout = cfg.dispatch_timeout.total_seconds()
        left = self._time_left()
        if left is not None:
            timeout = max(min(timeout, left), 0.0)
        outcomes = self.dispatcher.dispatch(live, executor=self.executor, timeout=timeout, on_sent=on_sent)

        def unanswered(pair: tuple[LeasedOccurrence, Any]) -> tuple[Settled, bool]:
            log.error("ack not answered within the time left, the lease will expire", extra=occurrence_keys(pair[0]))
            return Settled.ACK_FAILED, False

        results = map_concurrently(
            self.executor,
            lambda pair: settle(self.store, pair[0], pair[1], self.clock.now(), self.config, self.rng),
            list(zip(live, outcomes, strict=True)),
            time_left=self._time_left,
            late=unanswered,
        )
        for occ, (settled, applied) in zip(live, results, strict=True):
            if not applied:
                summary.lease_lost += 1
                log.info("lease lost before ack; another worker owns the occurrence", extra=occurrence_keys(occ))
            elif settled in (Settled.DELIVERED, Settled.RESCHEDULED):
                summary.dispatched += 1
                summary.rescheduled += settled is Settled.RESCHEDULED
                summary.lag_ms.append(to_ms(sent_at.get(occ.lease_token, now)) - to_ms(occ.scheduled_for))
            elif settled is Settled.RETRIED:
                summary.retried += 1
            else:
                summary.dead_lettered += 1
        return summary

    def _report(self, batch: ClaimBatch, summary: CycleSummary) -> None:
        """Count and log what the claim did besides leasing."""
        summary.claimed = len(batch.leased)
        summary.swept = len(batch.swept)
        summary.lost_claims = batch.lost
        summary.next_due_ms = batch.next_due_ms
        summary.more_due = batch.more_due
        summary.quarantined = len(batch.quarantined)
        summary.unreadable = len(batch.unreadable)
        for error in batch.errors:
            log.warning("claim left for the next cycle: %s", error)
        for sid in batch.swept:
            log.warning("swept to dead-letter: %s", CRASH_EXHAUSTED, extra={"schedule_id": str(sid)})
        for key, reason in batch.quarantined:
            log.error("quarantined (dead-lettered): %s", reason, extra={"item_key": key})
        for key, reason in batch.unreadable:
            # Read past it for a while (it would hide the entries behind it), then look again.
            if len(self._stuck) < MAX_REPORTED_KEYS:
                self._stuck[key] = self.clock.monotonic() + STUCK_RECHECK_SECONDS
            if key not in self._reported and len(self._reported) < MAX_REPORTED_KEYS:
                self._reported.add(key)
                log.error(
                    "unreadable item left in place (could not be quarantined): %s", reason, extra={"item_key": key}
                )

    # -- the loop --------------------------------------------------------------------------

    def run(
        self,
        *,
        deadline: float | None = None,
        cycles: int | None = None,
        hard_deadline: float | None = None,
        idle_until: float | None = None,
    ) -> CycleSummary:
        """Poll until ``deadline`` (a ``clock.monotonic()`` value), ``cycles`` claim rounds, or ``stop()``.

        Pipelined: while a backlog lasts, the next claim round runs while the batches already
        claimed are sent and acked on lane threads, at most ``config.pipeline_depth`` batches in
        flight; once half the lanes are free, one look at the due index claims batches for all of
        them. Each batch is settled within its own lease, nothing sent on an expired lease.
        Once caught up, the loop settles everything in flight before it waits, and it always does
        before it returns: a stopping worker settles what it claimed (within ``hard_deadline`` /
        ``stop(grace)``, past which, as in ``run_once``, calls are abandoned to their leases).

        A round starts only if a whole batch (``dispatch_timeout``) still fits before the deadline.
        Between rounds: ``min_cycle_delay`` when a full claim was made (there may be more), else
        sleep until the next due instant seen in the look-ahead, or ``poll_interval`` at most.
        With ``idle_until`` (a ``clock.monotonic()`` value), claims look ahead that far, and the run
        returns as soon as a round claims nothing, nothing is in flight, and nothing is due before
        it (the on-demand dispatcher: the next run, started by then, takes over).

        Throttling and transient AWS errors back off and retry. Any other failure of a round is
        logged with its cause and the loop goes on after ``poll_interval`` (as hexeract's does): in a
        Lambda run, one bad item or request must not leave every other schedule undelivered until
        the next run. Only configuration errors (a missing table, an incoherent setting) and an
        endpoint that stays unreachable end the loop, since no later round can do better.
        """
        cfg = self.config
        total = CycleSummary()
        budget = cfg.dispatch_timeout.total_seconds()
        errors_in_row = 0
        self._run_by = hard_deadline
        lanes: InFlight[CycleSummary] = InFlight(self._lanes(), self._time_left)
        try:
            while not self._stop.is_set():
                lanes.collect(total.add)
                if deadline is not None and self.clock.monotonic() + budget > deadline:
                    break
                if cycles is not None and total.cycles >= cycles:
                    break
                left = self._time_left()
                if left is not None and left <= 0:
                    break
                free = cfg.pipeline_depth - len(lanes)
                if free <= 0 or (lanes and 2 * free < cfg.pipeline_depth):  # claim for half the lanes at least
                    lanes.wait_one()
                    continue
                horizon = cfg.poll_interval
                if idle_until is not None:
                    horizon = max(horizon, timedelta(seconds=idle_until - self.clock.monotonic()))
                limit = free * cfg.batch_size
                try:
                    cycle, leased = self._claim_round(limit, horizon, lanes.keys())
                    errors_in_row = 0
                except (RetryableError, EndpointUnreachable) as exc:
                    # Throttling, a 5xx or a network blip: back off and poll again. An endpoint that
                    # stays unreachable is a configuration problem: give up after a few tries.
                    errors_in_row += 1
                    if isinstance(exc, EndpointUnreachable) and errors_in_row > MAX_UNREACHABLE_IN_ROW:
                        raise
                    pause = min(cfg.poll_interval.total_seconds() * 2**errors_in_row, 5.0)
                    log.warning("transient AWS error, backing off %.2fs: %s", pause, exc)
                    self._sleep(pause, deadline)
                    total.cycles += 1
                    continue
                except (ConfigError, TableMissing):
                    raise
                except Exception:
                    errors_in_row = 0
                    log.exception("poll cycle failed, going on after poll_interval")
                    total.cycles += 1
                    total.failed_cycles += 1
                    self._sleep(cfg.poll_interval.total_seconds(), deadline)
                    continue
                total.add(cycle)
                for i in range(0, len(leased), cfg.batch_size):
                    batch = leased[i : i + cfg.batch_size]
                    lanes.submit(frozenset(str(o.schedule_id) for o in batch), self._deliver_batch, batch)
                # More may be due: go again at once, but only after a round that made progress; one
                # that claimed nothing (every due entry refused) waits like an idle one, never spins.
                progressed = cycle.claimed or cycle.swept or cycle.quarantined
                if progressed and (cycle.more_due or cycle.claimed == limit):
                    self._sleep(cfg.min_cycle_delay.total_seconds(), deadline)
                    continue
                if lanes.drain(total.add):  # caught up: settle, then look again (reschedules just written)
                    continue
                if idle_until is not None and not (progressed or cycle.more_due or cycle.next_due_ms):
                    break
                wait = cfg.poll_interval.total_seconds()
                if cycle.next_due_ms is not None:
                    wait = min(wait, max((from_ms(cycle.next_due_ms) - self.clock.now()).total_seconds(), 0.0))
                self._sleep(max(wait, cfg.min_cycle_delay.total_seconds()), deadline)
        finally:
            lanes.drain(total.add)
        return total

    def _deliver_batch(self, leased: list[LeasedOccurrence]) -> CycleSummary:
        """``_deliver`` on a lane thread: a failure is logged and counted, never lost in a future."""
        try:
            return self._deliver(leased)
        except Exception:
            log.exception("delivering a batch failed: its leases will expire and it will be claimed again")
            return CycleSummary(failed_cycles=1)

    def _lanes(self) -> Executor:
        """Daemon threads sending and acking claimed batches (calls on ``executor``): never hold exit."""
        self._lane_pool = self._lane_pool or DaemonExecutor(self.config.pipeline_depth, name="hexeract-lane")
        return self._lane_pool

    def _sleep(self, seconds: float, deadline: float | None) -> None:
        limits = [t for t in (deadline, self._hard_deadline()) if t is not None]
        if limits:
            seconds = min(seconds, max(min(limits) - self.clock.monotonic(), 0.0))
        if seconds > 0 and not self._stop.is_set():
            self.clock.sleep(seconds)
