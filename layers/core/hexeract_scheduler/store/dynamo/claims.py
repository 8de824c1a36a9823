"""The worker's path through the table: find due entries, claim them, fetch the payloads stored
apart, settle each with a fenced acknowledgement; sweep crash-exhausted schedules and quarantine
unreadable items on the way."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from hexeract_scheduler.aws.translate import aws_errors, error_code
from hexeract_scheduler.concurrency import map_concurrently, no_answer
from hexeract_scheduler.domain.clock import from_ms, to_ms
from hexeract_scheduler.domain.model import LeasedOccurrence, ScheduleStatus
from hexeract_scheduler.errors import HexeractError, RetryableError, UnreadableItem
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED, ClaimBatch, short_error
from hexeract_scheduler.store.dynamo import expressions as x
from hexeract_scheduler.store.dynamo.codec import DueEntry, ItemReader, entry_of, key, occurrence_of, payload_ref
from hexeract_scheduler.store.dynamo.expressions import dead_values, n, names, s
from hexeract_scheduler.store.dynamo.payloads import PayloadReads
from hexeract_scheduler.store.dynamo.schema import DUE_INDEX, PAUSED_PREFIX

# Due entries read per claim: index entries are tiny (keys and leased_until), so a few batches'
# worth costs no more read units than one, and gives racing workers room to pick different items.
CANDIDATES_PER_CLAIM = 4
# How many more index pages a claim reads past entries it cannot use: in flight with a worker
# past the look-ahead, or known to be stuck.
MAX_PAGES_PAST_STUCK = 4


class ClaimRefusal(enum.Enum):
    """Why a claim did not apply (a domain outcome, not an error)."""

    LOST = "lost"  # someone else holds (its lease is in force) or finished it, or the entry was stale
    EXHAUSTED = "exhausted"  # pending, budget used up by crashed workers, lease expired: sweep it
    STUCK = "stuck"  # due in a worker partition, but no claim can ever take it: quarantine it
    UNREADABLE = "unreadable"  # an unreadable item, now quarantined (dead-lettered with the reason)


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: ClaimRefusal
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Taken:
    """A claim that applied: the item as the claiming write left it, and the lease it took."""

    schedule_id: uuid.UUID
    item: dict[str, Any]
    token: str
    until: datetime


class ClaimOps(PayloadReads):
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
        """Index entries claimable by ``now + horizon`` in this store's shards, soonest first.

        The index is eventually consistent: an entry is a hint, and the claim's condition is the
        truth. An entry under a lease (``leased_until``, which the index carries) is in flight
        with a worker and claimable only when the lease ends (``DueEntry.available_at_ms``): within
        the look-ahead it is returned (not yet due), beyond it it is read past. So are entries
        whose key is in ``skip`` (items known to be stuck): a few pages at most, so that neither
        can hide the claimable entries behind them. An entry whose keys are malformed is dropped
        (nothing could address it); one whose key is not a UUID is returned for the worker to
        quarantine.
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
                    out += [e for e in entries if e is not None and e.key not in skip and e.available_at_ms <= until]
                    # A full page (one that may have more behind it) with fewer usable entries
                    # than asked for: some were read past, look behind them.
                    if len(out) >= limit or "LastEvaluatedKey" not in page:
                        break
                    kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            return out[:limit]

        late = no_answer(what)
        with aws_errors(what):
            shards = self._read_shard_list()
        results = map_concurrently(self.executor, one, shards, time_left=time_left, late=late)
        return sorted((e for r in results for e in r), key=lambda e: e.available_at_ms)

    def claim(self, schedule_id: uuid.UUID, now: datetime, lease: timedelta) -> LeasedOccurrence | Refusal:
        """Claim one occurrence: in one conditional write, check it is pending, due, unleased and
        within budget; increment ``attempts``; stamp a fresh lease token and ``leased_until``.

        ``due_at`` stays where it is: while the lease is in force the item is in flight (the due
        index carries ``leased_until``), and if this worker dies it is due again exactly when the
        lease expires; that re-claim counts against the budget. A payload stored apart is read
        (``claim_due`` reads a whole batch's in one request). A claimed item that cannot be read
        (a missing payload or payload item, a stored target that no longer parses) is
        dead-lettered at once with the reason, under the lease just taken, and reported as
        UNREADABLE.
        """
        taken = self._take(schedule_id, now, lease)
        if isinstance(taken, Refusal):
            return taken
        [outcome] = self._occurrences([taken], now)
        if isinstance(outcome, HexeractError):
            raise outcome
        return outcome

    def _take(self, schedule_id: uuid.UUID, now: datetime, lease: timedelta) -> _Taken | Refusal:
        """The claiming write alone (see ``claim``)."""
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
        return _Taken(schedule_id, result.item, token, until)

    def _occurrences(
        self,
        taken: list[_Taken],
        now: datetime,
        time_left: Callable[[], float | None] | None = None,
    ) -> list[LeasedOccurrence | Refusal | HexeractError]:
        """The occurrences of claims that applied, in order, with the payloads stored apart read in
        one ``BatchGetItem`` (only when some claim needs one). An unreadable one is quarantined
        (UNREADABLE, or LOST if its lease was lost meanwhile); one whose payload could not be read
        (an AWS error, no answer in the time left) is that error: its lease expires unsent."""
        refs: dict[int, str] = {}
        unreadable: dict[int, str] = {}
        for i, t in enumerate(taken):
            try:
                ref = payload_ref(t.item)
            except UnreadableItem as bad:
                unreadable[i] = bad.reason
                continue
            if ref is not None:
                refs[i] = ref
        payloads, failed = self._payload_items(sorted(set(refs.values())), time_left)
        out: list[LeasedOccurrence | Refusal | HexeractError] = []
        for i, t in enumerate(taken):
            if i in refs and refs[i] in failed:
                out.append(failed[refs[i]])
                continue
            reason = unreadable.get(i)
            if reason is None:
                try:
                    out.append(occurrence_of(t.item, lease_token=t.token, leased_until=t.until, payloads=payloads))
                    continue
                except UnreadableItem as bad:
                    reason = bad.reason
            try:
                quarantined = self._fenced(
                    t.schedule_id, x.DEAD_LETTER, dead_values(reason, now, token=t.token), "quarantining", x.FENCE
                )
            except HexeractError as exc:
                out.append(exc)
                continue
            out.append(Refusal(ClaimRefusal.UNREADABLE if quarantined else ClaimRefusal.LOST, reason))
        return out

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
        racing workers from spending their claims on the same items. An entry in flight with
        another worker is not due until its lease ends (``find_due``). The payloads stored apart
        of the claims that applied are read in one request. An error on one entry does not drop
        the others: the claims that landed are returned (else they would sit leased, unsent,
        until their lease expires, each losing an attempt) and the failed entry stays due; only
        a batch that got nothing re-raises, so the worker backs off.
        """
        entries = self.find_due(now, limit * CANDIDATES_PER_CLAIM, horizon=horizon, skip=skip, time_left=time_left)
        now_ms = to_ms(now)
        due = [e for e in entries if e.available_at_ms <= now_ms]
        later = [e.available_at_ms for e in entries if e.available_at_ms > now_ms]
        batch = ClaimBatch(next_due_ms=min(later) if later else None, more_due=len(due) >= limit)
        if len(due) > limit:
            due = self.rng.sample(due, limit)
        errors: list[HexeractError] = []

        def claim_one(e: DueEntry) -> _Taken | Refusal | None:
            try:
                sid = e.schedule_id
                if sid is None:
                    return self._quarantine_entry(e, "unreadable item: schedule_id is not a UUID", now)
                outcome = self._take(sid, now, lease)
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

        claimed = map_concurrently(self.executor, claim_one, due, time_left=time_left, late=late)
        taken = [c for c in claimed if isinstance(c, _Taken)]
        completed = iter(self._occurrences(taken, now, time_left) if taken else [])
        for entry, claim in zip(due, claimed, strict=True):
            outcome = next(completed) if isinstance(claim, _Taken) else claim
            if isinstance(outcome, LeasedOccurrence):
                batch.leased.append(outcome)
            elif outcome is None:
                continue
            elif isinstance(outcome, HexeractError):
                errors.append(outcome)
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
    (the entry was stale, another worker holds it under a lease in force) is LOST."""
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
        # A claim leaves due_at where it is: due under a lease in force is in flight with another
        # worker, claimable again when the lease ends.
        return Refusal(ClaimRefusal.LOST)
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
