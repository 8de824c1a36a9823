"""hexeract-scheduler for AWS: at-least-once scheduled delivery to SQS and SNS from DynamoDB.

A Python port of the scheduler of the Rust framework hexeract, with its semantics.
"""

from __future__ import annotations

from hexeract_scheduler.domain.clock import Clock, ManualClock, SystemClock
from hexeract_scheduler.store.contract import ClaimBatch, Listing, ScheduleAdmin, ScheduleStore
from hexeract_scheduler.domain.cron import CronSchedule
from hexeract_scheduler.errors import ConfigError, CredentialsMissing, EndpointUnreachable, HexeractError, InvalidCron, InvalidInput, InvalidTarget, NotReplayable, RetryableError, ScheduleNotFound, StoreError, TableMissing
from hexeract_scheduler.store.memory import InMemoryScheduleStore
from hexeract_scheduler.domain.model import LeasedOccurrence, ScheduledMessage, ScheduleSnapshot, ScheduleStatus, Target, Trigger
from hexeract_scheduler.domain.occurrence import OccurrenceId
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink
from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.engine.config import SchedulerWorkerConfig, retry_delay

_DYNAMO = {"DynamoScheduleStore", "table_definition"}


def __getattr__(name: str) -> object:
    # The DynamoDB store is imported on first use only: code written against the contracts (the
    # worker, the memory store) never loads it.
    if name in _DYNAMO:
        from hexeract_scheduler.store import dynamo

        return getattr(dynamo, name)
    raise AttributeError(f"module 'hexeract_scheduler' has no attribute {name!r}")


__version__ = "0.1.1"

__all__ = [
    "ClaimBatch",
    "Clock",
    "ConfigError",
    "CredentialsMissing",
    "CronSchedule",
    "CycleSummary",
    "Dispatcher",
    "DynamoScheduleStore",
    "EndpointUnreachable",
    "HexeractError",
    "InMemoryScheduleStore",
    "InvalidCron",
    "InvalidInput",
    "InvalidTarget",
    "LeasedOccurrence",
    "Listing",
    "ManualClock",
    "NotReplayable",
    "OccurrenceId",
    "RetryableError",
    "ScheduleAdmin",
    "ScheduleNotFound",
    "ScheduleSnapshot",
    "ScheduleStatus",
    "ScheduleStore",
    "ScheduledMessage",
    "SchedulerWorker",
    "SchedulerWorkerConfig",
    "SnsSink",
    "SqsSink",
    "StoreError",
    "SystemClock",
    "TableMissing",
    "Target",
    "Trigger",
    "retry_delay",
    "table_definition",
]
