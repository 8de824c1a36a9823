"""The store contract: what the worker (``ScheduleStore``) and operators (``ScheduleAdmin``) rely
on, whatever holds the schedules (DynamoDB, memory).

Every implementation keeps the promises written at each method; one contract suite
(``tests/contract``) checks them on each. Domain values only cross this boundary: no storage type
(an item, a request) leaks out of an implementation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from hexeract_scheduler.domain.checks import check_int
from hexeract_scheduler.domain.model import LeasedOccurrence, ScheduledMessage, ScheduleSnapshot
from hexeract_scheduler.errors import one_line

CRASH_EXHAUSTED = "attempt budget exhausted by a crashed worker"
# The most rows one listing returns (the command line's --limit, the dead-letter function's limit).
MAX_LIST_LIMIT = 1000
# The longest error text kept as ``last_error``.
MAX_ERROR_CHARS = 1000


@dataclass(slots=True)
class ClaimBatch:
    """What one ``claim_due`` call did.

    ``swept``: pending schedules whose budget crashed workers used up, dead-lettered on the way.
    ``quarantined``: unreadable items dead-lettered with the reason (key, reason); ``unreadable``:
    unreadable items no write could take, left in place (key, reason). ``lost`` counts due entries
    another worker claimed first (or that an eventually consistent index showed stale).
    ``next_due_ms`` is the soonest not-yet-due instant seen within the look-ahead, if any;
    ``more_due`` says more entries were due than were claimed.
    """

    leased: list[LeasedOccurrence] = field(default_factory=list)
    swept: list[uuid.UUID] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    lost: int = 0
    next_due_ms: int | None = None
    more_due: bool = False
    errors: list[str] = field(default_factory=list)  # claims that failed, left for the next cycle


class Listing(list[ScheduleSnapshot]):
    """A listing's rows, plus the items it left out because they cannot be read (key, reason)."""

    def __init__(self, rows: Iterable[ScheduleSnapshot] = (), skipped: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(rows)
        self.skipped: list[tuple[str, str]] = list(skipped)


@runtime_checkable
class ScheduleStore(Protocol):
    """The worker's hot path: claim due occurrences, then settle each with a fenced write.

    Every acknowledgement (``mark_*``, ``reschedule``) is fenced on the claim's lease token: it
    applies only if the schedule still carries exactly that lease. ``False`` means the lease was
    lost (it expired and another worker claimed the occurrence, or the schedule was paused or
    cancelled meanwhile): the write changed nothing, another worker owns the occurrence now, and
    that is not an error.
    """

    name: str  # what the store holds, for messages ("table hexeract-schedules")

    def ready(self) -> str:
        """Fail fast when claims cannot work (a missing table raises ``TableMissing``, a shard
        selection the table lacks ``ConfigError``); returns what claims read, for messages."""
        ...

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
        """Claim up to ``limit`` occurrences due by ``now``. Each claim is atomic: it checks the
        schedule is pending, due, unleased and within its attempt budget, increments ``attempts``
        and stamps a fresh lease until ``now + lease``; two workers never hold one occurrence.

        On the way, a pending schedule whose budget crashed workers used up (lease expired) is
        swept to dead-letter (``CRASH_EXHAUSTED``), and an unreadable item is quarantined. Entries
        whose key is in ``skip`` are passed over. ``horizon`` widens the look-ahead for
        ``next_due_ms``. With ``time_left``, no call is awaited past the end of the time left.
        Raises ``RetryableError`` for a transient failure that left nothing claimed.
        """
        ...

    def mark_delivered(self, occ: LeasedOccurrence) -> bool:
        """A one-shot occurrence was sent: ``delivered``; ``last_error`` is kept (fenced)."""
        ...

    def reschedule(self, occ: LeasedOccurrence, next_at: datetime) -> bool:
        """A recurring occurrence was sent: due again at ``next_at``, attempts 0, no last error
        (fenced)."""
        ...

    def mark_failed(self, occ: LeasedOccurrence, error: str, retry_at: datetime) -> bool:
        """A failed attempt with budget left: ``error`` recorded, due again at ``retry_at``, the
        lease dropped; ``attempts`` untouched, the claim counted it (fenced)."""
        ...

    def mark_dead_lettered(self, occ: LeasedOccurrence, error: str, now: datetime) -> bool:
        """The last attempt failed: ``dead_lettered`` with ``error`` and ``dead_lettered_at``,
        never claimed again until replayed (fenced)."""
        ...


@runtime_checkable
class ScheduleAdmin(Protocol):
    """What users and operators do: insert, inspect, pause, resume, cancel, replay, list.

    Every change is one atomic conditional step on one schedule; an unknown id raises
    ``ScheduleNotFound`` (``inspect`` returns None instead) and changes nothing.
    """

    name: str

    def insert(self, message: ScheduledMessage, now: datetime) -> ScheduleSnapshot:
        """A new pending schedule, due at its trigger's first instant; an id that exists already
        raises ``InvalidInput``."""
        ...

    def inspect(self, schedule_id: uuid.UUID | str) -> ScheduleSnapshot | None:
        """The schedule as stored (never its payload), or None."""
        ...

    def pause(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending -> paused (True): no worker claims it, and the lease is dropped so an ack in
        flight is fenced off. Anything else: False, nothing changed."""
        ...

    def resume(self, schedule_id: uuid.UUID | str, now: datetime) -> bool:
        """Paused -> pending (True), at the instant ``Trigger.resumed`` gives (a cron
        whose instant passed realigns to its next future one, with a fresh budget). Not paused:
        False, nothing changed."""
        ...

    def cancel(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending or paused -> cancelled (True); a terminal schedule is left alone (False)."""
        ...

    def replay(self, schedule_id: uuid.UUID | str, now: datetime) -> None:
        """Dead-lettered -> pending, attempts 0, error cleared, due ``now``, same instant and so
        the same occurrence id. Anything else raises ``NotReplayable`` and changes nothing."""
        ...

    def list_pending(self, limit: int = 50) -> Listing:
        """Pending and paused schedules, soonest next attempt first, at most ``limit``."""
        ...

    def list_dead_letter(self, limit: int = 50) -> Listing:
        """Dead-lettered schedules, most recently dead-lettered first, at most ``limit``."""
        ...


@runtime_checkable
class Schedules(ScheduleStore, ScheduleAdmin, Protocol):
    """Both contracts in one store: what a worker that also reports on schedules is given."""


def check_limit(limit: int) -> None:
    check_int(limit, "limit", 1, MAX_LIST_LIMIT)


def short_error(error: str) -> str:
    """What ``last_error`` keeps of an error: one line of at most ``MAX_ERROR_CHARS``."""
    return one_line(error, MAX_ERROR_CHARS)
