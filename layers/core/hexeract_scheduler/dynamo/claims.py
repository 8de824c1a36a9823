"""The worker's path through the table: find due entries, claim them, settle each with a fenced
acknowledgement; sweep crash-exhausted schedules and quarantine unreadable items on the way."""

from __future__ import annotations

import enum
import heapq
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from ..aws import aws_errors, error_code
from ..clock import from_ms, to_ms
from ..concurrency import map_concurrently, no_answer
from ..contract import CRASH_EXHAUSTED, ClaimBatch, short_error
from ..errors import HexeractError, RetryableError, UnreadableItem
from ..model import LeasedOccurrence, ScheduleStatus
from . import expressions as x
from .base import DynamoBase
from .codec import DueEntry, ItemReader, entry_of, key, occurrence_of
from .expressions import dead_values, n, names, s
from .schema import DUE_INDEX, PAUSED_PREFIX

# Due entries read per claim: keys-only index entries are tiny, so a few batches' worth costs no
# more read units than one, and gives racing workers room to pick different items.
CANDIDATES_PER_CLAIM = 4
# How many more index pages a claim reads past entries known to be stuck.
MAX_PAGES_PAST_STUCK = 4


class ClaimRefusal(enum.Enum):
    """Why a claim did not apply (a domain outcome, not an error)."""

    LOST = "lost"  # someone else holds or finished it, or the index entry was stale
    EXHAUSTED = "exhausted"  # pending, budget used up by crashed workers, lease expired: sweep it
    STUCK = "stuck"  # due in a worker partition, but no claim can ever take it: quarantine it
    UNREADABLE = "unreadable"  # an unreadable item, now quarantined (dead-lettered with the reason)


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: ClaimRefusal
    reason: str = ""


