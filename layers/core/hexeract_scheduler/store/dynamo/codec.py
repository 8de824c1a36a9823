"""Items <-> domain objects; reading refuses anything malformed with :class:`UnreadableItem`.

The table may hold items this package did not write (by hand, a bug, a migration). Every read of
an item goes through here, so a missing attribute, a wrong type, a schedule id that is not a UUID
or a stored target or cron that no longer parses becomes one ``UnreadableItem`` naming the item's
key and the problem, never a ``KeyError`` or ``ValueError`` that would stop a worker or a listing.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from hexeract_scheduler.domain.clock import from_ms, to_ms
from hexeract_scheduler.domain.cron import CronSchedule
from hexeract_scheduler.domain.model import (
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    Target,
    Trigger,
)
from hexeract_scheduler.errors import HexeractError, UnreadableItem
from hexeract_scheduler.store.dynamo.expressions import n, s
from hexeract_scheduler.store.dynamo.schema import payload_key

# Parsing a stored target or cron (regexes, a croniter evaluation) is on every claim's path; both
# are immutable, so one parse per distinct value is enough.
_target = lru_cache(maxsize=4096)(Target.parse)


@lru_cache(maxsize=4096)
def _cron_trigger(expression: str, tz: str | None) -> Trigger:
    return Trigger(cron=CronSchedule(expression, tz))


class ItemReader:
    """Typed access to one item's attributes; every problem is an ``UnreadableItem``."""

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        raw = item.get("schedule_id")
        self.key = raw["S"] if isinstance(raw, dict) and isinstance(raw.get("S"), str) else repr(raw)

    def bad(self, reason: str) -> UnreadableItem:
        return UnreadableItem(self.key, reason)

    def get(self, name: str, kind: str, *, required: bool = True) -> Any:
        value = self.item.get(name)
        if value is None:
            if required:
                raise self.bad(f"unreadable item: missing {name}")
            return None
        if not isinstance(value, dict) or kind not in value:
            raise self.bad(f"unreadable item: {name} is not of type {kind}")
        return value[kind]

    def string(self, name: str, *, required: bool = True) -> str | None:
        return self.get(name, "S", required=required)  # type: ignore[no-any-return]

    def integer(self, name: str, *, required: bool = True) -> int | None:
        raw = self.get(name, "N", required=required)
        if raw is None:
            return None
        try:
            return int(raw)
        except ValueError:
            raise self.bad(f"unreadable item: {name} is not an integer ({raw!r})") from None

    def instant(self, name: str, *, required: bool = True) -> datetime | None:
        ms = self.integer(name, required=required)
        if ms is None:
            return None
        try:
            return from_ms(ms)
        except (OverflowError, ValueError, OSError):
            raise self.bad(f"unreadable item: {name} is out of range ({ms})") from None

    def schedule_id(self) -> uuid.UUID:
        raw = self.string("schedule_id")
        try:
            return uuid.UUID(raw)
        except (ValueError, TypeError):
            raise self.bad("unreadable item: schedule_id is not a UUID") from None

    def status(self) -> ScheduleStatus:
        raw = self.string("status")
        try:
            return ScheduleStatus(raw)
        except ValueError:
            raise self.bad(f"unreadable item: unknown status {raw!r}") from None

    def trigger_kind(self) -> str:
        kind = self.string("trigger_kind")
        if kind not in ("cron", "delay"):
            raise self.bad(f"unreadable item: unknown trigger_kind {kind!r}")
        return kind

    def trigger(self) -> Trigger:
        if self.trigger_kind() == "cron":
            expression = self.string("cron")
            assert expression is not None
            try:
                return _cron_trigger(expression, self.string("tz", required=False))
            except HexeractError as exc:
                raise self.bad(f"stored cron no longer parses: {exc}") from None
        at = self.instant("scheduled_for")
        assert at is not None
        return Trigger(at=at)

    def trigger_label(self) -> str:
        if self.trigger_kind() == "cron":
            tz = self.string("tz", required=False)
            return f"cron:{self.string('cron')}" + (f" tz={tz}" if tz else "")
        return "delay"

    def target(self) -> Target:
        text = self.string("target")
        assert text is not None
        try:
            return _target(text)
        except HexeractError as exc:
            raise self.bad(f"stored target no longer parses: {exc}") from None


def snapshot_of(item: dict[str, Any]) -> ScheduleSnapshot:
    """What ``inspect`` and the listings show (everything but the payload)."""
    r = ItemReader(item)
    return ScheduleSnapshot(
        schedule_id=r.schedule_id(),
        status=r.status(),
        scheduled_for=r.instant("scheduled_for"),  # type: ignore[arg-type]
        attempts=r.integer("attempts"),  # type: ignore[arg-type]
        max_attempts=r.integer("max_attempts"),  # type: ignore[arg-type]
        trigger=r.trigger_label(),
        target=r.string("target"),  # type: ignore[arg-type]
        event_type=r.string("event_type"),  # type: ignore[arg-type]
        last_error=r.string("last_error", required=False),
        dead_lettered_at=r.instant("dead_lettered_at", required=False),
        leased_until=r.instant("leased_until", required=False),
    )


def payload_ref(item: dict[str, Any]) -> str | None:
    """The key of the item holding this schedule's payload, or None if the payload is inline."""
    return ItemReader(item).string("payload_ref", required=False)


