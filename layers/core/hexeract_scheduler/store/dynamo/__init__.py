"""Schedules in one DynamoDB table: the ``ScheduleStore`` and ``ScheduleAdmin`` contracts kept with
single-item conditional writes (docs/contracts.md#table-layout).

Every step is one single-item conditional write (no transactions): half the cost of a
transaction, and each state change stays atomic on its own. Within the package only the
compositions (``service.compose``, the command line's ``cli.commands``) import it; everything else
works against the contracts in ``hexeract_scheduler.store.contract``.
"""

from __future__ import annotations

from hexeract_scheduler.store.dynamo.admin import AdminOps
from hexeract_scheduler.store.dynamo.claims import ClaimOps
from hexeract_scheduler.store.dynamo.schema import (
    DEAD_LETTER_INDEX,
    DEFAULT_SHARDS,
    DEFAULT_TABLE,
    DUE_INDEX,
    shard_of,
    table_definition,
)


class DynamoScheduleStore(AdminOps, ClaimOps):
    """The schedules table: both store contracts. Thread-safe: one instance may serve a whole
    worker's thread pool. See ``DynamoBase`` for its configuration."""


__all__ = [
    "DEAD_LETTER_INDEX",
    "DEFAULT_SHARDS",
    "DEFAULT_TABLE",
    "DUE_INDEX",
    "DynamoScheduleStore",
    "shard_of",
    "table_definition",
]
