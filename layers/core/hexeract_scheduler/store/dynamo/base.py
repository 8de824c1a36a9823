"""The table, its shard count, and the one conditional update every state change goes through."""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hexeract_scheduler.aws.translate import aws_errors, error_code
from hexeract_scheduler.domain.checks import is_int_in
from hexeract_scheduler.domain.shards import MAX_SHARDS, format_shards
from hexeract_scheduler.errors import ConfigError, ScheduleNotFound
from hexeract_scheduler.store.dynamo.codec import key
from hexeract_scheduler.store.dynamo.expressions import EXISTS, INSERT_CONDITION, n, names, s
from hexeract_scheduler.store.dynamo.schema import (
    DEFAULT_SHARDS,
    DEFAULT_TABLE,
    META_ID,
    check_shards,
    table_definition,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Threads a store starts for its concurrent queries and claims when it is given no executor.
DEFAULT_THREADS = 16


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """A conditional update's outcome: ``item`` is the new item (applied, if asked for) or the item
    as it stood (refused, if asked for; None when there is no such item)."""

    applied: bool
    item: dict[str, Any] | None


class DynamoBase:
    """The table and what every operation shares. Thread-safe: one instance may serve a whole
    worker's thread pool.

    Configuration is given once, here: ``shards``, the table's shard count if known (checked
    against the recorded one); ``read_shards``, the shards this store's claims read (None: all;
    a subset lets several dispatchers split a table); ``executor``, the pool for concurrent
    queries and claims (None: a pool of its own, started on first use); ``rng``, for the random
    pick among due entries that keeps racing workers apart.
    """

    def __init__(
        self,
        table_name: str = DEFAULT_TABLE,
        *,
        dynamodb: DynamoDBClient | None = None,
        shards: int | None = None,
        read_shards: tuple[int, ...] | None = None,
        executor: Executor | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if dynamodb is None:
            from hexeract_scheduler.aws.clients import ClientFactory

            dynamodb = ClientFactory().dynamodb()
        self.table_name = table_name
        self.name = f"table {table_name}"
        self.client = dynamodb
        if shards is not None:
            check_shards(shards)
        if read_shards is not None and (
            not read_shards or not all(is_int_in(x, 0, MAX_SHARDS - 1) for x in read_shards)
        ):
            raise ConfigError(f"read_shards must be a non-empty set of shard numbers from 0 to {MAX_SHARDS - 1}")
        self._wanted_shards = shards
        self._shards: int | None = None
        self._read_shards = read_shards
        self._executor = executor
        self.rng = rng or random.Random()
        self._lock = threading.Lock()

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(DEFAULT_THREADS, thread_name_prefix="hexeract-store")
        return self._executor

    # -- table and shard count ---------------------------------------------------------------

    def create_table(self, shards: int = DEFAULT_SHARDS, *, wait: bool = True) -> tuple[bool, int]:
        """Create the table and indexes if missing (idempotent); returns (created, shard count).

        The shard count recorded at creation wins: asking for another on an existing table keeps
        the recorded one (re-sharding would strand items in shards no worker reads).
        """
        check_shards(shards)
        with aws_errors(f"creating {self.name}"):
            try:
                self.client.create_table(**table_definition(self.table_name))
                created = True
            except ClientError as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise
                created = False
            if wait:
                self.client.get_waiter("table_exists").wait(
                    TableName=self.table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
                )
            recorded = self._recorded_shards(record=shards)
        with self._lock:
            self._shards = recorded
        return created, recorded

    # Every public method translates AWS errors once, naming the operation it was asked for
    # ("listing schedules in table T"); the private helpers below let botocore's errors through
    # to it, so no message names an internal step.

    @property
    def shards(self) -> int:
        """The table's shard count, read once from ``#meta``; a table never used yet gets the
        configured (or default) count recorded there. Only writes use this: reads use
        ``_shard_count_for_reading`` and never write."""
        with aws_errors(f"reading the shard count of {self.name}"):
            return self._shard_count()

    def _shard_count(self) -> int:
        if self._shards is None:
            with self._lock:
                if self._shards is None:
                    self._shards = self._checked(self._recorded_shards(record=self._wanted_shards or DEFAULT_SHARDS))
        return self._shards

    def _shard_count_for_reading(self) -> int:
        """The shard count for a read: the recorded one, else the configured one, without writing
        (an operator allowed only to read can list a table no one has written to)."""
        if self._shards is not None:
            return self._shards
        recorded = self._recorded_shards(record=None)
        if recorded is None:
            return self._wanted_shards or DEFAULT_SHARDS
        with self._lock:
            self._shards = self._checked(recorded)
        return self._shards

    def _checked(self, recorded: int) -> int:
        if self._wanted_shards is not None and self._wanted_shards != recorded:
            raise ConfigError(
                f"table {self.table_name} was created with {recorded} shards, not {self._wanted_shards}: "
                "set the shard count to the table's"
            )
        return recorded

    def _recorded_shards(self, *, record: int | None) -> Any:
        """The count in ``#meta``; if there is none, record ``record`` (if given) and return it."""
        got = self.client.get_item(TableName=self.table_name, Key=key(META_ID), ConsistentRead=True)
        if "Item" in got:
            return int(got["Item"]["shards"]["N"])
        if record is None:
            return None
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={"schedule_id": s(META_ID), "shards": n(record)},
                ConditionExpression=INSERT_CONDITION,
            )
            return record
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
        got = self.client.get_item(TableName=self.table_name, Key=key(META_ID), ConsistentRead=True)
        return int(got["Item"]["shards"]["N"])

    def ready(self) -> str:
        with aws_errors(f"opening {self.name}"):
            return f"{self.name} (shards {format_shards(self._read_shard_list())})"

    def read_shards(self) -> tuple[int, ...]:
        """The shards this store's claims read (all of them unless configured otherwise)."""
        with aws_errors(f"reading the shard count of {self.name}"):
            return self._read_shard_list()

    def _read_shard_list(self) -> tuple[int, ...]:
        count = self._shard_count()
        wanted = self._read_shards if self._read_shards is not None else tuple(range(count))
        bad = [x for x in wanted if x >= count]
        if bad:
            raise ConfigError(f"shards {bad} do not exist: the table has {count} shards (0-{count - 1})")
        return tuple(wanted)

    # -- conditional updates -----------------------------------------------------------------

    def _update(
        self,
        sid: uuid.UUID | str,
        update: str,
        condition: str,
        values: dict[str, Any],
        what: str,
        *,
        old: str | None = None,
        return_new: bool = False,
    ) -> UpdateResult:
        """The one conditional UpdateItem every state change goes through; AWS errors are
        translated as ``what``, the public operation it serves.

        ``ExpressionAttributeNames`` is sent only when an expression uses a name placeholder:
        DynamoDB rejects an empty map (moto does not). With ``old`` (a projection), a refused
        update also returns the item as it stands, so the caller can tell why it was refused:
        DynamoDB hands back the item that failed the condition (``ALL_OLD``); an endpoint that
        does not (dynalite) gets a consistent read instead, which may be newer than the refusal —
        every decision taken from it is itself a conditional write, so that is safe.
        """
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": key(sid),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
            **names(update, condition),
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
                        Key=key(sid),
                        ConsistentRead=True,
                        ProjectionExpression=old,
                        **names(old),
                    )
                    item = got.get("Item")
                return UpdateResult(False, item or None)

    def _fenced(self, sid: uuid.UUID, update: str, values: dict[str, Any], what: str, condition: str) -> bool:
        return self._update(sid, update, condition, values, f"{what} schedule {sid}").applied

    def _lifecycle(self, sid: uuid.UUID, update: str, condition: str, values: dict[str, Any], what: str) -> str | None:
        """A conditional update on an existing schedule: None if applied, else the status that
        refused it. Unknown id: ScheduleNotFound."""
        result = self._update(sid, update, f"{EXISTS} AND ({condition})", values, what, old="#st")
        if result.applied:
            return None
        if result.item is None:
            raise ScheduleNotFound(sid)
        return str(result.item.get("status", {}).get("S", "unknown"))
