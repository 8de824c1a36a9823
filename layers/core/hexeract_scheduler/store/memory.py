"""InMemoryScheduleStore: both store contracts in one process, for tests and local runs.

It keeps every promise the DynamoDB store keeps (atomic claims, fenced acks, the crash sweep,
the lifecycle and the listings; instants kept to the millisecond as DynamoDB stores them), so
code that schedules messages can be unit-tested with no emulator at all::

    clock = ManualClock()
    store = InMemoryScheduleStore()
    worker = SchedulerWorker(store, Dispatcher({"sqs": recording_sink}), clock=clock)

One lock guards every operation: each is atomic, as a single-item conditional write is.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from hexeract_scheduler.domain.clock import to_ms, truncate_ms
from hexeract_scheduler.domain.model import (
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    parse_schedule_id,
)
from hexeract_scheduler.errors import InvalidInput, NotReplayable, ScheduleNotFound
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED, ClaimBatch, Listing, check_limit, short_error

__all__ = ["InMemoryScheduleStore"]


@dataclass
class _Schedule:
    message: ScheduledMessage
    status: ScheduleStatus
    scheduled_for: datetime
    attempts: int = 0
    due_at: datetime | None = None  # where DynamoDB's due index holds it (None: not claimable)
    leased_until: datetime | None = None
    lease_token: str | None = None
    last_error: str | None = None
    dead_lettered_at: datetime | None = None

    def snapshot(self) -> ScheduleSnapshot:
        m = self.message
        return ScheduleSnapshot(
            schedule_id=m.schedule_id,
            status=self.status,
            scheduled_for=self.scheduled_for,
            attempts=self.attempts,
            max_attempts=m.max_attempts,
            trigger=m.trigger.label(),
            target=str(m.target),
            event_type=m.event_type,
            last_error=self.last_error,
            dead_lettered_at=self.dead_lettered_at,
            leased_until=self.leased_until,
        )

    def leave_active(self) -> None:
        self.due_at = self.leased_until = self.lease_token = None


class InMemoryScheduleStore:
    """``ScheduleStore`` and ``ScheduleAdmin`` in memory. Thread-safe."""

    def __init__(self, *, rng: random.Random | None = None, name: str = "memory store") -> None:
        self.name = name
        self.rng = rng or random.Random()
        self._schedules: dict[uuid.UUID, _Schedule] = {}
        self._lock = threading.Lock()

    def ready(self) -> str:
        return self.name

    # -- ScheduleStore -------------------------------------------------------------------------

    def claim_due(
        self,
        now: datetime,
        lease: timedelta,
        limit: int,
        *,
        horizon: timedelta = timedelta(0),
        skip: Collection[str] = (),
        time_left: Callable[[], float | None] | None = None,
    ) -> ClaimBatch:
        now = truncate_ms(now)
        until = truncate_ms(now + lease)
        with self._lock:
            # (due instant, schedule) for every claimable schedule not to be skipped
            pending = [
                (s.due_at, s)
                for s in self._schedules.values()
                if s.status is ScheduleStatus.PENDING
                and s.due_at is not None
                and str(s.message.schedule_id) not in skip
            ]
            due = [s for at, s in sorted(pending, key=lambda p: p[0]) if at <= now]
            later = [at for at, _ in pending if now < at <= now + horizon]
            batch = ClaimBatch(more_due=len(due) >= limit)
            if later:
                batch.next_due_ms = to_ms(min(later))
            if len(due) > limit:
                due = self.rng.sample(due, limit)  # racing workers pick apart, as on DynamoDB
            for s in due:
                lease_free = s.leased_until is None or s.leased_until <= now
                if not lease_free:
                    batch.lost += 1
                elif s.attempts < s.message.max_attempts:
                    s.attempts += 1
                    s.leased_until = s.due_at = until
                    s.lease_token = uuid.uuid4().hex
                    batch.leased.append(self._leased(s))
                else:  # a crashed worker spent the budget: sweep
                    self._dead_letter(s, CRASH_EXHAUSTED, now)
                    batch.swept.append(s.message.schedule_id)
            return batch

    def _leased(self, s: _Schedule) -> LeasedOccurrence:
        assert s.leased_until is not None and s.lease_token is not None
        m = s.message
        return LeasedOccurrence(
            schedule_id=m.schedule_id,
            scheduled_for=s.scheduled_for,
            attempt=s.attempts,
            max_attempts=m.max_attempts,
            lease_token=s.lease_token,
            leased_until=s.leased_until,
            target=m.target,
            trigger=m.trigger,
            payload=m.payload,
            event_type=m.event_type,
        )

    def _fenced(self, occ: LeasedOccurrence, change: Callable[[_Schedule], None]) -> bool:
        with self._lock:
            s = self._schedules.get(occ.schedule_id)
            if s is None or s.lease_token is None or s.lease_token != occ.lease_token:
                return False
            change(s)
            return True

    def mark_delivered(self, occ: LeasedOccurrence) -> bool:
        def deliver(s: _Schedule) -> None:
            s.status = ScheduleStatus.DELIVERED
            s.leave_active()

        return self._fenced(occ, deliver)

    def reschedule(self, occ: LeasedOccurrence, next_at: datetime) -> bool:
        def move_on(s: _Schedule) -> None:
            s.scheduled_for = s.due_at = truncate_ms(next_at)
            s.attempts, s.leased_until, s.lease_token, s.last_error = 0, None, None, None

        return self._fenced(occ, move_on)

    def mark_failed(self, occ: LeasedOccurrence, error: str, retry_at: datetime) -> bool:
        def back_off(s: _Schedule) -> None:
            s.last_error = short_error(error)
            s.leased_until = s.due_at = truncate_ms(retry_at)
            s.lease_token = None

        return self._fenced(occ, back_off)

    def mark_dead_lettered(self, occ: LeasedOccurrence, error: str, now: datetime) -> bool:
        return self._fenced(occ, lambda s: self._dead_letter(s, error, now))

    @staticmethod
    def _dead_letter(s: _Schedule, error: str, now: datetime) -> None:
        s.status = ScheduleStatus.DEAD_LETTERED
        s.last_error = short_error(error)
        s.dead_lettered_at = truncate_ms(now)
        s.leave_active()

    # -- ScheduleAdmin -------------------------------------------------------------------------

    def insert(self, message: ScheduledMessage, now: datetime) -> ScheduleSnapshot:
        first = truncate_ms(message.trigger.first_due(now))
        with self._lock:
            if message.schedule_id in self._schedules:
                raise InvalidInput(f"schedule {message.schedule_id} already exists")
            s = _Schedule(replace(message), ScheduleStatus.PENDING, first, due_at=first)
            self._schedules[message.schedule_id] = s
            return s.snapshot()

    def inspect(self, schedule_id: uuid.UUID | str) -> ScheduleSnapshot | None:
        with self._lock:
            s = self._schedules.get(parse_schedule_id(schedule_id))
            return s.snapshot() if s else None

    def _existing(self, schedule_id: uuid.UUID | str) -> _Schedule:
        sid = parse_schedule_id(schedule_id)
        if sid not in self._schedules:
            raise ScheduleNotFound(sid)
        return self._schedules[sid]

    def pause(self, schedule_id: uuid.UUID | str) -> bool:
        with self._lock:
            s = self._existing(schedule_id)
            if s.status is not ScheduleStatus.PENDING:
                return False
            s.status, s.due_at = ScheduleStatus.PAUSED, None
            s.leased_until = s.lease_token = None
            return True

    def resume(self, schedule_id: uuid.UUID | str, now: datetime) -> bool:
        with self._lock:
            s = self._existing(schedule_id)
            if s.status is not ScheduleStatus.PAUSED:
                return False
            plan = s.message.trigger.resumed(s.scheduled_for, truncate_ms(now))
            if plan.due is None:  # no future instant: nothing left to fire
                s.status = ScheduleStatus.DELIVERED
                s.leave_active()
                return True
            s.status = ScheduleStatus.PENDING
            s.scheduled_for = s.due_at = truncate_ms(plan.due)
            if plan.fresh:
                s.attempts, s.last_error = 0, None
            return True

    def cancel(self, schedule_id: uuid.UUID | str) -> bool:
        with self._lock:
            s = self._existing(schedule_id)
            if s.status not in (ScheduleStatus.PENDING, ScheduleStatus.PAUSED):
                return False
            s.status = ScheduleStatus.CANCELLED
            s.leave_active()
            return True

    def replay(self, schedule_id: uuid.UUID | str, now: datetime) -> None:
        with self._lock:
            s = self._existing(schedule_id)
            if s.status is not ScheduleStatus.DEAD_LETTERED:
                raise NotReplayable(s.message.schedule_id, s.status.label)
            s.status, s.attempts, s.last_error, s.dead_lettered_at = ScheduleStatus.PENDING, 0, None, None
            s.leased_until = s.lease_token = None
            s.due_at = truncate_ms(now)

    def list_pending(self, limit: int = 50) -> Listing:
        check_limit(limit)
        with self._lock:
            rows = [s.snapshot() for s in self._schedules.values()]
        rows = [r for r in rows if r.status in (ScheduleStatus.PENDING, ScheduleStatus.PAUSED)]
        return Listing(sorted(rows, key=lambda r: (r.next_attempt, str(r.schedule_id)))[:limit])

    def list_dead_letter(self, limit: int = 50) -> Listing:
        check_limit(limit)
        with self._lock:
            rows = [s.snapshot() for s in self._schedules.values() if s.status is ScheduleStatus.DEAD_LETTERED]
        key: Callable[[ScheduleSnapshot], tuple[datetime, str]] = lambda r: (  # noqa: E731
            r.dead_lettered_at or r.scheduled_for,
            str(r.schedule_id),
        )
        return Listing(sorted(rows, key=key, reverse=True)[:limit])
