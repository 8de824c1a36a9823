"""hexeract-scheduler for AWS: at-least-once scheduled delivery to SQS and SNS from DynamoDB.

A Python port of the scheduler of the Rust framework hexeract, with its semantics. The public API
is what this module exports; the map below is every module, by layer. Each heading says what its
modules may import besides their own folder and the foundation (``tests/unit/test_architecture.py``
checks it):

The foundation, open to every layer:
    errors                  the one error hierarchy (``HexeractError``), and ``one_line`` for messages
    concurrency             AWS calls on a thread pool under a deadline; daemon threads; work in flight

domain/ — values and rules, no I/O (imports nothing else):
    domain.clock            ``Clock`` (system, manual), epoch milliseconds, RFC 3339
    domain.checks           integers within bounds, the characters SQS accepts
    domain.cron             ``CronSchedule``: croniter in UTC or an IANA zone, DST as EventBridge does
    domain.target           ``Target``: ``sqs:<queue URL or ARN>`` or ``sns:<topic ARN>``, FIFO groups
    domain.occurrence       ``OccurrenceId``: hexeract's UUIDv5 of a schedule and an instant
    domain.model            schedules (``ScheduledMessage``, ``Trigger``, ``ScheduleSnapshot``), claims
    domain.shards           due-index shard numbers and the ``all`` / ``N-M`` / ``N,M`` selections

aws/ — the AWS boundary (imports nothing else):
    aws.clients             ``Connection`` (where clients point) and ``ClientFactory``
    aws.translate           botocore's errors translated into the package's, at one place
    aws.stack               a deployed stack's table, read from its outputs

store/ — where schedules live (imports domain, aws):
    store.contract          ``ScheduleStore`` (claims, fenced acks) and ``ScheduleAdmin`` (lifecycle, lists)
    store.memory            ``InMemoryScheduleStore``: both contracts in one process, for tests
    store.dynamo            ``DynamoScheduleStore``: both contracts on one table, single-item writes
    store.dynamo.schema     the table, its indexes and key shapes
    store.dynamo.codec      items to domain values and back
    store.dynamo.expressions  the condition and update expressions every write uses
    store.dynamo.base       the table's configuration and the one conditional update
    store.dynamo.claims     claims, the crash sweep, quarantine, fenced acks
    store.dynamo.payloads   large payloads in items of their own, read back in batches
    store.dynamo.admin      insert, inspect, pause, resume, cancel, replay, listings, table create

sinks/ — delivery (imports domain, aws):
    sinks.batch             the ``Sink`` protocol, message attributes, batches, one refused entry isolated
    sinks.refusals          what a sink can tell locally: unsendable entries, refusals, error texts
    sinks.sqs               ``SqsSink``: SendMessageBatch
    sinks.sns               ``SnsSink``: PublishBatch
    sinks.dispatcher        ``Dispatcher``: occurrences to their target's sink, within a timeout

engine/ — the worker (imports domain, store.contract, sinks):
    engine.config           ``SchedulerWorkerConfig`` (hexeract's defaults and rules), ``retry_delay``
    engine.summary          ``CycleSummary``: what a cycle or a run did, and its metric names
    engine.settle           the one fenced ack a dispatch outcome calls for
    engine.worker           ``SchedulerWorker``: claim, dispatch, settle; the pipelined run loop

service/ — what the Lambda functions run (imports every layer above):
    service.bounds          the numeric settings' bounds, and why each
    service.settings        ``Settings``: every environment variable, read once and validated
    service.observability   Powertools: JSON logs, EMF metrics, X-Ray
    service.compose         ``build_store``, ``build_dispatcher``, ``build_lambda_dispatcher``: each built once
    service.dispatcher      the dispatcher's run window and its run with metrics
    service.dead_letter     the dead-letter function's requests

Kept for one release:
    _moved                  0.1's flat module paths, importable with a deprecation warning

Outside the Lambda layer (layers/core/Makefile builds the layer from everything above):
    cli                     the ``hexeract`` command (click): commands, errors, options, parse, render, worker
    local                   ``python -m hexeract_scheduler.local``: a local AWS endpoint (moto)
"""

from __future__ import annotations

from hexeract_scheduler import _moved
from hexeract_scheduler.domain.clock import Clock, ManualClock, SystemClock
from hexeract_scheduler.domain.cron import CronSchedule
from hexeract_scheduler.domain.model import (
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    Target,
    Trigger,
)
from hexeract_scheduler.domain.occurrence import OccurrenceId
from hexeract_scheduler.engine.config import SchedulerWorkerConfig, retry_delay
from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.errors import (
    ConfigError,
    CredentialsMissing,
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
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink
from hexeract_scheduler.store.contract import ClaimBatch, Listing, ScheduleAdmin, ScheduleStore
from hexeract_scheduler.store.memory import InMemoryScheduleStore

_DYNAMO = {"DynamoScheduleStore", "table_definition"}


def __getattr__(name: str) -> object:
    # The DynamoDB store is imported on first use only: code written against the contracts (the
    # worker, the memory store) never loads it.
    if name in _DYNAMO:
        from hexeract_scheduler.store import dynamo

        return getattr(dynamo, name)
    raise AttributeError(f"module 'hexeract_scheduler' has no attribute {name!r}")


__version__ = "0.1.1"

_moved.install()

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
