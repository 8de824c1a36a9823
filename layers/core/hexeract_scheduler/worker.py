"""SchedulerWorker: claim due occurrences, dispatch them, acknowledge each with a fenced write."""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .clock import Clock, SystemClock, from_ms, rfc3339, to_ms
from .errors import ConfigError, EndpointUnreachable, HexeractError, RetryableError, TableMissing
from .model import LeasedOccurrence
from .sinks import Dispatcher, Outcome
from .store import DynamoScheduleStore, map_concurrently, no_answer

T = TypeVar("T")
log = logging.getLogger("hexeract_scheduler")

MAX_LAG_SAMPLES = 10_000
MAX_UNREACHABLE_IN_ROW = 5
MAX_REPORTED_KEYS = 10_000
STUCK_RECHECK_SECONDS = 300.0


@dataclass(frozen=True)
class SchedulerWorkerConfig:
    """hexeract's worker settings, with its defaults and its validation (docs/contracts.md#hexeract-semantics).

    Invariant: ``lease >= batch_size * dispatch_timeout``. A claimed batch is settled (sent and
    acked) while its lease holds; if the lease could expire mid-batch, another worker would claim
    the same occurrences and deliver them a second time while this one still works on them.
    """

    poll_interval: timedelta = timedelta(milliseconds=100)
    batch_size: int = 10
    lease: timedelta = timedelta(seconds=300)
    retry_base_delay: timedelta = timedelta(seconds=1)
    retry_max_delay: timedelta = timedelta(seconds=300)
    jitter: bool = True
    min_cycle_delay: timedelta = timedelta(milliseconds=5)
    dispatch_timeout: timedelta = timedelta(seconds=30)
    # Not in hexeract: threads for concurrent claims, sends and acks, and the shards this worker
    # reads (None: all of them; a subset lets several dispatchers split a table).
    concurrency: int = 16
    shards: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                if value < timedelta(0):
                    raise ConfigError(f"{f.name} must not be negative, got {value}")
                if value == timedelta(0) and f.name != "min_cycle_delay":
                    raise ConfigError(f"{f.name} must be non-zero")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {self.batch_size!r}")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency!r}")
        if self.retry_max_delay < self.retry_base_delay:
            raise ConfigError(
                f"retry_max_delay ({self.retry_max_delay}) must be >= retry_base_delay ({self.retry_base_delay})"
            )
        try:
            batch_time = self.dispatch_timeout * self.batch_size
        except OverflowError:
            raise ConfigError(
                f"batch_size ({self.batch_size}) x dispatch_timeout ({self.dispatch_timeout}) is too large a duration; "
                f"the lease must cover a whole batch"
            ) from None
        if self.lease < batch_time:
            raise ConfigError(
                f"lease ({self.lease}) must cover a whole batch: >= batch_size ({self.batch_size}) x "
                f"dispatch_timeout ({self.dispatch_timeout}) = {batch_time}"
            )
        if self.shards is not None and (
            not self.shards or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.shards)
        ):
            raise ConfigError(f"shards must be a non-empty set of shard numbers >= 0, got {self.shards!r}")


def retry_delay(attempts: int, config: SchedulerWorkerConfig, rng: random.Random | None = None) -> timedelta:
    """``min(retry_base_delay * 2**attempts, retry_max_delay)``, then full jitter: uniform in
    ``[0, capped]`` when ``jitter`` is on (spreads a burst of failures instead of re-aligning it)."""
    base = config.retry_base_delay.total_seconds()
    cap = config.retry_max_delay.total_seconds()
    capped = cap if attempts >= 64 else min(base * 2**attempts, cap)
    if config.jitter:
        capped = (rng or random).uniform(0.0, capped)
    return timedelta(seconds=capped)


