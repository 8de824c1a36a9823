"""SchedulerWorker: claim due occurrences, dispatch them, acknowledge each with a fenced write."""

from __future__ import annotations

import enum
import logging
import random
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from .clock import Clock, SystemClock, from_ms, rfc3339, to_ms
from .concurrency import map_concurrently, no_answer
from .contract import CRASH_EXHAUSTED, ClaimBatch, ScheduleStore
from .errors import ConfigError, EndpointUnreachable, HexeractError, RetryableError, TableMissing
from .model import LeasedOccurrence
from .sinks import Dispatcher, Outcome
from .summary import CycleSummary
from .worker_config import SchedulerWorkerConfig, retry_delay

__all__ = ["CycleSummary", "SchedulerWorker", "SchedulerWorkerConfig", "Settled", "retry_delay"]

log = logging.getLogger("hexeract_scheduler")

MAX_UNREACHABLE_IN_ROW = 5
MAX_REPORTED_KEYS = 10_000
STUCK_RECHECK_SECONDS = 300.0


class Settled(enum.Enum):
    """How one claimed occurrence was settled."""

    DELIVERED = "delivered"  # sent; a one-shot is done
    RESCHEDULED = "rescheduled"  # sent; a cron moved on to its next occurrence
    RETRIED = "retried"  # failed with budget left
    DEAD_LETTERED = "dead_lettered"  # failed on the last attempt
    ACK_FAILED = "ack_failed"  # the ack itself failed or went unanswered: the lease will expire


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
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.config = config or SchedulerWorkerConfig()
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self._own_executor = executor is None
        self.executor = executor or ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="hexeract")
        self._stop = threading.Event()
        self._ready: str | None = None
        self._reported: set[str] = set()  # unreadable keys already logged
        self._stuck: dict[str, float] = {}  # unreadable keys -> clock.monotonic() to look at again
        self._run_by: float | None = None  # run()'s hard deadline
        self._stop_by: float | None = None  # stop()'s grace

    def close(self) -> None:
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
        cfg = self.config
        summary = CycleSummary(cycles=1)
        left = self._time_left()
        if left is not None and left <= 0:
            return summary
        self.ready()
        now_mono = self.clock.monotonic()
        for key in [k for k, until in self._stuck.items() if until <= now_mono]:
            del self._stuck[key]
        batch = self.store.claim_due(
            self.clock.now(),
            cfg.lease,
            cfg.batch_size,
            horizon=cfg.poll_interval,
            skip=frozenset(self._stuck),
            time_left=self._time_left,
        )
        self._report(batch, summary)
        for occ in batch.leased:
            log.debug("claimed: attempt %d of %d", occ.attempt, occ.max_attempts, extra=_keys(occ))
        if not batch.leased:
            return summary

        # Sending on an expired lease would race the worker that may have re-claimed it.
        now = self.clock.now()
        live = [o for o in batch.leased if not o.lease_expired(now)]
        summary.skipped = len(batch.leased) - len(live)
        sent_at: dict[str, datetime] = {}

        def on_sent(occ: LeasedOccurrence) -> None:
            sent_at[occ.lease_token] = self.clock.now()
            log.debug("sent", extra=_keys(occ))

        timeout = cfg.dispatch_timeout.total_seconds()
        left = self._time_left()
        if left is not None:
            timeout = max(min(timeout, left), 0.0)
        outcomes = self.dispatcher.dispatch(live, executor=self.executor, timeout=timeout, on_sent=on_sent)

        def unanswered(pair: tuple[LeasedOccurrence, Any]) -> tuple[Settled, bool]:
            log.error("ack not answered within the time left, the lease will expire", extra=_keys(pair[0]))
            return Settled.ACK_FAILED, False

        results = map_concurrently(
            self.executor,
            lambda pair: self._settle(*pair),
            list(zip(live, outcomes, strict=True)),
            time_left=self._time_left,
            late=unanswered,
        )
        for occ, (settled, applied) in zip(live, results, strict=True):
            if not applied:
                summary.lease_lost += 1
                log.info("lease lost before ack; another worker owns the occurrence", extra=_keys(occ))
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

    def _settle(self, occ: LeasedOccurrence, outcome: Outcome) -> tuple[Settled, bool]:
        """Ack one occurrence; returns how, and whether the fenced write applied."""
        now = self.clock.now()
        try:
            if outcome is None:
                nxt = occ.trigger.next_after(max(now, occ.scheduled_for))
                if nxt is None:
                    return Settled.DELIVERED, self.store.mark_delivered(occ)
                applied = self.store.reschedule(occ, nxt)
                if applied:
                    log.info("rescheduled: next occurrence at %s", rfc3339(nxt), extra=_keys(occ))
                return Settled.RESCHEDULED, applied
            if occ.is_exhausted:
                log.warning("dead-lettered after %d attempts: %s", occ.attempt, outcome, extra=_keys(occ))
                return Settled.DEAD_LETTERED, self.store.mark_dead_lettered(occ, outcome, now)
            delay = retry_delay(occ.attempt, self.config, self.rng)
            log.info(
                "attempt %d failed, retry in %.3fs: %s", occ.attempt, delay.total_seconds(), outcome, extra=_keys(occ)
            )
            return Settled.RETRIED, self.store.mark_failed(occ, outcome, now + delay)
        except HexeractError as exc:
            # The ack did not land: the lease will expire and the occurrence is claimed again
            # (counted against its budget). Nothing is lost; report it as a lost fence.
            log.error("ack failed, the lease will expire and the occurrence be re-claimed: %s", exc, extra=_keys(occ))
            return Settled.ACK_FAILED, False

    # -- the loop --------------------------------------------------------------------------

    def run(
        self, *, deadline: float | None = None, cycles: int | None = None, hard_deadline: float | None = None
    ) -> CycleSummary:
        """Poll until ``deadline`` (a ``clock.monotonic()`` value), ``cycles`` cycles, or ``stop()``.

        A cycle starts only if a whole batch (``dispatch_timeout``) still fits before the deadline.
        ``hard_deadline`` bounds every AWS call of the loop (see ``run_once``): with it, ``run``
        returns by then even if the endpoint hangs.
        Between cycles: ``min_cycle_delay`` when a full batch was claimed (there may be more), else
        sleep until the next due instant seen in the look-ahead, or ``poll_interval`` at most.
        Throttling and transient AWS errors back off and retry. Any other failure of a cycle is
        logged with its cause and the loop goes on after ``poll_interval`` (as hexeract's does): in a
        Lambda run, one bad item or request must not leave every other schedule undelivered until
        the next run. Only configuration errors (a missing table, an incoherent setting) and an
        endpoint that stays unreachable end the loop, since no later cycle can do better.
        """
        cfg = self.config
        total = CycleSummary()
        budget = cfg.dispatch_timeout.total_seconds()
        errors_in_row = 0
        self._run_by = hard_deadline
        while not self._stop.is_set():
            if deadline is not None and self.clock.monotonic() + budget > deadline:
                break
            if cycles is not None and total.cycles >= cycles:
                break
            left = self._time_left()
            if left is not None and left <= 0:
                break
            try:
                cycle = self.run_once()
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
            # More may be due: go again at once, but only after a cycle that made progress; one
            # that claimed nothing (every due entry refused) waits like an idle one, never spins.
            progressed = cycle.claimed or cycle.swept or cycle.quarantined
            if progressed and (cycle.more_due or cycle.claimed == cfg.batch_size):
                self._sleep(cfg.min_cycle_delay.total_seconds(), deadline)
                continue
            wait = cfg.poll_interval.total_seconds()
            if cycle.next_due_ms is not None:
                wait = min(wait, max((from_ms(cycle.next_due_ms) - self.clock.now()).total_seconds(), 0.0))
            self._sleep(max(wait, cfg.min_cycle_delay.total_seconds()), deadline)
        return total

    def _sleep(self, seconds: float, deadline: float | None) -> None:
        limits = [t for t in (deadline, self._hard_deadline()) if t is not None]
        if limits:
            seconds = min(seconds, max(min(limits) - self.clock.monotonic(), 0.0))
        if seconds > 0 and not self._stop.is_set():
            self.clock.sleep(seconds)


def _keys(occ: LeasedOccurrence) -> dict[str, Any]:
    return {"schedule_id": str(occ.schedule_id), "occurrence_id": str(occ.occurrence_id), "attempt": occ.attempt}
