"""Dispatcher: started by EventBridge Scheduler, claims and delivers due occurrences until its deadline."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.clock import SystemClock
from hexeract_scheduler.service import observability
from hexeract_scheduler.service.compose import build_lambda_dispatcher
from hexeract_scheduler.service.dispatcher import dispatcher_window, invocation_delay_ms, run_dispatcher, scheduled_time
from hexeract_scheduler.service.settings import Settings

# Cold start, once: configuration, clients and the worker are reused by every warm invocation.
settings = Settings.from_env(os.environ)
logger, metrics, tracer = observability.setup(settings)
clock = SystemClock()
worker = build_lambda_dispatcher(settings, ClientFactory(), clock)


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    window = dispatcher_window(settings, clock, context.get_remaining_time_in_millis(), scheduled_time(event))
    observability.record_invocation_delay(metrics, invocation_delay_ms(event, clock.now()))
    summary = run_dispatcher(worker, window, partial(observability.publish, metrics))
    logger.info("dispatcher run finished", extra=summary.as_dict())
    return summary.as_dict()
