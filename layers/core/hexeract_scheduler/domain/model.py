"""The domain: what a schedule is, what it sends, where, and what a claimed occurrence carries."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from uuid6 import uuid7

from hexeract_scheduler.domain.checks import SQS_INVALID_CHARS, check_int
from hexeract_scheduler.domain.clock import UTC, rfc3339, truncate_ms
from hexeract_scheduler.domain.cron import CronSchedule
from hexeract_scheduler.domain.occurrence import OccurrenceId
from hexeract_scheduler.domain.target import Target
from hexeract_scheduler.errors import InvalidInput

# SNS caps a whole message (body + attributes) at 256 KiB; keep 1 KiB of it for the five
# contract attributes so a payload accepted here is always sendable to either sink.
MAX_PAYLOAD_BYTES = 256 * 1024 - 1024
MAX_EVENT_TYPE_CHARS = 256
# Attempts per occurrence: far past any sane retry budget (the backoff caps at retry_max_delay),
# and well inside what DynamoDB stores as a number.
MAX_ATTEMPTS = 10_000


class ScheduleStatus(enum.Enum):
    """Stored values use underscores; ``label`` is the CLI/JSON spelling."""

    PENDING = "pending"
    PAUSED = "paused"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead_lettered"

    @property
    def label(self) -> str:
        return self.value.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Trigger:
    """One-shot (``at``) or recurring (``cron``)."""

    at: datetime | None = None
    cron: CronSchedule | None = None

    def __post_init__(self) -> None:
        if (self.at is None) == (self.cron is None):
            raise InvalidInput("a trigger is either one instant or one cron expression")
        if self.at is not None:
            if self.at.tzinfo is None:
                raise InvalidInput("a one-shot instant must carry a time zone (use UTC)")
            object.__setattr__(self, "at", truncate_ms(self.at))

    @property
    def is_recurring(self) -> bool:
        return self.cron is not None

    def label(self) -> str:
        return self.cron.label() if self.cron else "delay"

    def first_due(self, now: datetime) -> datetime:
        if self.at is not None:
            return self.at
        assert self.cron is not None
        first = self.cron.next_after(now)
        if first is None:
            raise InvalidInput(f"cron {self.cron.expression!r} has no future instant")
        return truncate_ms(first)

    def next_after(self, ref: datetime) -> datetime | None:
        if self.cron is None:
            return None
        nxt = self.cron.next_after(ref)
        return truncate_ms(nxt) if nxt else None

    def resumed(self, scheduled_for: datetime, now: datetime) -> Resumed:
        """Where a paused schedule resumes (every store applies this rule, as hexeract's control
        does). A one-shot keeps its instant (due at once if it passed). A cron schedule whose stored
        instant passed while it was paused realigns to its first instant strictly after ``now``:
        the missed occurrence is not caught up, and the new one starts with a fresh budget."""
        if not self.is_recurring or scheduled_for >= now:
            return Resumed(scheduled_for)
        return Resumed(self.next_after(now), fresh=True)


@dataclass(frozen=True, slots=True)
class Resumed:
    """Where a paused schedule resumes: due at ``due`` (None: no future instant, so the schedule
    is finished: ``delivered``), with a fresh attempt budget and no last error if ``fresh``."""

    due: datetime | None
    fresh: bool = False


def parse_schedule_id(value: str | uuid.UUID) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise InvalidInput(f"malformed schedule id {value!r}: expected a UUID") from None


def _check_payload(payload: bytes | str | Any) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    if not isinstance(payload, (bytes, bytearray)):
        raise InvalidInput("payload must be bytes or str")
    payload = bytes(payload)
    if not payload:
        raise InvalidInput("payload must not be empty: SQS and SNS refuse an empty message body")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(
            f"payload is {len(payload)} bytes; the limit is {MAX_PAYLOAD_BYTES} (256 KiB less 1 KiB of attributes)"
        )
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("payload must be UTF-8 text (SQS and SNS message bodies are text)") from None
    if SQS_INVALID_CHARS.search(text):
        raise InvalidInput("payload holds a control character SQS does not accept in a message body")
    return payload


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """A schedule to insert: what to send, where, when, and how many attempts per occurrence.

    Everything is validated at construction, before anything is written.
    """

    target: Target
    trigger: Trigger
    payload: bytes = b"{}"
    event_type: str = "scheduled"
    max_attempts: int = 5
    schedule_id: uuid.UUID = field(default_factory=lambda: uuid.UUID(str(uuid7())))

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload", _check_payload(self.payload))
        if isinstance(self.target, str):
            object.__setattr__(self, "target", Target.parse(self.target))
        if isinstance(self.schedule_id, str):
            object.__setattr__(self, "schedule_id", parse_schedule_id(self.schedule_id))
        check_int(self.max_attempts, "max_attempts", 1, MAX_ATTEMPTS)
        if (
            not self.event_type
            or len(self.event_type) > MAX_EVENT_TYPE_CHARS
            or SQS_INVALID_CHARS.search(self.event_type)
        ):
            raise InvalidInput(f"event type must be 1-{MAX_EVENT_TYPE_CHARS} printable characters")

    @classmethod
    def delay(
        cls,
        target: Target | str,
        *,
        at: datetime | None = None,
        after: timedelta | None = None,
        now: datetime | None = None,
        payload: bytes | str = b"{}",
        event_type: str = "scheduled",
        max_attempts: int = 5,
    ) -> ScheduledMessage:
        """A one-shot schedule, due ``at`` an instant or ``after`` a delay from ``now``."""
        if (at is None) == (after is None):
            raise InvalidInput("give exactly one of at= or after=")
        if after is not None:
            if now is None:
                raise InvalidInput("after= needs now= (the caller's clock)")
            at = now + after
        tgt = Target.parse(target) if isinstance(target, str) else target
        return cls(tgt, Trigger(at=at), _check_payload(payload), event_type, max_attempts)

    @classmethod
    def cron(
        cls,
        target: Target | str,
        expression: str,
        *,
        timezone: str | None = None,
        payload: bytes | str = b"{}",
        event_type: str = "scheduled",
        max_attempts: int = 5,
    ) -> ScheduledMessage:
        tgt = Target.parse(target) if isinstance(target, str) else target
        return cls(
            tgt, Trigger(cron=CronSchedule(expression, timezone)), _check_payload(payload), event_type, max_attempts
        )


@dataclass(frozen=True, slots=True)
class ScheduleSnapshot:
    """What ``inspect`` and the listings return: a schedule as stored, without its payload."""

    schedule_id: uuid.UUID
    status: ScheduleStatus
    scheduled_for: datetime
    attempts: int
    max_attempts: int
    trigger: str
    target: str
    event_type: str
    last_error: str | None = None
    dead_lettered_at: datetime | None = None
    leased_until: datetime | None = None

    @property
    def next_attempt(self) -> datetime:
        """When a pending schedule is next attempted: its instant, or later while it is leased or
        backing off after a failed attempt."""
        if self.leased_until is not None and self.leased_until > self.scheduled_for:
            return self.leased_until
        return self.scheduled_for

    def to_json(self) -> dict[str, Any]:
        """The documented JSON object (docs/contracts.md#command-line): every field ``inspect``
        shows, the same keys for every schedule (``null`` where a schedule has no such value)."""
        return {
            "schedule_id": str(self.schedule_id),
            "status": self.status.label,
            "scheduled_for": rfc3339(self.scheduled_for),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "trigger": self.trigger,
            "target": self.target,
            "event_type": self.event_type,
            "last_error": self.last_error,
            "leased_until": rfc3339(self.leased_until) if self.leased_until else None,
            "dead_lettered_at": rfc3339(self.dead_lettered_at) if self.dead_lettered_at else None,
        }


@dataclass(frozen=True, slots=True)
class LeasedOccurrence:
    """One occurrence this worker has claimed; every ack about it is fenced on ``lease_token``.

    ``attempt`` already counts this claim (it was incremented by the claiming write), so
    ``is_exhausted`` means a failure now dead-letters instead of retrying.
    """

    schedule_id: uuid.UUID
    scheduled_for: datetime
    attempt: int
    max_attempts: int
    lease_token: str
    leased_until: datetime
    target: Target
    trigger: Trigger
    payload: bytes
    event_type: str

    @property
    def occurrence_id(self) -> OccurrenceId:
        return OccurrenceId.derive(self.schedule_id, self.scheduled_for)

    @property
    def is_exhausted(self) -> bool:
        return self.attempt >= self.max_attempts

    def lease_expired(self, now: datetime) -> bool:
        return now >= self.leased_until

    def message_attributes(self) -> dict[str, str | int]:
        return {
            "occurrence_id": str(self.occurrence_id),
            "schedule_id": str(self.schedule_id),
            "event_type": self.event_type,
            "scheduled_for": rfc3339(self.scheduled_for),
            "attempt": self.attempt,
        }


__all__ = [
    "UTC",
    "LeasedOccurrence",
    "ScheduleSnapshot",
    "ScheduleStatus",
    "ScheduledMessage",
    "Target",
    "Trigger",
    "parse_schedule_id",
]
