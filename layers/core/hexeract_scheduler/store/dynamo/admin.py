"""What users and operators do to the table: insert, inspect, pause, resume, cancel, replay, list."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from hexeract_scheduler.aws.translate import aws_errors, error_code
from hexeract_scheduler.domain.clock import from_ms, to_ms
from hexeract_scheduler.domain.model import ScheduledMessage, ScheduleSnapshot, ScheduleStatus, parse_schedule_id
from hexeract_scheduler.errors import InvalidInput, NotReplayable, ScheduleNotFound, UnreadableItem
from hexeract_scheduler.store.contract import Listing, check_limit
from hexeract_scheduler.store.dynamo import expressions as x
from hexeract_scheduler.store.dynamo.base import DynamoBase
from hexeract_scheduler.store.dynamo.codec import DueEntry, ItemReader, entry_of, item_of, key, snapshot_of
from hexeract_scheduler.store.dynamo.expressions import n, names, s
from hexeract_scheduler.store.dynamo.schema import (
    DEAD_LETTER_INDEX,
    DEAD_LETTER_PK,
    DUE_INDEX,
    PAUSED_PREFIX,
    due_partition,
    paused_partition,
)


class AdminOps(DynamoBase):
    """The ``ScheduleAdmin`` half of the DynamoDB store."""

    def insert(self, message: ScheduledMessage, now: datetime) -> ScheduleSnapshot:
        """Store a new pending schedule; its first occurrence is due at the trigger's first instant.

        A payload too large for the schedule's item to stay within one write unit is written
        first, in an item of its own (``codec.item_of``), then the schedule's item: never a
        schedule without its payload. Two single-item writes, not a transaction (dynalite, the
        suite's strict DynamoDB, has none): an insert that fails between them leaves a payload
        item no schedule names, which is harmless (no index or listing sees it, and a retried
        insert of the same message writes it again).
        """
        first = message.trigger.first_due(now)
        with aws_errors(f"adding schedule {message.schedule_id} to {self.name}"):
            items = item_of(message, first, due_partition(message.schedule_id, self._shard_count()), now)
            try:
                if items.payload is not None:
                    self.client.put_item(
                        TableName=self.table_name,
                        Item=items.payload,
                        ConditionExpression=x.PAYLOAD_CONDITION,
                        ExpressionAttributeValues={":payload": items.payload["payload"]},
                    )
                self.client.put_item(
                    TableName=self.table_name, Item=items.schedule, ConditionExpression=x.INSERT_CONDITION
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    raise InvalidInput(f"schedule {message.schedule_id} already exists") from None
                raise
        return snapshot_of(items.schedule)

    def inspect(self, schedule_id: uuid.UUID | str) -> ScheduleSnapshot | None:
        """The schedule as stored, or None if there is no such schedule."""
        sid = parse_schedule_id(schedule_id)
        with aws_errors(f"inspecting schedule {sid} in {self.name}"):
            got = self.client.get_item(
                TableName=self.table_name,
                Key=key(sid),
                ConsistentRead=True,
                ProjectionExpression=x.SNAPSHOT_ATTRS,
                **names(x.SNAPSHOT_ATTRS),
            )
        return snapshot_of(got["Item"]) if "Item" in got else None

    def cancel(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending or paused → cancelled (True). A terminal schedule is left alone (False)."""
        sid = parse_schedule_id(schedule_id)
        values = {":cancelled": s(x.CANCELLED), ":pending": s(x.PENDING), ":paused": s(x.PAUSED)}
        return (
            self._lifecycle(sid, x.CANCEL, x.CANCEL_CONDITION, values, f"cancelling schedule {sid} in {self.name}")
            is None
        )

    def pause(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending → paused (True); anything else is left alone (False).

        Pausing drops the lease token, so an in-flight dispatch's ack is fenced off: that
        occurrence is sent again (same occurrence id) after resume unless resume moves a cron past
        it. The item moves to the due index's paused partition, which workers never query.
        """
        sid = parse_schedule_id(schedule_id)
        what = f"pausing schedule {sid} in {self.name}"
        with aws_errors(what):
            parked = paused_partition(sid, self._shard_count())
        values = {":paused": s(x.PAUSED), ":pending": s(x.PENDING), ":parked": s(parked)}
        return self._lifecycle(sid, x.PAUSE, x.PAUSE_CONDITION, values, what) is None

    def resume(self, schedule_id: uuid.UUID | str, now: datetime) -> bool:
        """Paused → pending (True), due where ``Trigger.resumed`` says; not paused: False."""
        sid = parse_schedule_id(schedule_id)
        what = f"resuming schedule {sid} in {self.name}"
        with aws_errors(what):
            got = self.client.get_item(TableName=self.table_name, Key=key(sid), ConsistentRead=True)
            shards = self._shard_count()
        if "Item" not in got:
            raise ScheduleNotFound(sid)
        reader = ItemReader(got["Item"])
        if reader.status() is not ScheduleStatus.PAUSED:
            return False
        stored = reader.instant("scheduled_for")
        assert stored is not None
        plan = reader.trigger().resumed(stored, from_ms(to_ms(now)))  # instants are kept in ms
        values: dict[str, Any] = {":paused": s(x.PAUSED), ":old": n(to_ms(stored))}
        if plan.due is None:  # no future instant: nothing left to fire
            values[":delivered"] = s(x.DELIVERED)
            return self._lifecycle(sid, x.FINISH, x.RESUME_CONDITION, values, what) is None
        values |= {":pending": s(x.PENDING), ":shard": s(due_partition(sid, shards)), ":due": n(to_ms(plan.due))}
        if plan.fresh:
            values[":zero"] = n(0)
        update = x.RESUME_FRESH if plan.fresh else x.RESUME
        return self._lifecycle(sid, update, x.RESUME_CONDITION, values, what) is None

    def replay(self, schedule_id: uuid.UUID | str, now: datetime) -> None:
        """Dead-lettered → pending, attempts 0, error cleared, due now, same occurrence.

        Anything else raises NotReplayable and changes nothing.
        """
        sid = parse_schedule_id(schedule_id)
        what = f"replaying schedule {sid} in {self.name}"
        with aws_errors(what):
            shard = due_partition(sid, self._shard_count())
        values = {
            ":pending": s(x.PENDING),
            ":dead": s(x.DEAD),
            ":zero": n(0),
            ":shard": s(shard),
            ":now": n(to_ms(now)),
        }
        refused = self._lifecycle(sid, x.REPLAY, x.REPLAY_CONDITION, values, what)
        if refused is not None:
            known = {st.value: st.label for st in ScheduleStatus}
            raise NotReplayable(sid, known.get(refused, refused))

    # -- listings ----------------------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> Listing:
        """Pending and paused schedules, soonest due first (the instant each is next attempted: its
        scheduled instant, or the end of its lease or retry delay): one Query per due-index
        partition, merged, never a Scan. Unreadable items are left out and reported in
        ``skipped``. Reads only: never writes, even to a table no one has used yet."""
        check_limit(limit)
        what = f"listing schedules in {self.name}"
        with aws_errors(what):
            count = self._shard_count_for_reading()
        partitions = [str(i) for i in range(count)] + [f"{PAUSED_PREFIX}{i}" for i in range(count)]

        def entries(window: int) -> list[DueEntry]:
            # An entry in flight is next attempted when its lease ends, later than its due_at, the
            # order each partition is read in: ``_query_keys`` reads each partition until it holds
            # ``window`` entries not in flight, which holds its soonest ``window`` by next attempt.
            read = [e for p in partitions for e in self._query_keys(DUE_INDEX, "due_shard", p, window, forward=True)]
            return sorted(read, key=lambda e: (e.available_at_ms, e.key))[:window]  # read only what can be listed

        rows = self._listing(entries, limit, (ScheduleStatus.PENDING, ScheduleStatus.PAUSED), what)
        return Listing(sorted(rows, key=lambda r: (r.next_attempt, str(r.schedule_id))), rows.skipped)

    def list_dead_letter(self, limit: int = 50) -> Listing:
        """Dead-lettered schedules, most recently dead-lettered first (a Query, never a Scan).
        Unreadable items are left out and reported in ``skipped``."""
        check_limit(limit)
        rows = self._listing(
            lambda window: self._query_keys(DEAD_LETTER_INDEX, "dl_pk", DEAD_LETTER_PK, window, forward=False),
            limit,
            (ScheduleStatus.DEAD_LETTERED,),
            f"listing dead-lettered schedules in {self.name}",
        )
        ordered = sorted(rows, key=lambda r: (r.dead_lettered_at or r.scheduled_for, str(r.schedule_id)), reverse=True)
        return Listing(ordered, rows.skipped)

    def _listing(
        self, entries: Callable[[int], list[DueEntry]], limit: int, statuses: tuple[ScheduleStatus, ...], what: str
    ) -> Listing:
        """Index keys in order → items read consistently → only those still in ``statuses``.

        The index is eventually consistent and items change under it (a worker delivers one while
        we list), so an entry can be gone by the time it is read: widen the window and read again
        until ``limit`` rows hold or the index has no more. An item that cannot be read is left
        out and reported (key and reason), never allowed to fail the whole listing.
        """
        window = limit
        while True:
            with aws_errors(what):
                found = entries(window)
                items = self._batch_get([e.key for e in found])
            rows: list[ScheduleSnapshot] = []
            skipped: list[tuple[str, str]] = []
            for entry in found:
                if entry.key not in items:
                    continue
                try:
                    rows.append(snapshot_of(items[entry.key]))
                except UnreadableItem as bad:
                    skipped.append((bad.key, bad.reason))
            rows = [r for r in rows if r.status in statuses][:limit]
            if len(rows) >= limit or len(found) < window or window >= limit * 8:
                return Listing(rows, skipped)
            window *= 2

    def _query_keys(self, index: str, pk: str, value: str, limit: int, *, forward: bool) -> list[DueEntry]:
        """Entries of one partition in index order: ``limit`` of them, not counting entries in
        flight (under a lease that ends after their ``due_at``), or all there are."""
        sort_key = {DEAD_LETTER_INDEX: "dead_lettered_at", DUE_INDEX: "due_at"}[index]
        out: list[DueEntry] = []
        in_flight = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": "#pk = :v",
            "ExpressionAttributeNames": {"#pk": pk},
            "ExpressionAttributeValues": {":v": s(value)},
            "ScanIndexForward": forward,
        }
        while len(out) - in_flight < limit:
            page = self.client.query(Limit=limit - len(out) + in_flight, **kwargs)
            entries = [e for i in page.get("Items", []) if (e := entry_of(i, value, sort_key)) is not None]
            out += entries
            in_flight += sum(e.available_at_ms > e.due_at_ms for e in entries)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def _batch_get(self, keys_in_order: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The items with these keys (raw strings, as the index holds them), read consistently."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys_in_order), 100):
            keys = [key(k) for k in dict.fromkeys(keys_in_order[start : start + 100])]
            request: dict[str, Any] = {
                self.table_name: {
                    "Keys": keys,
                    "ConsistentRead": True,
                    "ProjectionExpression": x.SNAPSHOT_ATTRS,
                    **names(x.SNAPSHOT_ATTRS),
                }
            }
            for _ in range(10):
                resp = self.client.batch_get_item(RequestItems=request)
                for item in resp.get("Responses", {}).get(self.table_name, []):
                    found[item["schedule_id"]["S"]] = item
                request = resp.get("UnprocessedKeys") or {}
                if not request:
                    break
        return found
