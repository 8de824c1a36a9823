"""The schedules table: its definition, partitions and shard count (docs/contracts.md#table-layout).

Key ``schedule_id`` (S). Instants are integer epoch milliseconds.

* ``due-index-v2`` (sparse): ``due_shard`` (S) + ``due_at`` (N), projecting ``leased_until``. A
  pending item sits in partition ``"<shard>"``, which workers query, at the instant its occurrence
  (or its retry) is due. A claim leaves ``due_at`` where it is and sets ``leased_until``, which the
  index carries: a worker reads an entry whose lease is in force as in flight, not due before the
  lease ends, so an expired lease makes the item due again with no extra query. Changing only a
  projected attribute updates the entry in place (one index write unit; moving ``due_at`` would
  take two, a delete and a put). A paused item sits in partition ``"p<shard>"`` (due at its
  instant), which no worker queries. Terminal items drop the keys and leave the index. Listing
  pending and paused schedules is a Query per partition, merged: never a Scan, and no second
  index to keep up (each index write is a write unit per change).
* ``dead-letter-index`` (sparse, KEYS_ONLY): ``dl_pk`` (S, constant) + ``dead_lettered_at`` (N).

A payload too large to keep the schedule's item within one write unit is stored once, in an item
of its own keyed ``"<schedule id>#payload"`` (no index keys: no index and no listing sees it), and
the schedule's item names it in ``payload_ref``; claims and acks then write a small item whatever
the payload's size. The shard count is fixed when the table is first used and recorded in the
item ``schedule_id = "#meta"``.
"""

from __future__ import annotations

import uuid
from typing import Any

from hexeract_scheduler.domain.checks import is_int_in
from hexeract_scheduler.domain.shards import MAX_SHARDS
from hexeract_scheduler.errors import ConfigError

DEFAULT_TABLE = "hexeract-schedules"
DEFAULT_SHARDS = 4
META_ID = "#meta"
# Renamed from "due-index" (KEYS_ONLY) when it started projecting leased_until: DynamoDB cannot
# change an index's projection in place (docs/upgrading.md: 0.1.1, the due index).
DUE_INDEX = "due-index-v2"
# What the due index carries beyond its keys: whether an entry is in flight, and until when.
DUE_INDEX_PROJECTED = ("leased_until",)
PAUSED_PREFIX = "p"
DEAD_LETTER_INDEX = "dead-letter-index"
DEAD_LETTER_PK = "dead"
# A payload item's key is the schedule id and this suffix: no UUID parse accepts it ("#" is not a
# hex digit), so nothing that expects a schedule id mistakes it for one.
PAYLOAD_SUFFIX = "#payload"


def table_definition(table_name: str = DEFAULT_TABLE) -> dict[str, Any]:
    """CreateTable arguments: the one definition the CLI, tests and template contract share."""

    def gsi(name: str, pk: str, sk: str, include: tuple[str, ...] = ()) -> dict[str, Any]:
        projection: dict[str, Any] = {"ProjectionType": "KEYS_ONLY"}
        if include:
            projection = {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(include)}
        return {
            "IndexName": name,
            "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
            "Projection": projection,
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
            gsi(DUE_INDEX, "due_shard", "due_at", DUE_INDEX_PROJECTED),
            gsi(DEAD_LETTER_INDEX, "dl_pk", "dead_lettered_at"),
        ],
    }


def payload_key(schedule_id: uuid.UUID | str) -> str:
    """The key of the item holding this schedule's payload, when it is stored apart."""
    return f"{schedule_id}{PAYLOAD_SUFFIX}"


def shard_of(schedule_id: uuid.UUID, shards: int) -> int:
    # UUIDv7's low bits are random: a plain modulo spreads evenly.
    return schedule_id.int % shards


def due_partition(schedule_id: uuid.UUID, shards: int) -> str:
    """The due-index partition workers query for this schedule."""
    return str(shard_of(schedule_id, shards))


def paused_partition(schedule_id: uuid.UUID, shards: int) -> str:
    """The due-index partition a paused schedule waits in (no worker queries it)."""
    return f"{PAUSED_PREFIX}{shard_of(schedule_id, shards)}"


def check_shards(shards: int) -> None:
    if not is_int_in(shards, 1, MAX_SHARDS):
        raise ConfigError(f"shard count must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")
