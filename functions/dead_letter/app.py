"""Dead-letter function: list dead-lettered schedules, or replay one (hexeract_scheduler.service.dead_letter)."""

from __future__ import annotations

import os
from typing import Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.clock import SystemClock
from hexeract_scheduler.service import observability
from hexeract_scheduler.service.compose import build_store
from hexeract_scheduler.service.dead_letter import handle_dead_letter
from hexeract_scheduler.service.settings import Settings

# Cold start, once. Bad input raises a typed error (InvalidRequest, ScheduleNotFound, NotReplayable):
# Lambda reports it as a FunctionError and nothing is changed.
settings = Settings.from_env(os.environ)
logger, _metrics, tracer = observability.setup(settings, trace_aws_calls=True)
clock = SystemClock()
store = build_store(settings.table_name, ClientFactory(), shard_count=settings.shard_count)


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)  # a listing can be large: the trace keeps no copy
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_dead_letter(store, clock, event)