class ClaimOps(DynamoBase):
    """The ``ScheduleStore`` half of the DynamoDB store."""

    def find_due(
        self,
        now: datetime,
        limit: int,
        *,
        horizon: timedelta = timedelta(0),
        skip: Collection[str] = (),
        time_left: Callable[[], float | None] | None = None,
    ) -> list[DueEntry]:
        """Index entries due by ``now + horizon`` in this store's shards, soonest first.

        The index is eventually consistent and KEYS_ONLY: an entry is a hint, and the claim's
        condition is the truth. An entry whose keys are malformed is dropped (nothing could
        address it); one whose key is not a UUID is returned for the worker to quarantine.
        Entries whose key is in ``skip`` (items known to be stuck) are read past, a few pages at
        most, so they cannot hide the claimable entries behind them.
        """
        until = to_ms(now + horizon)
        what = f"finding due schedules in {self.name}"

        def one(shard: int) -> list[DueEntry]:
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": DUE_INDEX,
                "KeyConditionExpression": x.DUE_QUERY,
                "ExpressionAttributeValues": {":s": s(str(shard)), ":t": n(until)},
                "Limit": limit,
            }
            out: list[DueEntry] = []
            with aws_errors(what):
                for _ in range(MAX_PAGES_PAST_STUCK + 1):
                    page = self.client.query(**kwargs)
                    entries = (entry_of(i, str(shard), "due_at") for i in page.get("Items", []))
                    out += [e for e in entries if e is not None and e.key not in skip]
                    if len(out) >= limit or "LastEvaluatedKey" not in page or not skip:
                        break
                    kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            return out[:limit]

        late = no_answer(what)
        with aws_errors(what):
            shards = self._read_shard_list()
        results = map_concurrently(self.executor, one, shards, time_left=time_left, late=late)
        return list(heapq.merge(*results, key=lambda e: e.due_at_ms))

    def claim(self, schedule_id: uuid.UUID, now: datetime, lease: timedelta) -> LeasedOccurrence | Refusal:
        """Claim one occurrence: in one conditional write, check it is pending, due, unleased and
        within budget; increment ``attempts``; stamp a fresh lease token and ``leased_until``.

        ``due_at`` moves to ``leased_until``: if this worker dies, the item is due again exactly
        when the lease expires, and that re-claim counts against the budget. A claimed item that
        cannot be read (a missing payload, a stored target that no longer parses) is dead-lettered
        at once with the reason, under the lease just taken, and reported as UNREADABLE.
        """
        now_ms = to_ms(now)
        until = from_ms(to_ms(now + lease))
        token = uuid.uuid4().hex
        values = {":num": s("N"), ":one": n(1), ":until": n(to_ms(until)), ":tok": s(token)}
        values |= {":pending": s(x.PENDING), ":now": n(now_ms)}
        what = f"claiming schedule {schedule_id}"
        result = self._update(
            schedule_id, x.CLAIM, x.CLAIM_CONDITION, values, what, old=x.REFUSAL_ATTRS, return_new=True
        )
        if not result.applied:
            return _refusal(result.item, now_ms)
        assert result.item is not None
        try:
            return occurrence_of(result.item, lease_token=token, leased_until=until)
        except UnreadableItem as bad:
            quarantined = self._fenced(
                schedule_id, x.DEAD_LETTER, dead_values(bad.reason, now, token=token), "quarantining", x.FENCE
            )
            return Refusal(ClaimRefusal.UNREADABLE if quarantined else ClaimRefusal.LOST, bad.reason)

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
        """Find due entries and claim up to ``limit`` of them concurrently (``ScheduleStore``).

        Every worker sees the same head of the index: a random pick among the due entries keeps
        racing workers from spending their claims on the same items. An error on one entry does
        not drop the others: the claims that landed are returned (else they would sit leased,
        unsent, until their lease expires, each losing an attempt) and the failed entry stays due;
        only a batch that got nothing re-raises, so the worker backs off.
        """
        entries = self.find_due(now, limit * CANDIDATES_PER_CLAIM, horizon=horizon, skip=skip, time_left=time_left)
        now_ms = to_ms(now)
        due = [e for e in entries if e.due_at_ms <= now_ms]
        later = [e.due_at_ms for e in entries if e.due_at_ms > now_ms]
        batch = ClaimBatch(next_due_ms=min(later) if later else None, more_due=len(due) >= limit)
        if len(due) > limit:
            due = self.rng.sample(due, limit)
        errors: list[HexeractError] = []

        def claim_one(e: DueEntry) -> LeasedOccurrence | Refusal | None:
            try:
                sid = e.schedule_id
                if sid is None:
                    return self._quarantine_entry(e, "unreadable item: schedule_id is not a UUID", now)
                outcome = self.claim(sid, now, lease)
                if isinstance(outcome, Refusal) and outcome.kind is ClaimRefusal.EXHAUSTED:
                    return outcome if self.sweep_exhausted(sid, now) else Refusal(ClaimRefusal.LOST)
                if isinstance(outcome, Refusal) and outcome.kind is ClaimRefusal.STUCK:
                    return self._quarantine_entry(e, outcome.reason, now)
                return outcome
            except HexeractError as exc:
                errors.append(exc)
                return None

        def late(e: DueEntry) -> None:
            errors.append(RetryableError(f"claiming {e.key}: no answer within the time left"))

        outcomes = map_concurrently(self.executor, claim_one, due, time_left=time_left, late=late)
        for entry, outcome in zip(due, outcomes, strict=True):
            if isinstance(outcome, LeasedOccurrence):
                batch.leased.append(outcome)
            elif outcome is None:
                continue
            elif outcome.kind is ClaimRefusal.EXHAUSTED:
                batch.swept.append(uuid.UUID(entry.key))
            elif outcome.kind is ClaimRefusal.UNREADABLE:
                batch.quarantined.append((entry.key, outcome.reason))
            elif outcome.kind is ClaimRefusal.STUCK:
                batch.unreadable.append((entry.key, outcome.reason))
            else:
                batch.lost += 1
        if errors and not batch.leased and not batch.swept and not batch.quarantined:
            raise errors[0]
        batch.errors = [str(e) for e in errors]
        return batch

    def _quarantine_entry(self, entry: DueEntry, reason: str, now: datetime) -> Refusal:
        """Dead-letter an unreadable item that no claim can take, addressed by its raw key, if it
        still sits where the index showed it (same partition, same instant, no live lease).
        Refused (it moved meanwhile, or no write can take it) it is reported STUCK and left."""
        values = dead_values(reason, now) | {":shard": s(entry.shard), ":due": n(entry.due_at_ms)}
        with aws_errors(f"quarantining item {entry.key!r}"):
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=key(entry.key),
                    UpdateExpression=x.DEAD_LETTER,
                    ConditionExpression=x.QUARANTINE_CONDITION,
                    ExpressionAttributeValues=values,
                    **names(x.DEAD_LETTER, x.QUARANTINE_CONDITION),
                )
            except ClientError as exc:
                if error_code(exc) not in ("ConditionalCheckFailedException", "ValidationException"):
                    raise
                return Refusal(ClaimRefusal.STUCK, reason)
        return Refusal(ClaimRefusal.UNREADABLE, reason)

    def sweep_exhausted(self, schedule_id: uuid.UUID, now: datetime) -> bool:
        """Dead-letter a pending schedule whose budget crashed workers used up (lease expired)."""
        values = dead_values(CRASH_EXHAUSTED, now) | {":pending": s(x.PENDING)}
        return self._fenced(schedule_id, x.DEAD_LETTER, values, "sweeping", x.SWEEP_CONDITION)

    # -- fenced acks (see ScheduleStore: False means the lease was lost; not an error) ----------

    def mark_delivered(self, occ: LeasedOccurrence) -> bool:
        values = {":delivered": s(x.DELIVERED), ":tok": s(occ.lease_token)}
        return self._fenced(occ.schedule_id, x.DELIVER, values, "acking delivery of", x.FENCE)

    def reschedule(self, occ: LeasedOccurrence, next_at: datetime) -> bool:
        values = {":next": n(to_ms(next_at)), ":zero": n(0), ":tok": s(occ.lease_token)}
        return self._fenced(occ.schedule_id, x.RESCHEDULE, values, "rescheduling", x.FENCE)

    def mark_failed(self, occ: LeasedOccurrence, error: str, retry_at: datetime) -> bool:
        values = {":err": s(short_error(error)), ":retry": n(to_ms(retry_at)), ":tok": s(occ.lease_token)}
        return self._fenced(occ.schedule_id, x.RETRY, values, "recording a failure of", x.FENCE)

    def mark_dead_lettered(self, occ: LeasedOccurrence, error: str, now: datetime) -> bool:
        values = dead_values(error, now, token=occ.lease_token)
        return self._fenced(occ.schedule_id, x.DEAD_LETTER, values, "dead-lettering", x.FENCE)