def occurrence_of(
    item: dict[str, Any],
    *,
    lease_token: str,
    leased_until: datetime,
    payloads: Mapping[str, dict[str, Any]] | None = None,
) -> LeasedOccurrence:
    """The occurrence a claim just leased, from the item the claiming write returned; a payload
    stored apart is taken from ``payloads`` (payload items by key), inline ones from the item."""
    r = ItemReader(item)
    ref = r.string("payload_ref", required=False)
    if ref is None:
        payload = r.get("payload", "B")
    else:
        stored = (payloads or {}).get(ref)
        if stored is None:
            raise r.bad("unreadable item: payload item missing")
        value = stored.get("payload")
        payload = value.get("B") if isinstance(value, dict) else None
        if not isinstance(payload, bytes | bytearray):
            raise r.bad(f"unreadable item: payload item {ref!r} holds no binary payload")
    return LeasedOccurrence(
        schedule_id=r.schedule_id(),
        scheduled_for=r.instant("scheduled_for"),  # type: ignore[arg-type]
        attempt=r.integer("attempts"),  # type: ignore[arg-type]
        max_attempts=r.integer("max_attempts"),  # type: ignore[arg-type]
        lease_token=lease_token,
        leased_until=leased_until,
        target=r.target(),
        trigger=r.trigger(),
        payload=bytes(payload),
        event_type=r.string("event_type"),  # type: ignore[arg-type]
    )


# What a claim and a failed attempt add to an item (the lease's end and token; a last error of
# up to this many bytes), kept free so that an item with its payload inline is still written for
# one write unit on the dispatch path. A longer error (up to 1,000 characters) costs one more.
CLAIM_HEADROOM = len("leased_until") + 8 + len("lease_token") + 32
ERROR_HEADROOM = len("last_error") + 200
INLINE_LIMIT = 1024 - CLAIM_HEADROOM - ERROR_HEADROOM


def item_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it: per attribute, the name's UTF-8 bytes plus the value's
    (a string's UTF-8 bytes, a binary's length, a number's 1 byte + 1 per two significant digits)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "B":
        return len(raw)
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").strip("0") or "0"
        return 1 + math.ceil(len(digits) / 2)
    raise ValueError(f"no size rule for attribute type {kind}")  # the store writes S, B and N only


@dataclass(frozen=True, slots=True)
class NewItems:
    """What ``insert`` writes: the schedule's item, and its payload's own item if the payload is
    stored apart (``payload`` None: the payload is inline)."""

    schedule: dict[str, Any]
    payload: dict[str, Any] | None = None


def item_of(message: ScheduledMessage, first: datetime, due_partition: str, now: datetime) -> NewItems:
    """The items ``insert`` writes: pending, due at ``first`` in ``due_partition``.

    The payload stays in the schedule's item while that item (with room for a lease and an error)
    fits in one write unit (1 KB); a larger one goes to an item of its own, written once, which
    the schedule's item names in ``payload_ref``: every claim and ack then writes a small item,
    whatever the payload's size.
    """
    item: dict[str, Any] = {
        "schedule_id": s(str(message.schedule_id)),
        "status": s(ScheduleStatus.PENDING.value),
        "trigger_kind": s("cron" if message.trigger.cron else "delay"),
        "target": s(str(message.target)),
        "event_type": s(message.event_type),
        "payload": {"B": message.payload},
        "scheduled_for": n(to_ms(first)),
        "due_shard": s(due_partition),
        "due_at": n(to_ms(first)),
        "attempts": n(0),
        "max_attempts": n(message.max_attempts),
        "created_at": n(to_ms(now)),
    }
    if message.trigger.cron:
        item["cron"] = s(message.trigger.cron.expression)
        if message.trigger.cron.timezone:
            item["tz"] = s(message.trigger.cron.timezone)
    if item_size(item) <= INLINE_LIMIT:
        return NewItems(item)
    ref = payload_key(message.schedule_id)
    del item["payload"]
    item["payload_ref"] = s(ref)
    return NewItems(item, {"schedule_id": s(ref), "payload": {"B": message.payload}})


def key(schedule_id: uuid.UUID | str) -> dict[str, Any]:
    """The item key, from a schedule id or a raw key as stored (which may not be a UUID)."""
    return {"schedule_id": s(str(schedule_id))}


@dataclass(frozen=True, slots=True)
class DueEntry:
    """One index entry: the item's key as stored (it may not be a UUID: the table can hold items
    this package did not write), its partition, its instant and, from the due index, the end of
    the lease it is under, if any."""

    key: str
    due_at_ms: int
    shard: str = ""
    leased_until_ms: int | None = None

    @property
    def schedule_id(self) -> uuid.UUID | None:
        try:
            return uuid.UUID(self.key)
        except ValueError:
            return None

    @property
    def available_at_ms(self) -> int:
        """When a claim can take it: its instant, or the end of the lease it is under (in flight)."""
        if self.leased_until_ms is not None and self.leased_until_ms > self.due_at_ms:
            return self.leased_until_ms
        return self.due_at_ms


def entry_of(item: dict[str, Any], partition: str, sort_key: str) -> DueEntry | None:
    """An index entry, or None if even its keys are malformed (nothing can address it). A
    ``leased_until`` that is not a number is read as no lease: the claim path looks at the item."""
    try:
        entry = DueEntry(item["schedule_id"]["S"], int(item[sort_key]["N"]), partition)
    except (KeyError, TypeError, ValueError):
        return None
    try:
        return DueEntry(entry.key, entry.due_at_ms, partition, int(item["leased_until"]["N"]))
    except (KeyError, TypeError, ValueError):
        return entry
