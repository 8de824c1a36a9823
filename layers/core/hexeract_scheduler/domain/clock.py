"""Time, injected.

Core code never reads the system clock directly: it is given a :class:`Clock`. Instants are
timezone-aware UTC datetimes in the API and integer epoch milliseconds in DynamoDB.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, timeouts)."""

    def sleep(self, seconds: float) -> None:
        """Wait; a test clock advances itself instead."""


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to (or when slept on): for tests, thread-safe."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            self._mono += seconds

    def set(self, instant: datetime) -> None:
        with self._lock:
            delta = (instant - self._now).total_seconds()
            self._now = instant
            self._mono += max(delta, 0.0)


def since_epoch_us(instant: datetime) -> int:
    """Signed whole microseconds from the Unix epoch to an aware datetime, exact (no float)."""
    if instant.tzinfo is None:
        raise ValueError("instant must be timezone-aware")
    delta = instant - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_ms(instant: datetime) -> int:
    """Epoch milliseconds of an aware datetime (floor, so it also works before the epoch)."""
    return since_epoch_us(instant) // 1000


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=int(ms))


def truncate_ms(instant: datetime) -> datetime:
    """The instant as stored: millisecond precision, UTC."""
    return from_ms(to_ms(instant))


def rfc3339(instant: datetime) -> str:
    """RFC 3339 UTC with millisecond precision and a ``Z`` suffix (the message contract)."""
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