@dataclass
class CycleSummary:
    """Counts for one poll cycle (or, summed, for a whole run).

    ``dispatched``: sent and acknowledged; of these, ``rescheduled`` moved a cron schedule on to its
    next occurrence (the others were final deliveries).
    ``lease_lost``: acks refused by the fence, the occurrence belongs to another worker now.
    ``skipped``: claimed, but the lease had already expired before dispatch, so not sent.
    ``failed_cycles``: cycles that ended on an error other than a transient AWS one (logged with
    its cause; the loop went on).
    ``quarantined``: unreadable items dead-lettered with the reason (a missing attribute, a stored
    target or cron that no longer parses, a key that is not a UUID).
    ``unreadable``: unreadable items that could not even be quarantined, left where they are (each
    key is logged once per worker).
    """

    claimed: int = 0
    dispatched: int = 0
    rescheduled: int = 0
    retried: int = 0
    dead_lettered: int = 0
    swept: int = 0
    lease_lost: int = 0
    skipped: int = 0
    lost_claims: int = 0
    failed_cycles: int = 0
    quarantined: int = 0
    unreadable: int = 0
    cycles: int = 0
    lag_ms: list[int] = field(default_factory=list)
    next_due_ms: int | None = None
    more_due: bool = False

    def add(self, other: CycleSummary) -> None:
        for name in (
            "claimed",
            "dispatched",
            "rescheduled",
            "retried",
            "dead_lettered",
            "swept",
            "lease_lost",
            "skipped",
            "lost_claims",
            "failed_cycles",
            "quarantined",
            "unreadable",
            "cycles",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = MAX_LAG_SAMPLES - len(self.lag_ms)
        if room > 0:
            self.lag_ms.extend(other.lag_ms[:room])

    def as_dict(self) -> dict[str, int]:
        """The dispatcher's summary (docs/contracts.md#lambda-functions)."""
        return {
            "claimed": self.claimed,
            "dispatched": self.dispatched,
            "rescheduled": self.rescheduled,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "swept": self.swept,
            "lease_lost": self.lease_lost,
            "skipped": self.skipped,
            "failed_cycles": self.failed_cycles,
            "quarantined": self.quarantined,
            "unreadable": self.unreadable,
        }


class SchedulerWorker:
    """Claims due occurrences in batches, dispatches them, and settles each with a fenced ack.

    Delivery is at-least-once: an occurrence is sent before it is acked, so a crash in between
    leads to another send of the same occurrence id after the lease expires. Claims, sends and acks
    of a batch run concurrently on a thread pool (boto3 clients are thread-safe).
    """

    def __init__(
        self,
        store: DynamoScheduleStore,
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
        self._shards: tuple[int, ...] | None = None
        self._reported: set[str] = set()  # unreadable keys already logged
        self._stuck: dict[str, float] = {}  # unreadable keys -> clock.monotonic() to look at again
        self._run_by: float | None = None  # run()'s hard deadline
        self._stop_by: float | None = None  # stop()'s grace

    def close(self) -> None:
        if self._own_executor:
            self.executor.shutdown(wait=False, cancel_futures=True)  # type: ignore[call-arg]

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

    @property
    def shards(self) -> tuple[int, ...]:
        if self._shards is None:
            count = self.store.shards
            wanted = self.config.shards if self.config.shards is not None else tuple(range(count))
            bad = [s for s in wanted if s >= count]
            if bad:
                raise ConfigError(f"shards {bad} do not exist: the table has {count} shards (0-{count - 1})")
            self._shards = tuple(wanted)
        return self._shards

    def resolve_shards(self, timeout: float | None = None) -> tuple[int, ...]:
        """``shards``, whose first use reads the table's shard count, waiting at most ``timeout``
        seconds for that read (RetryableError past it)."""
        if self._shards is not None or timeout is None:
            return self.shards
        until = self.clock.monotonic() + timeout
        late = no_answer("reading the table's shard count")
        return map_concurrently(
            self.executor, lambda _: self.shards, [None], time_left=lambda: until - self.clock.monotonic(), late=late
        )[0]

    def _bounded_shards(self) -> tuple[int, ...]:
        late = no_answer("reading the table's shard count")
        return map_concurrently(self.executor, lambda _: self.shards, [None], time_left=self._time_left, late=late)[0]

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
        now_mono = self.clock.monotonic()
        for key in [k for k, until in self._stuck.items() if until <= now_mono]:
            del self._stuck[key]
        batch = self.store.claim_due(
            self.clock.now(),
            cfg.lease,
            cfg.batch_size,
            horizon=cfg.poll_interval,
            shards=self._shards if self._shards is not None else self._bounded_shards(),
            executor=self.executor,
            rng=self.rng,
            skip=frozenset(self._stuck),
            time_left=self._time_left,
        )
        summary.claimed = len(batch.leased)
        summary.swept = len(batch.swept)
        summary.lost_claims = batch.lost
        summary.next_due_ms = batch.next_due_ms
        summary.more_due = batch.more_due
        summary.quarantined = len(batch.quarantined)
        summary.unreadable = len(batch.unreadable)
        for sid in batch.swept:
            log.warning(
                "swept to dead-letter: %s",
                "attempt budget exhausted by a crashed worker",
                extra={"schedule_id": str(sid)},
            )
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
        if not batch.leased:
            return summary

        # Sending on an expired lease would race the worker that may have re-claimed it.
        now = self.clock.now()
        live = [o for o in batch.leased if not o.lease_expired(now)]
        summary.skipped = len(batch.leased) - len(live)
        sent_at: dict[str, datetime] = {}

        def on_sent(occ: LeasedOccurrence) -> None:
            sent_at[occ.lease_token] = self.clock.now()

        timeout = cfg.dispatch_timeout.total_seconds()
        left = self._time_left()
        if left is not None:
            timeout = max(min(timeout, left), 0.0)
        outcomes = self.dispatcher.dispatch(live, executor=self.executor, timeout=timeout, on_sent=on_sent)

        def unanswered(pair: tuple[LeasedOccurrence, Any]) -> tuple[str, bool]:
            log.error("ack not answered within the time left, the lease will expire", extra=_keys(pair[0]))
            return "ack_failed", False

        results = map_concurrently(
            self.executor,
            lambda pair: self._settle(*pair),
            list(zip(live, outcomes, strict=True)),
            time_left=self._time_left,
            late=unanswered,
        )
        for occ, (kind, applied) in zip(live, results, strict=True):
            if not applied:
                summary.lease_lost += 1
                log.info("lease lost before ack; another worker owns the occurrence", extra=_keys(occ))
                continue
            if kind in ("dispatched", "rescheduled"):
                summary.dispatched += 1
                summary.rescheduled += kind == "rescheduled"
                summary.lag_ms.append(to_ms(sent_at.get(occ.lease_token, now)) - to_ms(occ.scheduled_for))
            elif kind == "retried":
                summary.retried += 1
            else:
                summary.dead_lettered += 1
        return summary

    def _settle(self, occ: LeasedOccurrence, outcome: Outcome) -> tuple[str, bool]:
        """Ack one occurrence; returns (what happened, whether the fenced write applied)."""
        now = self.clock.now()
        try:
            if outcome is None:
                nxt = occ.trigger.next_after(max(now, occ.scheduled_for))
                if nxt is not None:
                    applied = self.store.reschedule(occ, nxt)
                    if applied:
                        log.info("rescheduled: next occurrence at %s", rfc3339(nxt), extra=_keys(occ))
                    return "rescheduled", applied
                return "dispatched", self.store.mark_delivered(occ)
            if occ.is_exhausted:
                log.warning("dead-lettered after %d attempts: %s", occ.attempt, outcome, extra=_keys(occ))
                return "dead_lettered", self.store.mark_dead_lettered(occ, outcome, now)
            delay = retry_delay(occ.attempt, self.config, self.rng)
            log.info(
                "attempt %d failed, retry in %.3fs: %s", occ.attempt, delay.total_seconds(), outcome, extra=_keys(occ)
            )
            return "retried", self.store.mark_failed(occ, outcome, now + delay)
        except HexeractError as exc:
            # The ack did not land: the lease will expire and the occurrence is claimed again
            # (counted against its budget). Nothing is lost; report it as a lost fence.
            log.error("ack failed, the lease will expire and the occurrence be re-claimed: %s", exc, extra=_keys(occ))
            return "ack_failed", False

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


class DaemonExecutor(Executor):
    """A fixed pool of daemon threads: unlike ``ThreadPoolExecutor``'s, they never hold the process
    at exit. A stopping command-line worker exits on time even while a hung request waits out its
    read timeout: that request is abandoned, which at-least-once delivery covers (its lease
    expires and the occurrence is claimed again)."""

    def __init__(self, workers: int, name: str = "hexeract") -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None]
        self._queue = queue.SimpleQueue()
        self._workers = workers
        for i in range(workers):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in range(self._workers):
            self._queue.put(None)

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            future, fn, args, kwargs = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)


def _keys(occ: LeasedOccurrence) -> dict[str, Any]:
    return {"schedule_id": str(occ.schedule_id), "occurrence_id": str(occ.occurrence_id), "attempt": occ.attempt}
