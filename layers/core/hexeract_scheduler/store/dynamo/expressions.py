"""Every condition and update the store sends, as named constants built from ``ScheduleStatus``.

Tests and tools import these names instead of matching request text. Placeholders: ``#st`` is
``status`` (a DynamoDB reserved word); ``names()`` sends exactly the ones an expression uses.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from hexeract_scheduler.domain.clock import to_ms
from hexeract_scheduler.domain.model import ScheduleStatus
from hexeract_scheduler.store.contract import short_error
from hexeract_scheduler.store.dynamo.schema import DEAD_LETTER_PK

PENDING, PAUSED = ScheduleStatus.PENDING.value, ScheduleStatus.PAUSED.value
DELIVERED, CANCELLED = ScheduleStatus.DELIVERED.value, ScheduleStatus.CANCELLED.value
DEAD = ScheduleStatus.DEAD_LETTERED.value

_ATTRIBUTE_NAMES = {"#st": "status"}

# Everything but the payload: what listings and inspect read.
SNAPSHOT_ATTRS = (
    "schedule_id, #st, scheduled_for, attempts, max_attempts, trigger_kind, cron, tz, target, "
    "event_type, last_error, dead_lettered_at, leased_until"
)
# What a refused claim needs to tell a lost race from a spent budget or an unreadable item.
REFUSAL_ATTRS = "#st, attempts, max_attempts, leased_until, due_shard, due_at"

# Removing these takes an item out of the due index and fences any lease in flight.
LEAVE_ACTIVE = "due_shard, due_at, leased_until, lease_token"
INSERT_CONDITION = "attribute_not_exists(schedule_id)"
EXISTS = "attribute_exists(schedule_id)"

# -- the worker's path -------------------------------------------------------------------------
# The invariant: due_at is when the occurrence (or its retry, or the next one) is due, and only
# RETRY, RESCHEDULE and the operators' writes move it. A claim leaves it and sets leased_until,
# which the due index projects: an entry due under a lease in force is in flight with a worker
# (due again when the lease ends), and the claim updates that entry in place (1 index write
# unit; a due_at change is a delete and a put, 2).
# attribute_type first: comparing a mistyped attempts fails the condition on DynamoDB, but makes
# some emulators (moto) answer 500 forever.
CLAIM_CONDITION = (
    "#st = :pending AND due_at <= :now AND attribute_type(attempts, :num) "
    "AND attribute_type(max_attempts, :num) AND attempts < max_attempts "
    "AND (attribute_not_exists(leased_until) OR leased_until <= :now)"
)
CLAIM = "SET attempts = attempts + :one, leased_until = :until, lease_token = :tok"
FENCE = "lease_token = :tok"
DELIVER = f"SET #st = :delivered REMOVE {LEAVE_ACTIVE}"
RESCHEDULE = "SET scheduled_for = :next, due_at = :next, attempts = :zero REMOVE leased_until, lease_token, last_error"
# A retry waits in the index at its instant, with leased_until (what listings show as the next
# attempt) set to the same instant and no token: due, and claimable, once it passes.
RETRY = "SET last_error = :err, leased_until = :retry, due_at = :retry REMOVE lease_token"
# Dead-lettering (values from ``dead_values``): out of the due index, into the dead-letter index.
DEAD_LETTER = f"SET #st = :dead, last_error = :err, dead_lettered_at = :now, dl_pk = :dl REMOVE {LEAVE_ACTIVE}"
# What a crashed worker leaves: pending, budget spent, due (due_at never moved), lease expired.
SWEEP_CONDITION = (
    "#st = :pending AND attempts >= max_attempts AND (attribute_not_exists(leased_until) OR leased_until <= :now)"
)
# An unreadable item no claim can take, still where the index showed it, with no lease in force
# (an item under a live lease is some worker's: it is looked at again once the lease ends).
QUARANTINE_CONDITION = (
    "due_shard = :shard AND due_at = :due AND (attribute_not_exists(leased_until) OR NOT (leased_until > :now))"
)
DUE_QUERY = "due_shard = :s AND due_at <= :t"
# What the claim path reads of a payload item (docs/contracts.md#table-layout).
PAYLOAD_ATTRS = "schedule_id, payload"
# A payload item is written once, before its schedule's item: a retried put of the same payload
# applies again (a lost response must not make the insert fail), any other is refused.
PAYLOAD_CONDITION = "attribute_not_exists(schedule_id) OR payload = :payload"

# -- users and operators -----------------------------------------------------------------------
CANCEL = f"SET #st = :cancelled REMOVE {LEAVE_ACTIVE}"
CANCEL_CONDITION = "#st IN (:pending, :paused)"
PAUSE = "SET #st = :paused, due_shard = :parked, due_at = scheduled_for REMOVE leased_until, lease_token"
PAUSE_CONDITION = "#st = :pending"
RESUME = "SET #st = :pending, due_shard = :shard, due_at = :due, scheduled_for = :due"
RESUME_FRESH = f"{RESUME}, attempts = :zero REMOVE last_error"
RESUME_CONDITION = "#st = :paused AND scheduled_for = :old"
FINISH = DELIVER  # a resumed cron with no future instant
REPLAY = (
    "SET #st = :pending, attempts = :zero, due_shard = :shard, due_at = :now "
    "REMOVE last_error, dead_lettered_at, dl_pk, leased_until, lease_token"
)
REPLAY_CONDITION = "#st = :dead"


def names(*expressions: str) -> dict[str, Any]:
    """``ExpressionAttributeNames`` holding exactly the placeholders these expressions use, or no
    such parameter at all: DynamoDB rejects an empty map and an unused name (moto accepts both)."""
    used = {k: v for k, v in _ATTRIBUTE_NAMES.items() if any(re.search(rf"{k}\b", e) for e in expressions)}
    return {"ExpressionAttributeNames": used} if used else {}


def s(value: str) -> dict[str, Any]:
    return {"S": value}


def n(value: int) -> dict[str, Any]:
    return {"N": str(int(value))}


def dead_values(reason: str, now: datetime, *, token: str | None = None) -> dict[str, Any]:
    """The values of ``DEAD_LETTER`` (and of ``FENCE`` on ``token``)."""
    values = {":dead": s(DEAD), ":err": s(short_error(reason)), ":now": n(to_ms(now)), ":dl": s(DEAD_LETTER_PK)}
    if token is not None:
        values[":tok"] = s(token)
    return values
