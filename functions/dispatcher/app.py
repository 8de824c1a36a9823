"""Dispatcher: started by EventBridge Scheduler, claims and delivers due occurrences until its deadline."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from hexeract_scheduler import observability
from hexeract_scheduler.aws import ClientFactory
from hexeract_scheduler.clock import SystemClock
from hexeract_scheduler.dynamo import DynamoScheduleStore
from hexeract_scheduler.lambda_ops import dispatcher_window, invocation_delay_ms, run_dispatcher, scheduled_time
from hexeract_scheduler.settings import Settings
from hexeract_scheduler.sinks import Dispatcher
from hexeract_scheduler.worker import SchedulerWorker

# Cold start, once: configuration, clients and the worker are reused by every warm invocation.
settings = Settings.from_env(os.environ)
logger, metrics, tracer = observability.setup(settings)
clock = SystemClock()
clients = ClientFactory()
pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="hexeract")  # claims, sends, acks
store = DynamoScheduleStore(
    settings.table_name,
    dynamodb=clients.dynamodb(),
    shards=settings.shard_count,
    read_shards=settings.dispatcher_shards,
    executor=pool,
)
worker = SchedulerWorker(store, Dispatcher.for_clients(clients), settings.worker_config(), clock=clock, executor=pool)


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    window = dispatcher_window(settings, clock, context.get_remaining_time_in_millis(), scheduled_time(event))
    observability.record_invocation_delay(metrics, invocation_delay_ms(event, clock.now()))
    summary = run_dispatcher(worker, window, partial(observability.publish, metrics))
    logger.info("dispatcher run finished", extra=summary.as_dict())
    return summary.as_dict()
