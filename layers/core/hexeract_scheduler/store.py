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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import ClientError

from .aws import aws_errors, error_code
from .clock import from_ms, to_ms
from .cron import CronSchedule
from .errors import ConfigError, HexeractError, InvalidInput, NotReplayable, ScheduleNotFound
from .model import (
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    Target,
    Trigger,
    parse_schedule_id,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")
log = logging.getLogger("hexeract_scheduler")

DEFAULT_TABLE = "hexeract-schedules"
DEFAULT_SHARDS = 4
MAX_SHARDS = 256
META_ID = "#meta"
DUE_INDEX = "due-index"
PAUSED_PREFIX = "p"
CANDIDATES_PER_CLAIM = 4
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
_REFUSAL_ATTRS = "#st, attempts, max_attempts, leased_until"
# Name placeholders: ``status`` is a DynamoDB reserved word.
_ATTRIBUTE_NAMES = {"#st": "status"}
# Removing these takes an item out of the due index, the listing, and fences any in-flight lease.
_LEAVE_ACTIVE = "due_shard, due_at, leased_until, lease_token"


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


# Parsing a stored target or cron (regexes, a croniter evaluation) is on every claim's path; both
# are immutable, so one parse per distinct value is enough.
_target = lru_cache(maxsize=4096)(Target.parse)


@lru_cache(maxsize=4096)
def _cron_trigger(expression: str, tz: str | None) -> Trigger:
    return Trigger(cron=CronSchedule(expression, tz))


def _trigger_of(item: dict[str, Any]) -> Trigger:
    if item["trigger_kind"]["S"] == "cron":
        return _cron_trigger(item["cron"]["S"], item.get("tz", {}).get("S"))
    return Trigger(at=from_ms(int(item["scheduled_for"]["N"])))


def _trigger_label(item: dict[str, Any]) -> str:
    if item["trigger_kind"]["S"] == "cron":
        tz = item.get("tz", {}).get("S")
        return f"cron:{item['cron']['S']}" + (f" tz={tz}" if tz else "")
    return "delay"


def _opt_ms(item: dict[str, Any], name: str) -> datetime | None:
    return from_ms(int(item[name]["N"])) if name in item else None


def snapshot_of(item: dict[str, Any]) -> ScheduleSnapshot:
    return ScheduleSnapshot(
        schedule_id=uuid.UUID(item["schedule_id"]["S"]),
        status=ScheduleStatus(item["status"]["S"]),
        scheduled_for=from_ms(int(item["scheduled_for"]["N"])),
        attempts=int(item["attempts"]["N"]),
        max_attempts=int(item["max_attempts"]["N"]),
        trigger=_trigger_label(item),
        target=item["target"]["S"],
        event_type=item["event_type"]["S"],
        last_error=item.get("last_error", {}).get("S"),
        dead_lettered_at=_opt_ms(item, "dead_lettered_at"),
        leased_until=_opt_ms(item, "leased_until"),
    )


@dataclass(frozen=True, slots=True)
class DueEntry:
    schedule_id: uuid.UUID
    due_at_ms: int


@dataclass(slots=True)
class ClaimBatch:
    """What one ``claim_due`` call did.

    ``lost`` counts index entries another worker claimed first (or that the index showed stale);
    ``next_due_ms`` is the soonest not-yet-due instant seen within the look-ahead, if any.
    """

    leased: list[LeasedOccurrence] = field(default_factory=list)
    swept: list[uuid.UUID] = field(default_factory=list)
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
        if item["status"]["S"] != ScheduleStatus.PAUSED.value:
            return False
        stored = int(item["scheduled_for"]["N"])
        trigger = _trigger_of(item)
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

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot]:
        """Pending and paused schedules, soonest due first (the instant each is next attempted: its
        scheduled instant, or the end of its lease or retry delay): one Query per due-index
        partition, merged, never a Scan."""
        _check_limit(limit)
        partitions = [str(s) for s in range(self.shards)] + [f"{PAUSED_PREFIX}{s}" for s in range(self.shards)]

        def entries(window: int) -> list[DueEntry]:
            per_partition = [self._query_keys(DUE_INDEX, "due_shard", p, window, forward=True) for p in partitions]
            merged = heapq.merge(*per_partition, key=lambda e: (e.due_at_ms, str(e.schedule_id)))
            return list(itertools.islice(merged, window))  # read only the items that can be listed

        rows = self._listing(entries, limit, (ScheduleStatus.PENDING, ScheduleStatus.PAUSED))
        return sorted(rows, key=lambda s: (s.next_attempt, str(s.schedule_id)))

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot]:
        """Dead-lettered schedules, most recently dead-lettered first (a Query, never a Scan)."""
        _check_limit(limit)
        rows = self._listing(
            lambda window: self._query_keys(DEAD_LETTER_INDEX, "dl_pk", DEAD_LETTER_PK, window, forward=False),
            limit,
            (ScheduleStatus.DEAD_LETTERED,),
        )
        return sorted(rows, key=lambda s: (s.dead_lettered_at or s.scheduled_for, str(s.schedule_id)), reverse=True)

    def _listing(
        self, entries: Callable[[int], list[DueEntry]], limit: int, statuses: tuple[ScheduleStatus, ...]
    ) -> list[ScheduleSnapshot]:
        """Index keys in order → items read consistently → only those still in ``statuses``.

        The index is eventually consistent and items change under it (a worker delivers one while
        we list), so an entry can be gone by the time it is read: widen the window and read again
        until ``limit`` rows hold or the index has no more.
        """
        window = limit
        while True:
            found = entries(window)
            items = self._batch_get([e.schedule_id for e in found])
            rows = [snapshot_of(items[e.schedule_id]) for e in found if e.schedule_id in items]
            rows = [r for r in rows if r.status in statuses][:limit]
            if len(rows) >= limit or len(found) < window or window >= limit * 8:
                return rows
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
                out += [
                    DueEntry(uuid.UUID(i["schedule_id"]["S"]), int(i[sort_key]["N"])) for i in page.get("Items", [])
                ]
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def _batch_get(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
        found: dict[uuid.UUID, dict[str, Any]] = {}
        for start in range(0, len(ids), 100):
            keys: list[dict[str, Any]] = [_key(i) for i in dict.fromkeys(ids[start : start + 100])]
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
                        found[uuid.UUID(item["schedule_id"]["S"])] = item
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
    ) -> list[DueEntry]:
        """Index entries due by ``now + horizon``, soonest first across the given shards.

        The index is eventually consistent and KEYS_ONLY: an entry is a hint, and the claim's
        condition is the truth.
        """
        until = to_ms(now + horizon)
        shard_list = list(range(self.shards)) if shards is None else list(shards)

        def one(shard: int) -> list[DueEntry]:
            with aws_errors(f"querying {DUE_INDEX}"):
                page = self.client.query(
                    TableName=self.table_name,
                    IndexName=DUE_INDEX,
                    KeyConditionExpression="due_shard = :s AND due_at <= :t",
                    ExpressionAttributeValues={":s": _s(str(shard)), ":t": _n(until)},
                    Limit=limit,
                )
            return [DueEntry(uuid.UUID(i["schedule_id"]["S"]), int(i["due_at"]["N"])) for i in page.get("Items", [])]

        results = map_concurrently(executor, one, shard_list)
        return list(heapq.merge(*results, key=lambda e: e.due_at_ms))

    def claim(self, schedule_id: uuid.UUID, now: datetime, lease: timedelta) -> LeasedOccurrence | ClaimRefusal:
        """Claim one occurrence: in one conditional write, check it is pending, due, unleased and
        within budget; increment ``attempts``; stamp a fresh lease token and ``leased_until``.

        ``due_at`` moves to ``leased_until``: if this worker dies, the item is due again exactly
        when the lease expires, and that re-claim counts against the budget.
        """
        now_ms = to_ms(now)
        until = now + lease
        token = uuid.uuid4().hex
        result = self._update(
            schedule_id,
            "SET attempts = attempts + :one, leased_until = :until, due_at = :until, lease_token = :tok",
            "#st = :pending AND due_at <= :now AND attempts < max_attempts "
            "AND (attribute_not_exists(leased_until) OR leased_until <= :now)",
            {
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
            return _refusal(result.item, now_ms)
        item = result.item
        assert item is not None
        return LeasedOccurrence(
            schedule_id=schedule_id,
            scheduled_for=from_ms(int(item["scheduled_for"]["N"])),
            attempt=int(item["attempts"]["N"]),
            max_attempts=int(item["max_attempts"]["N"]),
            lease_token=token,
            leased_until=from_ms(to_ms(until)),
            target=_target(item["target"]["S"]),
            trigger=_trigger_of(item),
            payload=bytes(item["payload"]["B"]),
            event_type=item["event_type"]["S"],
        )

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
    ) -> ClaimBatch:
        """Find due entries and claim up to ``limit`` of them concurrently.

        Entries whose budget a crashed worker exhausted are swept to dead-letter on the way.
        """
        shard_list = list(range(self.shards)) if shards is None else list(shards)
        # Keys-only index entries are tiny: reading a few batches' worth costs no more read units
        # than one, and gives racing workers room to pick different items (below).
        entries = self.find_due(
            now, limit * CANDIDATES_PER_CLAIM, horizon=horizon, shards=shard_list, executor=executor
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

        def claim_one(e: DueEntry) -> tuple[DueEntry, LeasedOccurrence | ClaimRefusal | None]:
            try:
                return e, self.claim(e.schedule_id, now, lease)
            except HexeractError as exc:
                errors.append(exc)
                return e, None

        for entry, outcome in map_concurrently(executor, claim_one, due):
            if isinstance(outcome, LeasedOccurrence):
                batch.leased.append(outcome)
            elif outcome is ClaimRefusal.EXHAUSTED:
                try:
                    swept = self.sweep_exhausted(entry.schedule_id, now)
                except HexeractError as exc:
                    errors.append(exc)
                    continue
                if swept:
                    batch.swept.append(entry.schedule_id)
                else:
                    batch.lost += 1
            elif outcome is not None:
                batch.lost += 1
        if errors:
            if not batch.leased and not batch.swept:
                raise errors[0]
            for error in errors:
                log.warning("claim left for the next cycle: %s", error)
        return batch

    def sweep_exhausted(self, schedule_id: uuid.UUID, now: datetime) -> bool:
        """Dead-letter a pending schedule whose budget crashed workers used up (lease expired)."""
        now_ms = to_ms(now)
        return self._fenced(
            schedule_id,
            f"SET #st = :dead, last_error = :err, dead_lettered_at = :now, dl_pk = :dl REMOVE {_LEAVE_ACTIVE}",
            "#st = :pending AND attempts >= max_attempts "
            "AND (attribute_not_exists(leased_until) OR leased_until <= :now)",
            {
                ":dead": _s("dead_lettered"),
                ":err": _s(CRASH_EXHAUSTED),
                ":now": _n(now_ms),
                ":dl": _s(DEAD_LETTER_PK),
                ":pending": _s("pending"),
            },
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
            f"SET #st = :dead, last_error = :err, dead_lettered_at = :now, dl_pk = :dl REMOVE {_LEAVE_ACTIVE}",
            "lease_token = :tok",
            {
                ":dead": _s("dead_lettered"),
                ":err": _s(_short_error(error)),
                ":now": _n(to_ms(now)),
                ":dl": _s(DEAD_LETTER_PK),
                ":tok": _s(occ.lease_token),
            },
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


def _refusal(old: dict[str, Any] | None, now_ms: int) -> ClaimRefusal:
    if not old or old.get("status", {}).get("S") != "pending":
        return ClaimRefusal.LOST
    leased_until = int(old["leased_until"]["N"]) if "leased_until" in old else None
    lease_free = leased_until is None or leased_until <= now_ms
    if int(old["attempts"]["N"]) >= int(old["max_attempts"]["N"]) and lease_free:
        return ClaimRefusal.EXHAUSTED
    return ClaimRefusal.LOST


def map_concurrently(executor: Executor | None, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    """``fn`` over ``items`` on the pool, results in order (inline for 0 or 1 item)."""
    if executor is None or len(items) <= 1:
        return [fn(i) for i in items]
    return list(executor.map(fn, items))


def _key_raw(value: str) -> dict[str, Any]:
    return {"schedule_id": _s(value)}


def _check_shards(shards: int) -> None:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ConfigError(f"shard count must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
