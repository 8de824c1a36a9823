"""The one composition of what runs: the DynamoDB store on a table, and a dispatcher (that store, the
SQS/SNS dispatcher and a worker sharing one thread pool).

The dispatcher function, the command line's ``worker`` and the benchmarks all build their
dispatcher here, so a benchmark measures the code that ships. This module and the command line's
store opening are the only places that import ``store.dynamo``.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.concurrency import DaemonExecutor
from hexeract_scheduler.domain.clock import Clock, SystemClock
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.service.settings import Settings
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.store.dynamo import DynamoScheduleStore


def build_store(
    table_name: str,
    clients: ClientFactory,
    *,
    shard_count: int | None = None,
    read_shards: tuple[int, ...] | None = None,
    executor: Executor | None = None,
) -> DynamoScheduleStore:
    """The schedules table as both store contracts. ``shard_count``, when known (a deployment's
    ``SHARD_COUNT``), is checked against the table's; ``read_shards`` are the shards claims read
    (None: all)."""
    return DynamoScheduleStore(
        table_name, dynamodb=clients.dynamodb(), shards=shard_count, read_shards=read_shards, executor=executor
    )


def build_dispatcher(
    table_name: str,
    clients: ClientFactory,
    config: SchedulerWorkerConfig,
    *,
    shard_count: int | None = None,
    read_shards: tuple[int, ...] | None = None,
    clock: Clock | None = None,
    daemon_threads: bool = False,
) -> SchedulerWorker:
    """A worker over the table, delivering through SQS and SNS clients from ``clients``.

    One pool of ``config.concurrency`` threads serves the store's queries and claims and the
    worker's sends and acks (boto3 clients are thread-safe), so the settings bound every AWS call
    in flight. The worker owns the pool: ``close()`` (or leaving its ``with``) shuts it down.
    ``daemon_threads``: threads that never hold the process at exit (a command-line worker must
    exit on time while a hung request waits out its read timeout; a Lambda run has no exit).
    """
    pool: Executor = (
        DaemonExecutor(config.concurrency)
        if daemon_threads
        else ThreadPoolExecutor(config.concurrency, thread_name_prefix="hexeract")
    )
    store = build_store(table_name, clients, shard_count=shard_count, read_shards=read_shards, executor=pool)
    return SchedulerWorker(
        store, Dispatcher.for_clients(clients), config, clock=clock or SystemClock(), executor=pool, owns_executor=True
    )


def build_lambda_dispatcher(settings: Settings, clients: ClientFactory, clock: Clock | None = None) -> SchedulerWorker:
    """The dispatcher function's worker, from its settings: the function and the benchmarks build it
    here, so a benchmark runs exactly what the function runs."""
    return build_dispatcher(
        settings.table_name,
        clients,
        settings.worker_config(),
        shard_count=settings.shard_count,
        read_shards=settings.dispatcher_shards,
        clock=clock,
    )
