"""Lambda configuration: environment variables read once, at cold start, into a validated object.

Every variable is declared once, in ``template.yaml`` ``Globals.Function.Environment.Variables``;
nothing else in the package reads the environment. A bad value raises :class:`ConfigError` with
one line naming the variable, so a misconfigured deployment fails at its first invocation with a
message that says what to fix (docs/contracts.md#lambda-functions).

Coverage arithmetic (docs/deploy.md). EventBridge Scheduler starts the dispatcher every
``DISPATCH_PERIOD_MINUTES``, but even with its flexible window off it only promises to invoke
within about a minute of the scheduled instant. A run polls until its deadline less one
``DISPATCH_TIMEOUT_SECONDS`` (the worker never starts a batch that could outlive the deadline), so
runs overlap, and no instant is left without a polling dispatcher, when::

    RUN_SECONDS - DISPATCH_TIMEOUT_SECONDS >= DISPATCH_PERIOD_MINUTES * 60 + 60

and the function's ``Timeout`` is at least ``RUN_SECONDS + STOP_MARGIN_SECONDS`` plus the cold
start. Overlapping runs are safe: claims are conditional writes with leases.

``DISPATCH_MODE=on-demand`` (the template starts a run every minute then) keeps the same
inequality: a run stays while something is due before the latest instant the next run may start
(its own scheduled start + one period + the delivery window), so ``RUN_SECONDS`` must let it stay
that long and one dispatch timeout more (``lambda_ops.dispatcher_window``).

``DISPATCHER_SHARD_RANGES`` lists every dispatcher's shards (the template's
``DispatcherShardRanges``); each dispatcher checks at cold start that the ranges split the table's
shards, every shard in exactly one, and that its own ``DISPATCHER_SHARDS`` is one of them.

Every number has an upper bound (``BOUNDS``, the README's configuration table) that no real
deployment reaches, so that a typo such as ``LEASE_SECONDS=100000000000000000000`` is refused by
name instead of overflowing a duration later.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from hexeract_scheduler.domain.shards import check_partition, format_shards, parse_shard_ranges, parse_shards
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.errors import ConfigError
from hexeract_scheduler.service.bounds import BOUNDS, LAMBDA_MAX_SECONDS, SCHEDULER_DELIVERY_WINDOW_SECONDS

T = TypeVar("T")

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9 _./#:-]{1,255}$")
# How EventBridge Scheduler runs the dispatcher: always one polling (runs overlap), or a run every
# period that returns once nothing is due before the next (docs/deploy.md#dispatch-modes).
CONTINUOUS = "continuous"
ON_DEMAND = "on-demand"
DISPATCH_MODES = (CONTINUOUS, ON_DEMAND)

# Settings field -> the environment variable it is read from (also the list the template declares).
ENV_VARS: dict[str, str] = {
    "table_name": "TABLE_NAME",
    "shard_count": "SHARD_COUNT",
    "dispatcher_shards": "DISPATCHER_SHARDS",
    "dispatcher_shard_ranges": "DISPATCHER_SHARD_RANGES",
    "lease_seconds": "LEASE_SECONDS",
    "batch_size": "BATCH_SIZE",
    "retry_base_delay_ms": "RETRY_BASE_DELAY_MS",
    "retry_max_delay_ms": "RETRY_MAX_DELAY_MS",
    "jitter": "JITTER",
    "dispatch_timeout_seconds": "DISPATCH_TIMEOUT_SECONDS",
    "poll_interval_ms": "POLL_INTERVAL_MS",
    "concurrency": "CONCURRENCY",
    "run_seconds": "RUN_SECONDS",
    "stop_margin_seconds": "STOP_MARGIN_SECONDS",
    "dispatch_period_minutes": "DISPATCH_PERIOD_MINUTES",
    "dispatch_mode": "DISPATCH_MODE",
    "service_name": "POWERTOOLS_SERVICE_NAME",
    "metrics_namespace": "POWERTOOLS_METRICS_NAMESPACE",
    "log_level": "LOG_LEVEL",
}

# The worker-config field each Settings field feeds, to name variables in the worker's own errors.
_WORKER_FIELDS = {
    "lease": "LEASE_SECONDS",
    "batch_size": "BATCH_SIZE",
    "retry_base_delay": "RETRY_BASE_DELAY_MS",
    "retry_max_delay": "RETRY_MAX_DELAY_MS",
    "dispatch_timeout": "DISPATCH_TIMEOUT_SECONDS",
    "poll_interval": "POLL_INTERVAL_MS",
    "concurrency": "CONCURRENCY",
}


@dataclass(frozen=True)
class Settings:
    """The Lambda functions' configuration. Defaults suit a dispatcher started every 5 minutes.

    ``poll_interval_ms`` 1000 does not mean a second of latency: each cycle looks one poll interval
    ahead and sleeps only until the soonest due instant it saw.
    """

    table_name: str
    shard_count: int = 4
    dispatcher_shards: tuple[int, ...] | None = None
    # Every dispatcher's shards, one entry per dispatcher (None in an entry: all); None: not given.
    dispatcher_shard_ranges: tuple[tuple[int, ...] | None, ...] | None = None
    lease_seconds: int = 300
    batch_size: int = 10
    retry_base_delay_ms: int = 1000
    retry_max_delay_ms: int = 300_000
    jitter: bool = True
    dispatch_timeout_seconds: float = 10.0
    poll_interval_ms: int = 1000
    concurrency: int = 16
    run_seconds: float = 400.0
    stop_margin_seconds: float = 15.0
    dispatch_period_minutes: int | None = 5
    dispatch_mode: str = CONTINUOUS
    service_name: str = "hexeract-scheduler"
    metrics_namespace: str = "Hexeract"
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        # from_env checked the text it read; values given in code must fit the same bounds.
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if value is not None or name != "dispatch_period_minutes":
                bound.check(ENV_VARS[name], value, repr(value))
        self._check_ranges()  # first: every dispatcher of a stack reports the same problem
        if self.dispatcher_shards is not None:
            bad = [s for s in self.dispatcher_shards if s >= self.shard_count]
            if bad:
                raise ConfigError(
                    f"DISPATCHER_SHARDS: shards {bad} do not exist with SHARD_COUNT={self.shard_count} "
                    f"(0-{self.shard_count - 1})"
                )
        if self.dispatch_mode not in DISPATCH_MODES:
            raise ConfigError(f"DISPATCH_MODE: expected {' or '.join(DISPATCH_MODES)}, got {self.dispatch_mode!r}")
        if self.dispatch_mode == ON_DEMAND and self.dispatch_period_minutes is None:
            raise ConfigError(
                "DISPATCH_PERIOD_MINUTES: required with DISPATCH_MODE=on-demand (a run stays until the next one "
                "starts; the template sets 1)"
            )
        if self.run_seconds + self.stop_margin_seconds > LAMBDA_MAX_SECONDS:
            raise ConfigError(
                f"RUN_SECONDS + STOP_MARGIN_SECONDS ({self.run_seconds:g} + {self.stop_margin_seconds:g}) "
                f"exceeds the Lambda maximum of {LAMBDA_MAX_SECONDS} s"
            )
        if self.run_seconds <= self.dispatch_timeout_seconds:
            raise ConfigError(
                f"RUN_SECONDS ({self.run_seconds:g}) must exceed DISPATCH_TIMEOUT_SECONDS "
                f"({self.dispatch_timeout_seconds:g}): a run polls until one dispatch timeout before its end"
            )
        if self.dispatch_period_minutes is not None:
            needed = (
                self.dispatch_period_minutes * 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS + self.dispatch_timeout_seconds
            )
            if self.run_seconds < needed:
                why = (
                    "an on-demand run could not stay until the next one starts"
                    if self.dispatch_mode == ON_DEMAND
                    else "it leaves gaps between dispatcher runs"
                )
                raise ConfigError(
                    f"RUN_SECONDS ({self.run_seconds:g}) is too short, {why}: it must be >= "
                    f"DISPATCH_PERIOD_MINUTES x 60 + {SCHEDULER_DELIVERY_WINDOW_SECONDS} + DISPATCH_TIMEOUT_SECONDS "
                    f"= {needed:g}"
                )
        self.worker_config()  # the worker's own validation, at cold start

    def _check_ranges(self) -> None:
        """The dispatchers' ranges split the shards, and this dispatcher's shards are one of them."""
        if self.dispatcher_shard_ranges is None:
            return
        try:
            check_partition(self.dispatcher_shard_ranges, self.shard_count)
        except ConfigError as exc:
            raise ConfigError(f"DISPATCHER_SHARD_RANGES: {exc}") from None
        mine, ranges = self.dispatcher_shards, self.dispatcher_shard_ranges
        every = tuple(range(self.shard_count))  # the same as all
        if mine is not None and mine not in ranges and not (ranges == (None,) and mine == every):
            listed = ", ".join("all" if r is None else format_shards(r) for r in ranges)
            raise ConfigError(
                f"DISPATCHER_SHARDS ({format_shards(mine)}) is not one of DISPATCHER_SHARD_RANGES ({listed})"
            )

    @property
    def on_demand(self) -> bool:
        return self.dispatch_mode == ON_DEMAND

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read and validate every variable in ``ENV_VARS`` (absent or empty: the default)."""

        def get(field: str, parse: Callable[[str, str], T]) -> T | None:
            var = ENV_VARS[field]
            raw = environ.get(var, "").strip()
            return parse(var, raw) if raw else None

        table = get("table_name", _table_name)
        if table is None:
            raise ConfigError("TABLE_NAME: required (the schedules table's name)")
        values: dict[str, object] = {
            "shard_count": get("shard_count", _int("shard_count")),
            "lease_seconds": get("lease_seconds", _int("lease_seconds")),
            "batch_size": get("batch_size", _int("batch_size")),
            "retry_base_delay_ms": get("retry_base_delay_ms", _int("retry_base_delay_ms")),
            "retry_max_delay_ms": get("retry_max_delay_ms", _int("retry_max_delay_ms")),
            "jitter": get("jitter", _bool),
            "dispatch_timeout_seconds": get("dispatch_timeout_seconds", _seconds("dispatch_timeout_seconds")),
            "poll_interval_ms": get("poll_interval_ms", _int("poll_interval_ms")),
            "concurrency": get("concurrency", _int("concurrency")),
            "run_seconds": get("run_seconds", _seconds("run_seconds")),
            "stop_margin_seconds": get("stop_margin_seconds", _seconds("stop_margin_seconds")),
            "service_name": get("service_name", _pattern(_NAME, "3-255 letters, digits, '_', '.' or '-'")),
            "metrics_namespace": get("metrics_namespace", _pattern(_NAMESPACE, "a CloudWatch namespace")),
            "log_level": get("log_level", _log_level),
        }
        kwargs = {k: v for k, v in values.items() if v is not None}
        shards_raw = environ.get("DISPATCHER_SHARDS", "").strip()
        try:
            kwargs["dispatcher_shards"] = parse_shards(shards_raw or None)
        except ConfigError as exc:
            raise ConfigError(f"DISPATCHER_SHARDS: {exc}") from None
        ranges_raw = environ.get("DISPATCHER_SHARD_RANGES", "").strip()
        if ranges_raw:
            try:
                kwargs["dispatcher_shard_ranges"] = parse_shard_ranges(ranges_raw)
            except ConfigError as exc:
                raise ConfigError(f"DISPATCHER_SHARD_RANGES: {exc}") from None
        mode_raw = environ.get("DISPATCH_MODE", "").strip()
        if mode_raw:
            if mode_raw.lower() not in DISPATCH_MODES:
                raise ConfigError(f"DISPATCH_MODE: expected {' or '.join(DISPATCH_MODES)}, got {mode_raw!r}")
            kwargs["dispatch_mode"] = mode_raw.lower()
        period_raw = environ.get("DISPATCH_PERIOD_MINUTES", "").strip()
        # Unset or "none": invoked by hand (tests, a one-off drain), no coverage requirement.
        if period_raw.lower() in ("", "none", "off"):
            kwargs["dispatch_period_minutes"] = None
        else:
            kwargs["dispatch_period_minutes"] = _int("dispatch_period_minutes")("DISPATCH_PERIOD_MINUTES", period_raw)
        return cls(table_name=table, **kwargs)  # type: ignore[arg-type]

    def worker_config(self) -> SchedulerWorkerConfig:
        """The worker's configuration; its validation errors name the variables to change."""
        try:
            return SchedulerWorkerConfig(
                poll_interval=timedelta(milliseconds=self.poll_interval_ms),
                batch_size=self.batch_size,
                lease=timedelta(seconds=self.lease_seconds),
                retry_base_delay=timedelta(milliseconds=self.retry_base_delay_ms),
                retry_max_delay=timedelta(milliseconds=self.retry_max_delay_ms),
                jitter=self.jitter,
                dispatch_timeout=timedelta(seconds=self.dispatch_timeout_seconds),
                concurrency=self.concurrency,
            )
        except ConfigError as exc:
            named = [var for name, var in _WORKER_FIELDS.items() if re.search(rf"\b{name}\b", str(exc))]
            raise ConfigError(f"{', '.join(named) or 'worker settings'}: {exc}") from None


