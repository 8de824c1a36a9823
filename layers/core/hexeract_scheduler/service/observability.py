"""Powertools wiring for the Lambda functions: JSON logs, CloudWatch metrics in EMF, X-Ray traces.

The core logs through ``logging.getLogger("hexeract_scheduler")`` with ``extra={"schedule_id": ...,
"occurrence_id": ...}``; :func:`setup` gives that logger the Powertools JSON handler, so those keys
become fields of each log line. Nothing here (nor in the core) ever logs a payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from hexeract_scheduler.engine.summary import COUNTERS, CycleSummary
from hexeract_scheduler.service.settings import Settings

CORE_LOGGER = "hexeract_scheduler"
# EMF holds at most 100 values per metric in one record.
MAX_LAG_VALUES = 100

# Metric name -> CycleSummary field, in the order they are emitted.
COUNT_METRICS = {c.metric: c.name for c in COUNTERS}  # metric -> CycleSummary field
LAG_METRIC = "DispatchLagMs"
INVOCATION_DELAY_METRIC = "InvocationDelayMs"


class Observability(NamedTuple):
    logger: Logger
    metrics: Metrics
    tracer: Tracer


def setup(settings: Settings, *, trace_aws_calls: bool = False) -> Observability:
    """A Powertools Logger, Metrics and Tracer configured from ``settings``; the core's logger
    shares the Logger's JSON handler and level.

    The Tracer adds the handler's subsegment (its response and any error) to the trace Lambda
    records with ``Tracing: Active``; off Lambda (tests, a laptop) Powertools disables it, and
    ``POWERTOOLS_TRACE_DISABLED=true`` does anywhere. ``trace_aws_calls`` patches botocore for a
    subsegment per AWS call: right for a function making a few calls on its own thread (the
    dead-letter function), not for the dispatcher, whose thousands of calls per run are made on a
    thread pool, where X-Ray has no segment to attach them to.
    """
    logger = Logger(service=settings.service_name, level=settings.log_level)
    copy_config_to_registered_loggers(source_logger=logger, include={CORE_LOGGER})
    metrics = Metrics(namespace=settings.metrics_namespace, service=settings.service_name)
    tracer = Tracer(
        service=settings.service_name,
        auto_patch=trace_aws_calls,
        patch_modules=("botocore",) if trace_aws_calls else None,
    )
    return Observability(logger, metrics, tracer)


def lag_samples(lags: Sequence[int], limit: int = MAX_LAG_VALUES) -> list[int]:
    """At most ``limit`` values that keep the distribution's shape: all of them if they fit, else
    evenly spaced order statistics that always include the minimum and the maximum (so a CloudWatch
    ``Maximum`` alarm sees the real worst lag)."""
    if len(lags) <= limit:
        return list(lags)
    ordered = sorted(lags)
    last = len(ordered) - 1
    return [ordered[round(i * last / (limit - 1))] for i in range(limit)]


def record_invocation_delay(metrics: Metrics, delay_ms: int | None) -> None:
    """Add how late EventBridge Scheduler started this run (flushed with the next ``publish``)."""
    if delay_ms is not None:
        metrics.add_metric(name=INVOCATION_DELAY_METRIC, unit=MetricUnit.Milliseconds, value=delay_ms)


def publish(metrics: Metrics, summary: CycleSummary) -> None:
    """Emit one EMF record for ``summary`` (counts, and the dispatch lags in milliseconds)."""
    for name, attr in COUNT_METRICS.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(summary, attr))
    for lag in lag_samples(summary.lag_ms):
        metrics.add_metric(name=LAG_METRIC, unit=MetricUnit.Milliseconds, value=max(lag, 0))
    metrics.flush_metrics()
