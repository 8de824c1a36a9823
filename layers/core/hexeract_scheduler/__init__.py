"""hexeract-scheduler for AWS: at-least-once scheduled delivery to SQS and SNS from DynamoDB.

A Python port of the scheduler of the Rust framework hexeract, with its semantics.
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .cron import CronSchedule
from .errors import (
    ConfigError,
    EndpointUnreachable,
    HexeractError,
    InvalidCron,
    InvalidInput,
    InvalidTarget,
    NotReplayable,
    RetryableError,
    ScheduleNotFound,
    StoreError,
    TableMissing,
)
from .model import LeasedOccurrence, ScheduledMessage, ScheduleSnapshot, ScheduleStatus, Target, Trigger
from .occurrence import OccurrenceId
from .sinks import Dispatcher, SnsSink, SqsSink
from .store import DynamoScheduleStore, table_definition
from .worker import CycleSummary, SchedulerWorker, SchedulerWorkerConfig, retry_delay

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "ConfigError",
    "CronSchedule",
    "CycleSummary",
    "Dispatcher",
    "DynamoScheduleStore",
    "EndpointUnreachable",
    "HexeractError",
    "InvalidCron",
    "InvalidInput",
    "InvalidTarget",
    "LeasedOccurrence",
    "ManualClock",
    "NotReplayable",
    "OccurrenceId",
    "RetryableError",
    "ScheduleNotFound",
    "ScheduleSnapshot",
    "ScheduleStatus",
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