# -- parsers: (variable name, raw text) -> value, or ConfigError naming the variable ------------


def _table_name(var: str, raw: str) -> str:
    if not _NAME.match(raw):
        raise ConfigError(f"{var}: invalid DynamoDB table name {raw!r} (3-255 letters, digits, '_', '.' or '-')")
    return raw


def _int(field: str) -> Callable[[str, str], int]:
    bound = BOUNDS[field]

    def parse(var: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:  # also "1e20", and numbers of more than 4300 digits
            raise ConfigError(f"{var}: expected {bound.describe()}, got {raw!r}") from None
        bound.check(var, value, repr(raw))
        return value

    return parse


def _seconds(field: str) -> Callable[[str, str], float]:
    bound = BOUNDS[field]

    def parse(var: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{var}: expected {bound.describe()}, got {raw!r}") from None
        bound.check(var, value, repr(raw))
        return value

    return parse


def _bool(var: str, raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ConfigError(f"{var}: expected true or false, got {raw!r}")


def _log_level(var: str, raw: str) -> str:
    level = raw.upper()
    if level not in _LOG_LEVELS:
        raise ConfigError(f"{var}: expected one of {', '.join(_LOG_LEVELS)}, got {raw!r}")
    return level


def _pattern(regex: re.Pattern[str], what: str) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        if not regex.match(raw):
            raise ConfigError(f"{var}: expected {what}, got {raw!r}")
        return raw

    return parse
