"""The schedules table: its definition, partitions and shard count (docs/contracts.md#table-layout).

Key ``schedule_id`` (S). Instants are integer epoch milliseconds.

* ``due-index`` (sparse, KEYS_ONLY): ``due_shard`` (S) + ``due_at`` (N). A pending item sits in
  partition ``"<shard>"``, which workers query; a claim sets ``due_at = leased_until``, so an
  expired lease makes the item due again with no extra query. A paused item sits in partition
  ``"p<shard>"`` (due at its instant), which no worker queries. Terminal items drop the keys and
  leave the index. Listing pending and paused schedules is a Query per partition, merged: never a
  Scan, and no second index to keep up (each index write is a write unit per change).
* ``dead-letter-index`` (sparse, KEYS_ONLY): ``dl_pk`` (S, constant) + ``dead_lettered_at`` (N).

The shard count is fixed when the table is first used and recorded in the item
``schedule_id = "#meta"``.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..checks import is_int_in
from ..errors import ConfigError
from ..shards import MAX_SHARDS

DEFAULT_TABLE = "hexeract-schedules"
DEFAULT_SHARDS = 4
META_ID = "#meta"
DUE_INDEX = "due-index"
PAUSED_PREFIX = "p"
DEAD_LETTER_INDEX = "dead-letter-index"
DEAD_LETTER_PK = "dead"


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
