"""The numeric settings' bounds (``BOUNDS``): what ``Settings`` accepts, and why each upper bound."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hexeract_scheduler.domain.shards import MAX_SHARDS

# EventBridge Scheduler invokes a target within about a minute of its scheduled time, even with
# FlexibleTimeWindow OFF.
SCHEDULER_DELIVERY_WINDOW_SECONDS = 60
# The longest a Lambda function may run.
LAMBDA_MAX_SECONDS = 900

# Upper bounds of the numeric settings, far above what a deployment needs and low enough that no
# duration built from them can overflow (docs/configuration.md gives the same reasons):
# - lease, 12 h: the longest SQS visibility timeout. An occurrence claimed by a crashed run waits
#   a whole lease before another run claims it, so a longer lease only delays that recovery.
# - batch size, 1000: a thousand conditional claim writes and a hundred 10-entry SendMessageBatch
#   calls per cycle; the lease must also cover batch_size x dispatch_timeout.
# - retry delays, 24 h: the longest EventBridge Scheduler itself retries an event for.
# - dispatch timeout, run and stop margin, 900 s: the Lambda maximum, the invocation they are
#   parts of (their sum is checked against it too).
# - poll interval, 60 s: a cycle looks one interval ahead, and a schedule added due within it may
#   wait that long to be seen; the dispatcher's point is sub-second delivery.
# - concurrency, 256 threads: five times the 50 pooled connections the clients keep, a quarter of
#   the 1024 threads a Lambda execution environment may run.
# - dispatch period, 13 min: the longest for which a run (at most 900 s) can still cover the
#   period, the delivery window and a dispatch timeout (template.yaml allows 2-13).
MAX_LEASE_SECONDS = 12 * 3600
MAX_BATCH_SIZE = 1000
MAX_RETRY_DELAY_MS = 24 * 3600 * 1000
MAX_POLL_INTERVAL_MS = 60_000
MAX_CONCURRENCY = 256
MAX_DISPATCH_PERIOD_MINUTES = (LAMBDA_MAX_SECONDS - SCHEDULER_DELIVERY_WINDOW_SECONDS - 1) // 60  # 13


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting accepts: integers from ``least`` to ``most``, or (``seconds``)
    finite numbers of seconds from ``least`` (excluded when ``open_least``) to ``most``."""

    least: int
    most: int
    seconds: bool = False
    open_least: bool = False

    def describe(self) -> str:
        if not self.seconds:
            return f"an integer from {self.least} to {self.most}"
        if self.open_least:
            return f"a number of seconds > {self.least} and <= {self.most}"
        return f"a number of seconds from {self.least} to {self.most}"

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float) if self.seconds else int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.least < value if self.open_least else self.least <= value) and value <= self.most


BOUNDS: dict[str, Bound] = {
    "shard_count": Bound(1, MAX_SHARDS),
    "lease_seconds": Bound(1, MAX_LEASE_SECONDS),
    "batch_size": Bound(1, MAX_BATCH_SIZE),
    "retry_base_delay_ms": Bound(1, MAX_RETRY_DELAY_MS),
    "retry_max_delay_ms": Bound(1, MAX_RETRY_DELAY_MS),
    "dispatch_timeout_seconds": Bound(0, LAMBDA_MAX_SECONDS, seconds=True, open_least=True),
    "poll_interval_ms": Bound(1, MAX_POLL_INTERVAL_MS),
    "concurrency": Bound(1, MAX_CONCURRENCY),
    "run_seconds": Bound(0, LAMBDA_MAX_SECONDS, seconds=True, open_least=True),
    "stop_margin_seconds": Bound(0, LAMBDA_MAX_SECONDS, seconds=True),
    "dispatch_period_minutes": Bound(1, MAX_DISPATCH_PERIOD_MINUTES),
}
