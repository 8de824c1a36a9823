"""OccurrenceId: the stable id of one due occurrence of a schedule, as hexeract derives it."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

from hexeract_scheduler.domain.clock import since_epoch_us

_NAMESPACE = uuid.UUID("6b9d1c2e-7a44-4f8e-9c10-2d3b4c5d6e7f")


def epoch_offset_ns(instant: datetime) -> int:
    """Signed nanoseconds from the Unix epoch, exact (no float on the way)."""
    return since_epoch_us(instant) * 1000


@dataclass(frozen=True, slots=True)
class OccurrenceId:
    """UUIDv5 over ``schedule_id.bytes + sign byte + |offset ns| as u128 big-endian``.

    Invariant: every delivery of the same occurrence (retries, re-claims after a crash, a replay)
    carries the same id, and it matches hexeract's bit for bit, so consumers can dedupe on it
    whichever implementation produced the message.
    """

    value: uuid.UUID

    @classmethod
    def derive(cls, schedule_id: uuid.UUID, scheduled_for: datetime) -> OccurrenceId:
        return cls.derive_ns(schedule_id, epoch_offset_ns(scheduled_for))

    @classmethod
    def derive_ns(cls, schedule_id: uuid.UUID, offset_ns: int) -> OccurrenceId:
        sign = b"\x01" if offset_ns >= 0 else b"\x00"
        name = schedule_id.bytes + sign + abs(offset_ns).to_bytes(16, "big")
        # uuid.uuid5 only takes str names before Python 3.12: hash the bytes as RFC 9562 says.
        digest = hashlib.sha1(_NAMESPACE.bytes + name, usedforsecurity=False).digest()
        return cls(uuid.UUID(bytes=digest[:16], version=5))

    def __str__(self) -> str:
        return str(self.value)