def _refusal(old: dict[str, Any] | None, now_ms: int) -> Refusal:
    """Why a claim was refused, from the item as it stood (see ``_update``). Only a due item that
    still sits in a worker partition with no live lease can be EXHAUSTED or STUCK; anything else
    (the entry was stale, another worker holds it) is LOST."""
    if not old:
        return Refusal(ClaimRefusal.LOST)
    r = ItemReader(old)
    try:
        shard = r.string("due_shard", required=False)
        due = r.integer("due_at", required=False)
        leased_until = r.integer("leased_until", required=False)
    except UnreadableItem as bad:
        return Refusal(ClaimRefusal.STUCK, bad.reason)
    if shard is None or shard.startswith(PAUSED_PREFIX) or due is None or due > now_ms:
        return Refusal(ClaimRefusal.LOST)
    if leased_until is not None and leased_until > now_ms:
        # Every write that leases an item moves due_at with leased_until: due now under a lease
        # in force is a state no worker wrote, and no claim can take it until the lease ends.
        return Refusal(ClaimRefusal.STUCK, "unreadable item: due while a lease is in force")
    try:
        if r.status() is not ScheduleStatus.PENDING:
            return Refusal(ClaimRefusal.STUCK, f"unreadable item: status {r.string('status')} in a due partition")
        attempts, max_attempts = r.integer("attempts"), r.integer("max_attempts")
    except UnreadableItem as bad:
        return Refusal(ClaimRefusal.STUCK, bad.reason)
    assert attempts is not None and max_attempts is not None
    if attempts >= max_attempts:
        return Refusal(ClaimRefusal.EXHAUSTED)
    return Refusal(ClaimRefusal.LOST)
