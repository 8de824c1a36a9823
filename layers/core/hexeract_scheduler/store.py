"""DynamoScheduleStore: schedules in one DynamoDB table, claimed with conditional writes.

Table layout (docs/contracts.md#table-layout). Key ``schedule_id`` (S). Instants are integer epoch milliseconds.

* ``due-index`` (sparse, KEYS_ONLY): ``due_shard`` (S) + ``due_at`` (N). A pending item sits in
  partition ``"<shard>"``, which workers query; a claim sets ``due_at = leased_until``, so an
  expired lease makes the item due again with no extra query. A paused item sits in partition
  ``"p<shard>"`` (due at its instant), which no worker queries. Terminal items drop the keys and
  leave the index. The listing of pending and paused schedules is a Query per partition, merged:
  never a Scan, and no second index to keep up (each index write is a write unit per change).
* ``dead-letter-index`` (sparse, KEYS_ONLY): ``dl_pk`` (S, constant) + ``dead_lettered_at`` (N).

Every step is one single-item conditional write (no transactions): half the cost of a
transaction, and each state change stays atomic on its own. The shard count is fixed when the table
is created and recorded in the item ``schedule_id = "#meta"``.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import random
import re
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Executor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import ClientError

from .aws import aws_errors, error_code
from .clock import from_ms, to_ms
from .codec import ItemReader, occurrence_of, snapshot_of
from .errors import (
    ConfigError,
    HexeractError,
    InvalidInput,
    NotReplayable,
    RetryableError,
    ScheduleNotFound,
    UnreadableItem,
)
from .model import (
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    parse_schedule_id,
)
from .shards import MAX_SHARDS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")
log = logging.getLogger("hexeract_scheduler")

DEFAULT_TABLE = "hexeract-schedules"
DEFAULT_SHARDS = 4
META_ID = "#meta"
DUE_INDEX = "due-index"
PAUSED_PREFIX = "p"
CANDIDATES_PER_CLAIM = 4
# The most rows one listing returns (the command line's --limit, the dead-letter function's limit).
MAX_LIST_LIMIT = 1000
# How often a wait under a deadline looks at the time left again.
WAIT_SLICE_SECONDS = 0.25
# How many more index pages a claim reads past entries known to be stuck.
MAX_PAGES_PAST_STUCK = 4
DEAD_LETTER_INDEX = "dead-letter-index"
DEAD_LETTER_PK = "dead"
CRASH_EXHAUSTED = "attempt budget exhausted by a crashed worker"
MAX_ERROR_CHARS = 1000
# Everything but the payload: what listings and inspect read.
_SNAPSHOT_ATTRS = (
    "schedule_id, #st, scheduled_for, attempts, max_attempts, trigger_kind, cron, tz, target, "
    "event_type, last_error, dead_lettered_at, leased_until"
)
# What a refused claim needs to know to tell a lost race from a budget crashed workers used up.
_REFUSAL_ATTRS = "#st, attempts, max_attempts, leased_until, due_shard, due_at"
# Name placeholders: ``status`` is a DynamoDB reserved word.
_ATTRIBUTE_NAMES = {"#st": "status"}
# Removing these takes an item out of the due index, the listing, and fences any in-flight lease.
_LEAVE_ACTIVE = "due_shard, due_at, leased_until, lease_token"
# Dead-lettering (values from ``_dead_values``): out of the due index, into the dead-letter index.
_DEAD_LETTER = f"SET #st = :dead, last_error = :err, dead_lettered_at = :now, dl_pk = :dl REMOVE {_LEAVE_ACTIVE}"


def table_definition(table_name: str = DEFAULT_TABLE) -> dict[str, Any]:
    """CreateTable arguments: the one definition the CLI, tests and template contract share."""

    def gsi(name: str, pk: str, sk: str) -> dict[str, Any]:
        return {
            "IndexName": name,
            "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }

    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": "schedule_id", "AttributeType": "S"},
            {"AttributeName": "due_shard", "AttributeType": "S"},
            {"AttributeName": "due_at", "AttributeType": "N"},
            {"AttributeName": "dl_pk", "AttributeType": "S"},
            {"AttributeName": "dead_lettered_at", "AttributeType": "N"},
        ],
        "KeySchema": [{"AttributeName": "schedule_id", "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            gsi(DUE_INDEX, "due_shard", "due_at"),
            gsi(DEAD_LETTER_INDEX, "dl_pk", "dead_lettered_at"),
        ],
    }


def _names(*expressions: str) -> dict[str, Any]:
    """``ExpressionAttributeNames`` holding exactly the placeholders these expressions use, or no
    such parameter at all: DynamoDB rejects an empty map and an unused name (moto accepts both)."""
    used = {k: v for k, v in _ATTRIBUTE_NAMES.items() if any(re.search(rf"{k}\b", e) for e in expressions)}
    return {"ExpressionAttributeNames": used} if used else {}


def shard_of(schedule_id: uuid.UUID, shards: int) -> int:
    # UUIDv7's low bits are random: a plain modulo spreads evenly.
    return schedule_id.int % shards


def _s(v: str) -> dict[str, Any]:
    return {"S": v}


def _n(v: int) -> dict[str, Any]:
    return {"N": str(int(v))}


def _key(schedule_id: uuid.UUID) -> dict[str, Any]:
    return {"schedule_id": _s(str(schedule_id))}


def _short_error(error: str) -> str:
    error = " ".join(str(error).split()) or "unknown error"
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class DueEntry:
    """One due-index entry: the item's key as stored (it may not be a UUID: the table can hold
    items this package did not write), its partition and its instant."""

    key: str
    due_at_ms: int
    shard: str = ""

    @property
    def schedule_id(self) -> uuid.UUID | None:
        try:
            return uuid.UUID(self.key)
        except ValueError:
            return None


class Listing(list[ScheduleSnapshot]):
    """A listing's rows, plus the items it left out because they cannot be read (key, reason)."""

    def __init__(self, rows: Iterable[ScheduleSnapshot] = (), skipped: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(rows)
        self.skipped: list[tuple[str, str]] = list(skipped)


def _entry(item: dict[str, Any], partition: str, sort_key: str) -> DueEntry | None:
    """An index entry, or None if even its keys are malformed (nothing can address it)."""
    try:
        return DueEntry(item["schedule_id"]["S"], int(item[sort_key]["N"]), partition)
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(slots=True)
class ClaimBatch:
    """What one ``claim_due`` call did.

    ``lost`` counts index entries another worker claimed first (or that the index showed stale);
    ``next_due_ms`` is the soonest not-yet-due instant seen within the look-ahead, if any.
    """

    leased: list[LeasedOccurrence] = field(default_factory=list)
    swept: list[uuid.UUID] = field(default_factory=list)
    # Unreadable items dead-lettered with their reason (key, reason), and those that could not
    # even be dead-lettered (left where they are; the worker logs each key once).
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    lost: int = 0
    next_due_ms: int | None = None
    more_due: bool = False


class DynamoScheduleStore:
    """The schedules table. Thread-safe: one instance may serve a whole worker's thread pool."""

    def __init__(
        self,
        table_name: str = DEFAULT_TABLE,
        *,
        dynamodb: DynamoDBClient | None = None,
        shards: int | None = None,
    ) -> None:
        if dynamodb is None:
            from .aws import ClientFactory

            dynamodb = ClientFactory().dynamodb()
        self.table_name = table_name
        self.client = dynamodb
        if shards is not None:
            _check_shards(shards)
        self._shards = shards
        self._shards_checked = False
        self._lock = threading.Lock()

    # -- table -----------------------------------------------------------------------------

    def create_table(self, shards: int = DEFAULT_SHARDS, *, wait: bool = True) -> tuple[bool, int]:
        """Create the table and indexes if missing (idempotent); returns (created, shard count).

        The shard count recorded at creation wins: asking for another on an existing table keeps
        the recorded one (re-sharding would strand items in shards no worker reads).
        """
        _check_shards(shards)
        created = True
        try:
            self.client.create_table(**table_definition(self.table_name))
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                with aws_errors(f"creating table {self.table_name}"):
                    raise
            created = False
        if wait:
            with aws_errors(f"waiting for table {self.table_name}"):
                self.client.get_waiter("table_exists").wait(
                    TableName=self.table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
                )
        self._shards = None
        recorded = self._ensure_meta(shards)
        self._shards = recorded
        self._shards_checked = True
        return created, recorded

    def _ensure_meta(self, shards: int) -> int:
        with aws_errors(f"recording the shard count in {self.table_name}"):
            try:
                self.client.put_item(
                    TableName=self.table_name,
                    Item={"schedule_id": _s(META_ID), "shards": _n(shards)},
                    ConditionExpression="attribute_not_exists(schedule_id)",
                )
                return shards
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
            got = self.client.get_item(TableName=self.table_name, Key=_key_raw(META_ID), ConsistentRead=True)
        return int(got["Item"]["shards"]["N"])

    @property
    def shards(self) -> int:
        """The table's shard count: read once from ``#meta`` (recorded with the default if absent).

        A store built with an explicit count fails fast if the table recorded another one.
        """
        if self._shards_checked and self._shards is not None:
            return self._shards
        with self._lock:
            if not self._shards_checked:
                wanted = self._shards
                recorded = self._ensure_meta(wanted or DEFAULT_SHARDS)
                if wanted is not None and wanted != recorded:
                    raise ConfigError(
                        f"table {self.table_name} was created with {recorded} shards, not {wanted}: "
                        "set the shard count to the table's"
                    )
                self._shards = recorded
                self._shards_checked = True
        assert self._shards is not None
        return self._shards

    # -- writes by users -------------------------------------------------------------------

    def insert(self, message: ScheduledMessage, now: datetime) -> ScheduleSnapshot:
        """Store a new pending schedule; its first occurrence is due at the trigger's first instant."""
        first = message.trigger.first_due(now)
        shard = str(shard_of(message.schedule_id, self.shards))
        item: dict[str, Any] = {
            "schedule_id": _s(str(message.schedule_id)),
            "status": _s(ScheduleStatus.PENDING.value),
            "trigger_kind": _s("cron" if message.trigger.cron else "delay"),
            "target": _s(str(message.target)),
            "event_type": _s(message.event_type),
            "payload": {"B": message.payload},
            "scheduled_for": _n(to_ms(first)),
            "due_shard": _s(shard),
            "due_at": _n(to_ms(first)),
            "attempts": _n(0),
            "max_attempts": _n(message.max_attempts),
            "created_at": _n(to_ms(now)),
        }
        if message.trigger.cron:
            item["cron"] = _s(message.trigger.cron.expression)
            if message.trigger.cron.timezone:
                item["tz"] = _s(message.trigger.cron.timezone)
        with aws_errors(f"inserting schedule {message.schedule_id}"):
            try:
                self.client.put_item(
                    TableName=self.table_name, Item=item, ConditionExpression="attribute_not_exists(schedule_id)"
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    raise InvalidInput(f"schedule {message.schedule_id} already exists") from None
                raise
        return snapshot_of(item)

    def inspect(self, schedule_id: uuid.UUID | str) -> ScheduleSnapshot | None:
        """The schedule as stored, or None if there is no such schedule."""
        sid = parse_schedule_id(schedule_id)
        with aws_errors(f"reading schedule {sid}"):
            got = self.client.get_item(
                TableName=self.table_name,
                Key=_key(sid),
                ConsistentRead=True,
                ProjectionExpression=_SNAPSHOT_ATTRS,
                **_names(_SNAPSHOT_ATTRS),
            )
        return snapshot_of(got["Item"]) if "Item" in got else None

    def cancel(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending or paused → cancelled (True). A terminal schedule is left alone (False)."""
        sid = parse_schedule_id(schedule_id)
        return self._lifecycle(
            sid,
            f"SET #st = :cancelled REMOVE {_LEAVE_ACTIVE}",
            "#st IN (:pending, :paused)",
            {":cancelled": _s("cancelled"), ":pending": _s("pending"), ":paused": _s("paused")},
            f"cancelling schedule {sid}",
        )

    def pause(self, schedule_id: uuid.UUID | str) -> bool:
        """Pending → paused (True); anything else is left alone (False).

        Pausing drops the lease token, so an in-flight dispatch's ack is fenced off: that
        occurrence is delivered again (same occurrence id) after resume, never lost. The item moves
        to the due index's paused partition, which workers never query.
        """
        sid = parse_schedule_id(schedule_id)
        return self._lifecycle(
            sid,
            "SET #st = :paused, due_shard = :parked, due_at = scheduled_for REMOVE leased_until, lease_token",
            "#st = :pending",
            {":paused": _s("paused"), ":pending": _s("pending"), ":parked": _s(self._paused_shard(sid))},
            f"pausing schedule {sid}",
        )

    def _paused_shard(self, sid: uuid.UUID) -> str:
        return f"{PAUSED_PREFIX}{shard_of(sid, self.shards)}"

    def resume(self, schedule_id: uuid.UUID | str, now: datetime) -> bool:
        """Paused → pending (True); not paused: no-op (False).

        A cron schedule whose stored instant passed while paused realigns to the next strictly
        future instant (no catch-up) with a fresh attempt budget; a one-shot keeps its instant.
        """
        sid = parse_schedule_id(schedule_id)
        with aws_errors(f"resuming schedule {sid}"):
            got = self.client.get_item(TableName=self.table_name, Key=_key(sid), ConsistentRead=True)
        item = got.get("Item")
        if item is None:
            raise ScheduleNotFound(sid)
        reader = ItemReader(item)
        if reader.status() is not ScheduleStatus.PAUSED:
            return False
        stored = reader.integer("scheduled_for")
        assert stored is not None
        trigger = reader.trigger()
        update = "SET #st = :pending, due_shard = :shard, due_at = :due, scheduled_for = :due"
        values: dict[str, Any] = {
            ":pending": _s("pending"),
            ":paused": _s("paused"),
            ":shard": _s(str(shard_of(sid, self.shards))),
            ":old": _n(stored),
        }
        due = stored
        if trigger.is_recurring and stored < to_ms(now):
            nxt = trigger.next_after(now)
            if nxt is None:  # no future instant: nothing left to fire
                return self._lifecycle(
                    sid,
                    f"SET #st = :delivered REMOVE {_LEAVE_ACTIVE}",
                    "#st = :paused AND scheduled_for = :old",
                    {":delivered": _s("delivered"), ":paused": _s("paused"), ":old": _n(stored)},
                    f"resuming schedule {sid}",
                )
            due = to_ms(nxt)
            update += ", attempts = :zero REMOVE last_error"
            values[":zero"] = _n(0)
        values[":due"] = _n(due)
        return self._lifecycle(
            sid, update, "#st = :paused AND scheduled_for = :old", values, f"resuming schedule {sid}"
        )

    def replay(self, schedule_id: uuid.UUID | str, now: datetime) -> None:
        """Dead-lettered → pending, attempts 0, error cleared, due now, same occurrence.

        Anything else raises NotReplayable and changes nothing.
        """
        sid = parse_schedule_id(schedule_id)
        shard = str(shard_of(sid, self.shards))
        changed = self._lifecycle(
            sid,
            "SET #st = :pending, attempts = :zero, due_shard = :shard, due_at = :now "
            "REMOVE last_error, dead_lettered_at, dl_pk, leased_until, lease_token",
            "#st = :dead",
            {
                ":pending": _s("pending"),
                ":dead": _s("dead_lettered"),
                ":zero": _n(0),
                ":shard": _s(shard),
                ":now": _n(to_ms(now)),
            },
            f"replaying schedule {sid}",
            return_old=True,
        )
        if changed is not True:
            raise NotReplayable(sid, ScheduleStatus(changed).label)

    def _lifecycle(
        self,
        sid: uuid.UUID,
        update: str,
        condition: str,
        values: dict[str, Any],
        what: str,
        *,
        return_old: bool = False,
    ) -> Any:
        """A conditional update on an existing schedule: True if applied, else False (or, with
        ``return_old``, the status that refused it). Unknown id → ScheduleNotFound."""
        result = self._update(sid, update, f"attribute_exists(schedule_id) AND ({condition})", values, what, old="#st")
        if result.applied:
            return True
        if result.item is None:
            raise ScheduleNotFound(sid)
        return result.item["status"]["S"] if return_old else False

    # -- listings --------------------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> Listing:
        """Pending and paused schedules, soonest due first (the instant each is next attempted: its
        scheduled instant, or the end of its lease or retry delay): one Query per due-index
        partition, merged, never a Scan. Unreadable items are left out and reported in
        ``skipped``."""
        _check_limit(limit)
        partitions = [str(s) for s in range(self.shards)] + [f"{PAUSED_PREFIX}{s}" for s in range(self.shards)]

        def entries(window: int) -> list[DueEntry]:
            per_partition = [self._query_keys(DUE_INDEX, "due_shard", p, window, forward=True) for p in partitions]
            merged = heapq.merge(*per_partition, key=lambda e: (e.due_at_ms, e.key))
            return list(itertools.islice(merged, window))  # read only the items that can be listed

        rows = self._listing(entries, limit, (ScheduleStatus.PENDING, ScheduleStatus.PAUSED))
        return Listing(sorted(rows, key=lambda s: (s.next_attempt, str(s.schedule_id))), rows.skipped)

    def list_dead_letter(self, limit: int = 50) -> Listing:
        """Dead-lettered schedules, most recently dead-lettered first (a Query, never a Scan).
        Unreadable items are left out and reported in ``skipped``."""
        _check_limit(limit)
        rows = self._listing(
            lambda window: self._query_keys(DEAD_LETTER_INDEX, "dl_pk", DEAD_LETTER_PK, window, forward=False),
            limit,
            (ScheduleStatus.DEAD_LETTERED,),
        )
        ordered = sorted(rows, key=lambda s: (s.dead_lettered_at or s.scheduled_for, str(s.schedule_id)), reverse=True)
        return Listing(ordered, rows.skipped)

    def _listing(
        self, entries: Callable[[int], list[DueEntry]], limit: int, statuses: tuple[ScheduleStatus, ...]
    ) -> Listing:
        """Index keys in order → items read consistently → only those still in ``statuses``.

        The index is eventually consistent and items change under it (a worker delivers one while
        we list), so an entry can be gone by the time it is read: widen the window and read again
        until ``limit`` rows hold or the index has no more. An item that cannot be read is left
        out and reported (key and reason), never allowed to fail the whole listing.
        """
        window = limit
        while True:
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
        sort_key = {DEAD_LETTER_INDEX: "dead_lettered_at", DUE_INDEX: "due_at"}[index]
        out: list[DueEntry] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": "#pk = :v",
            "ExpressionAttributeNames": {"#pk": pk},
            "ExpressionAttributeValues": {":v": _s(value)},
            "ScanIndexForward": forward,
        }
        with aws_errors(f"listing {index}"):
            while len(out) < limit:
                page = self.client.query(Limit=limit - len(out), **kwargs)
                entries = (_entry(i, value, sort_key) for i in page.get("Items", []))
                out += [e for e in entries if e is not None]
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def _batch_get(self, keys_in_order: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The items with these keys (raw strings, as the index holds them), read consistently."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys_in_order), 100):
            keys: list[dict[str, Any]] = [_key_raw(k) for k in dict.fromkeys(keys_in_order[start : start + 100])]
            request: dict[str, Any] = {
                self.table_name: {
                    "Keys": keys,
                    "ConsistentRead": True,
                    "ProjectionExpression": _SNAPSHOT_ATTRS,
                    **_names(_SNAPSHOT_ATTRS),
                }
            }
            with aws_errors("reading schedules"):
                for _ in range(10):
                    resp = self.client.batch_get_item(RequestItems=request)
                    for item in resp.get("Responses", {}).get(self.table_name, []):
                        found[item["schedule_id"]["S"]] = item
                    request = resp.get("UnprocessedKeys") or {}
                    if not request:
                        break
        return found

    # -- the worker's path -----------------------------------------------------------------

    def find_due(
        self,
        now: datetime,
        limit: int,
        *,
        horizon: timedelta = timedelta(0),
        shards: Iterable[int] | None = None,
        executor: Executor | None = None,
        skip: Collection[str] = (),
        time_left: Callable[[], float | None] | None = None,
    ) -> list[DueEntry]:
        """Index entries due by ``now + horizon``, soonest first across the given shards.

        The index is eventually consistent and KEYS_ONLY: an entry is a hint, and the claim's
        condition is the truth. An entry whose keys are malformed is dropped (nothing could
        address it); one whose key is not a UUID is returned for the worker to quarantine.
        Entries whose key is in ``skip`` (items known to be stuck) are read past, a few pages at
        most, so they cannot hide the claimable entries behind them.
        """
        until = to_ms(now + horizon)
        shard_list = list(range(self.shards)) if shards is None else list(shards)

        def one(shard: int) -> list[DueEntry]:
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": DUE_INDEX,
                "KeyConditionExpression": "due_shard = :s AND due_at <= :t",
                "ExpressionAttributeValues": {":s": _s(str(shard)), ":t": _n(until)},
                "Limit": limit,
            }
            out: list[DueEntry] = []
            with aws_errors(f"querying {DUE_INDEX}"):
                for _ in range(MAX_PAGES_PAST_STUCK + 1):
                    page = self.client.query(**kwargs)
                    entries = (_entry(i, str(shard), "due_at") for i in page.get("Items", []))
                    out += [e for e in entries if e is not None and e.key not in skip]
                    if len(out) >= limit or "LastEvaluatedKey" not in page or not skip:
                        break
                    kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            return out[:limit]

        late = no_answer(f"querying {DUE_INDEX}")
        results = map_concurrently(executor, one, shard_list, time_left=time_left, late=late)
        return list(heapq.merge(*results, key=lambda e: e.due_at_ms))

    def claim(self, schedule_id: uuid.UUID, now: datetime, lease: timedelta) -> LeasedOccurrence | Refusal:
        """Claim one occurrence: in one conditional write, check it is pending, due, unleased and
        within budget; increment ``attempts``; stamp a fresh lease token and ``leased_until``.

        ``due_at`` moves to ``leased_until``: if this worker dies, the item is due again exactly
        when the lease expires, and that re-claim counts against the budget. A claimed item that
        cannot be read (a missing payload, a stored target that no longer parses) is dead-lettered
        at once with the reason, under the lease just taken, and reported as an unreadable refusal.
        """
        now_ms = to_ms(now)
        until = from_ms(to_ms(now + lease))
        token = uuid.uuid4().hex
        result = self._update(
            schedule_id,
            "SET attempts = attempts + :one, leased_until = :until, due_at = :until, lease_token = :tok",
            # attribute_type first: comparing a mistyped attempts fails the condition on DynamoDB,
            # but makes some emulators (moto) answer 500 forever.
            "#st = :pending AND due_at <= :now AND attribute_type(attempts, :num) "
            "AND attribute_type(max_attempts, :num) AND attempts < max_attempts "
            "AND (attribute_not_exists(leased_until) OR leased_until <= :now)",
            {
                ":num": _s("N"),
                ":one": _n(1),
                ":until": _n(to_ms(until)),
                ":tok": _s(token),
                ":pending": _s("pending"),
                ":now": _n(now_ms),
            },
            f"claiming schedule {schedule_id}",
            old=_REFUSAL_ATTRS,
            return_new=True,
        )
        if not result.applied:
            return _refusal(str(schedule_id), result.item, now_ms)
        assert result.item is not None
        try:
            return occurrence_of(result.item, lease_token=token, leased_until=until)
        except UnreadableItem as bad:
            quarantined = self._fenced(
                schedule_id,
                _DEAD_LETTER,
                "lease_token = :tok",
                _dead_values(bad.reason, now, token=token),
                "quarantining",
            )
            return Refusal(ClaimRefusal.UNREADABLE if quarantined else ClaimRefusal.LOST, bad.reason)

    def claim_due(
        self,
        now: datetime,
        lease: timedelta,
        limit: int,
        *,
        horizon: timedelta = timedelta(0),
        shards: Iterable[int] | None = None,
        executor: Executor | None = None,
        rng: random.Random | None = None,
        skip: Collection[str] = (),
        time_left: Callable[[], float | None] | None = None,
    ) -> ClaimBatch:
        """Find due entries and claim up to ``limit`` of them concurrently.

        On the way, entries whose budget crashed workers exhausted are swept to dead-letter, and
        unreadable items are quarantined (dead-lettered with the reason), so neither can sit at the
        head of a shard and starve the entries behind it. With ``time_left`` (see
        ``map_concurrently``), no call is awaited past the end of the time left: a query that has
        not answered fails the batch as a RetryableError, a claim that has not answered is left for
        the next cycle (if it lands later, its lease expires unsent and the occurrence is claimed
        again).
        """

        shard_list = list(range(self.shards)) if shards is None else list(shards)
        # Keys-only index entries are tiny: reading a few batches' worth costs no more read units
        # than one, and gives racing workers room to pick different items (below).
        entries = self.find_due(
            now,
            limit * CANDIDATES_PER_CLAIM,
            horizon=horizon,
            shards=shard_list,
            executor=executor,
            skip=skip,
            time_left=time_left,
        )
        now_ms = to_ms(now)
        due = [e for e in entries if e.due_at_ms <= now_ms]
        later = [e.due_at_ms for e in entries if e.due_at_ms > now_ms]
        batch = ClaimBatch(next_due_ms=min(later) if later else None, more_due=len(due) >= limit)
        if len(due) > limit:
            # Every worker sees the same head of the index; a random pick among the due entries
            # (all due now) keeps racing workers from spending their claims on the same items.
            due = (rng or random).sample(due, limit)
        # An error on one entry must not drop the others: the claims that landed are returned
        # (else they would sit leased, unsent, until the lease expires, each losing an attempt),
        # and the failed entry stays due. Only a batch that got nothing re-raises, so the worker
        # backs off; otherwise the error is logged and the next cycle tries that entry again.
        errors: list[HexeractError] = []

        def claim_one(e: DueEntry) -> LeasedOccurrence | Refusal | None:
            try:
                sid = e.schedule_id
                if sid is None:
                    return self._quarantine_entry(e, "unreadable item: schedule_id is not a UUID", now)
                outcome = self.claim(sid, now, lease)
                if isinstance(outcome, Refusal) and outcome.kind is ClaimRefusal.EXHAUSTED:
                    swept = self.sweep_exhausted(sid, now)
                    return outcome if swept else Refusal(ClaimRefusal.LOST)
                if isinstance(outcome, Refusal) and outcome.kind is ClaimRefusal.STUCK:
                    return self._quarantine_entry(e, outcome.reason, now)
                return outcome
            except HexeractError as exc:
                errors.append(exc)
                return None

        def late(e: DueEntry) -> None:
            errors.append(RetryableError(f"claiming {e.key}: no answer within the time left"))

        outcomes = map_concurrently(executor, claim_one, due, time_left=time_left, late=late)
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
        if errors:
            if not batch.leased and not batch.swept and not batch.quarantined:
                raise errors[0]
            for error in errors:
                log.warning("claim left for the next cycle: %s", error)
        return batch

    def _quarantine_entry(self, entry: DueEntry, reason: str, now: datetime) -> Refusal:
        """Dead-letter an unreadable item that no claim can take, addressed by its raw key, if it
        still sits where the index showed it (same partition, same instant, no live lease).

        Refused (it moved meanwhile, or the item is not even addressable) it is reported STUCK and
        left alone: the worker logs its key once."""
        condition = (
            "due_shard = :shard AND due_at = :due AND (attribute_not_exists(leased_until) OR NOT (leased_until > :now))"
        )
        values = _dead_values(reason, now) | {":shard": _s(entry.shard), ":due": _n(entry.due_at_ms)}
        with aws_errors(f"quarantining item {entry.key!r}"):
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=_key_raw(entry.key),
                    UpdateExpression=_DEAD_LETTER,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=values,
                    **_names(_DEAD_LETTER, condition),
                )
            except ClientError as exc:
                if error_code(exc) not in ("ConditionalCheckFailedException", "ValidationException"):
                    raise
                return Refusal(ClaimRefusal.STUCK, reason)
        return Refusal(ClaimRefusal.UNREADABLE, reason)

    def sweep_exhausted(self, schedule_id: uuid.UUID, now: datetime) -> bool:
        """Dead-letter a pending schedule whose budget crashed workers used up (lease expired)."""
        return self._fenced(
            schedule_id,
            _DEAD_LETTER,
            "#st = :pending AND attempts >= max_attempts "
            "AND (attribute_not_exists(leased_until) OR leased_until <= :now)",
            _dead_values(CRASH_EXHAUSTED, now) | {":pending": _s("pending")},
            "sweeping",
        )

    # -- fenced acks -----------------------------------------------------------------------
    # Each applies only if the item still carries this worker's lease token. False means the
    # lease was lost (expired and re-claimed, or the schedule was paused/cancelled meanwhile):
    # another worker owns the occurrence now, so the ack must change nothing. It is not an error.

    def mark_delivered(self, occ: LeasedOccurrence) -> bool:
        return self._fenced(
            occ.schedule_id,
            f"SET #st = :delivered REMOVE {_LEAVE_ACTIVE}",
            "lease_token = :tok",
            {":delivered": _s("delivered"), ":tok": _s(occ.lease_token)},
            "acking delivery of",
        )

    def reschedule(self, occ: LeasedOccurrence, next_at: datetime) -> bool:
        """A recurring schedule's occurrence succeeded: the next one is due at ``next_at``, with a
        fresh attempt budget."""
        ms = to_ms(next_at)
        return self._fenced(
            occ.schedule_id,
            "SET scheduled_for = :next, due_at = :next, attempts = :zero REMOVE leased_until, lease_token, last_error",
            "lease_token = :tok",
            {":next": _n(ms), ":zero": _n(0), ":tok": _s(occ.lease_token)},
            "rescheduling",
        )

    def mark_failed(self, occ: LeasedOccurrence, error: str, retry_at: datetime) -> bool:
        """A failed attempt with budget left: due again at ``retry_at``; ``attempts`` untouched
        (the claim counted it)."""
        ms = to_ms(retry_at)
        return self._fenced(
            occ.schedule_id,
            "SET last_error = :err, leased_until = :retry, due_at = :retry REMOVE lease_token",
            "lease_token = :tok",
            {":err": _s(_short_error(error)), ":retry": _n(ms), ":tok": _s(occ.lease_token)},
            "recording a failure of",
        )

    def mark_dead_lettered(self, occ: LeasedOccurrence, error: str, now: datetime) -> bool:
        """The last attempt failed: dead-lettered, never claimed again until replayed."""
        return self._fenced(
            occ.schedule_id,
            _DEAD_LETTER,
            "lease_token = :tok",
            _dead_values(error, now, token=occ.lease_token),
            "dead-lettering",
        )

    def _fenced(self, sid: uuid.UUID, update: str, condition: str, values: dict[str, Any], what: str) -> bool:
        return self._update(sid, update, condition, values, f"{what} schedule {sid}").applied

    def _update(
        self,
        sid: uuid.UUID,
        update: str,
        condition: str,
        values: dict[str, Any],
        what: str,
        *,
        old: str | None = None,
        return_new: bool = False,
    ) -> UpdateResult:
        """The one conditional UpdateItem every state change goes through.

        ``ExpressionAttributeNames`` is sent only when an expression uses a name placeholder:
        DynamoDB rejects an empty map (moto does not). With ``old`` (a projection), a refused
        update also returns the item as it stands, so the caller can tell why it was refused:
        DynamoDB hands back the item that failed the condition (``ALL_OLD``); an endpoint that
        does not (dynalite) gets a consistent read instead, which may be newer than the refusal —
        every decision taken from it is itself a conditional write, so that is safe.
        """
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": _key(sid),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
            **_names(update, condition),
        }
        if return_new:
            request["ReturnValues"] = "ALL_NEW"
        if old is not None:
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        with aws_errors(what):
            try:
                resp = self.client.update_item(**request)
                return UpdateResult(True, resp.get("Attributes") if return_new else None)
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                if old is None:
                    return UpdateResult(False, None)
                item: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
                if item is None:
                    got = self.client.get_item(
                        TableName=self.table_name,
                        Key=_key(sid),
                        ConsistentRead=True,
                        ProjectionExpression=old,
                        **_names(old),
                    )
                    item = got.get("Item")
                return UpdateResult(False, item or None)


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """A conditional update's outcome: ``item`` is the new item (applied, if asked for) or the item
    as it stood (refused, if asked for; None when there is no such item)."""

    applied: bool
    item: dict[str, Any] | None


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


def _refusal(key: str, old: dict[str, Any] | None, now_ms: int) -> Refusal:
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


def _dead_values(reason: str, now: datetime, *, token: str | None = None) -> dict[str, Any]:
    """The values of ``_DEAD_LETTER`` (and of a fence on ``token``)."""
    values = {
        ":dead": _s(ScheduleStatus.DEAD_LETTERED.value),
        ":err": _s(_short_error(reason)),
        ":now": _n(to_ms(now)),
        ":dl": _s(DEAD_LETTER_PK),
    }
    if token is not None:
        values[":tok"] = _s(token)
    return values


def map_concurrently(
    executor: Executor | None,
    fn: Callable[[Any], T],
    items: Sequence[Any],
    *,
    time_left: Callable[[], float | None] | None = None,
    late: Callable[[Any], T] | None = None,
) -> list[T]:
    """``fn`` over ``items`` on the pool, results in order (inline for 0 or 1 item, no deadline).

    With ``time_left`` (seconds left, or None for no limit yet, asked again every quarter second
    so a deadline set meanwhile, e.g. by a stop, applies), an item whose call has not returned
    when no time is left gives ``late(item)`` (which may raise); its call is left to finish on its
    own: the caller's deadline wins over a hung request.
    """
    if executor is None or (time_left is None and len(items) <= 1):
        return [fn(i) for i in items]
    if time_left is None:
        return list(executor.map(fn, items))
    futures = [executor.submit(fn, i) for i in items]
    pending = set(futures)
    while pending:
        left = time_left()
        if left is not None and left <= 0:
            break
        _, pending = wait(pending, timeout=WAIT_SLICE_SECONDS if left is None else min(left, WAIT_SLICE_SECONDS))
    out: list[T] = []
    for item, future in zip(items, futures, strict=True):
        if future.done():
            out.append(future.result())
        else:
            future.cancel()
            assert late is not None, "a deadline needs a late() result"
            out.append(late(item))
    return out


def _key_raw(value: str) -> dict[str, Any]:
    return {"schedule_id": _s(value)}


def no_answer(what: str) -> Callable[[Any], Any]:
    def late(_: Any) -> Any:
        raise RetryableError(f"{what}: no answer within the time left")

    return late


def _check_shards(shards: int) -> None:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ConfigError(f"shard count must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
