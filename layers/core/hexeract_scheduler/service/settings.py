"""Lambda configuration: environment variables read once, at cold start, into a validated object.

Every variable is listed once, in :data:`VARIABLES` (the environment variable, the ``Settings``
field it sets, the template parameter that sets it, what it accepts and means); ``template.yaml``
declares the same list in ``Globals`` and docs/configuration.md is rendered from it. Nothing else in
the package reads the environment. :meth:`Settings.from_env` only reads text into values (a text
that is not a number is refused there); every rule is checked once, in ``Settings.__post_init__``,
so values given in code meet the same rules. A bad value raises :class:`ConfigError` with one line
naming the variable (``field``), so a misconfigured deployment fails at its first invocation with a
message that says what to fix.

Coverage arithmetic (docs/dispatchers.md). EventBridge Scheduler starts the dispatcher every
``DISPATCH_PERIOD_MINUTES``, but even with its flexible window off it only promises to invoke
within about a minute of the scheduled instant. A run polls until its deadline less one
``DISPATCH_TIMEOUT_SECONDS`` (the worker never starts a batch that could outlive the deadline), so
runs overlap, and no instant is left without a polling dispatcher, when::

    RUN_SECONDS - DISPATCH_TIMEOUT_SECONDS >= DISPATCH_PERIOD_MINUTES * 60 + 60

and the function's ``Timeout`` is at least ``RUN_SECONDS + STOP_MARGIN_SECONDS`` plus the cold
start. Overlapping runs are safe: claims are conditional writes with leases. ``DISPATCH_MODE=on-demand``
(a run every minute) keeps the same inequality: a run stays while something is due before the
latest instant the next run may start, so ``RUN_SECONDS`` must let it stay that long and one
dispatch timeout more (``service.dispatcher.dispatcher_window``).

``DISPATCHER_SHARD_RANGES`` lists every dispatcher's shards (the template's
``DispatcherShardRanges``); each dispatcher checks at cold start that the ranges split the table's
shards, every shard in exactly one, and that its own ``DISPATCHER_SHARDS`` is one of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from hexeract_scheduler.domain.shards import check_partition, format_shards, parse_shard_ranges, parse_shards
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.errors import ConfigError
from hexeract_scheduler.service.bounds import BOUNDS, LAMBDA_MAX_SECONDS, SCHEDULER_DELIVERY_WINDOW_SECONDS, Bound

# How EventBridge Scheduler runs the dispatcher: always one polling (runs overlap), or a run every
# period that returns once nothing is due before the next (docs/dispatchers.md#dispatch-modes).
CONTINUOUS = "continuous"
ON_DEMAND = "on-demand"
DISPATCH_MODES = (CONTINUOUS, ON_DEMAND)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9 _./#:-]{1,255}$")
_NAME_TEXT = "3-255 letters, digits, '_', '.' or '-'"


def _integer(raw: str) -> int:
    return int(raw)  # ValueError for "1e20" and for numbers of more than 4300 digits


def _boolean(raw: str) -> bool:
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(raw)


def _period(raw: str) -> int | None:
    """Unset, ``none`` or ``off``: invoked by hand (tests, a one-off drain), no coverage check."""
    return None if raw.lower() in ("none", "off") else int(raw)


@dataclass(frozen=True)
class Variable:
    """One environment variable: the ``Settings`` field it sets, how its text is read (``read``
    raises ``ValueError``, or a ``ConfigError`` saying why, for a text it cannot read), the rule
    its value must meet (``bound``, ``choices`` or ``pattern``), and what the docs say of it."""

    env: str
    field: str
    parameter: str
    meaning: str
    read: Callable[[str], Any] = str
    bound: Bound | None = None
    choices: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    accepted_text: str = ""

    @property
    def accepted(self) -> str:
        """What the variable accepts, in words (the docs' ``accepted`` column and the errors)."""
        if self.bound is not None:
            return self.bound.describe()
        if self.choices:
            return " or ".join(self.choices) if len(self.choices) == 2 else f"one of {', '.join(self.choices)}"
        return self.accepted_text

    def problem(self, value: Any) -> str | None:
        """Why ``value`` breaks the variable's rule, or None."""
        if self.bound is not None and not self.bound.accepts(value):
            return f"expected {self.accepted}"
        if self.choices and value not in self.choices:
            return f"expected {self.accepted}"
        if self.pattern is not None and not (isinstance(value, str) and self.pattern.match(value)):
            return f"expected {self.accepted}"
        return None


def _numeric(env: str, name: str, parameter: str, meaning: str, read: Callable[[str], Any] = _integer) -> Variable:
    return Variable(env, name, parameter, meaning, read=read, bound=BOUNDS[name])


# The one list of variables, in the order of docs/configuration.md.
VARIABLES: tuple[Variable, ...] = (
    Variable("TABLE_NAME", "table_name", "(the table)", "the schedules table", pattern=_NAME, accepted_text=_NAME_TEXT),
    _numeric(
        "SHARD_COUNT", "shard_count", "ShardCount", "write shards of the due index, fixed at the table's first use"
    ),
    Variable(
        "DISPATCHER_SHARDS",
        "dispatcher_shards",
        "its entry of DispatcherShardRanges",
        "shards this dispatcher reads: all, 0-3, 0,2; one of DISPATCHER_SHARD_RANGES when that is set",
        read=parse_shards,
        accepted_text="all, or shard numbers below SHARD_COUNT",
    ),
    Variable(
        "DISPATCHER_SHARD_RANGES",
        "dispatcher_shard_ranges",
        "DispatcherShardRanges",
        "every dispatcher's range, checked at cold start: disjoint, covering every shard (empty: no check)",
        read=parse_shard_ranges,
        accepted_text="all, or up to 8 comma-separated N-M / N that split 0 to SHARD_COUNT - 1",
    ),
    _numeric(
        "LEASE_SECONDS",
        "lease_seconds",
        "LeaseSeconds",
        "lease of a claimed occurrence; >= BATCH_SIZE x DISPATCH_TIMEOUT_SECONDS",
    ),
    _numeric("BATCH_SIZE", "batch_size", "BatchSize", "occurrences claimed per batch"),
    _numeric(
        "RETRY_BASE_DELAY_MS", "retry_base_delay_ms", "RetryBaseDelayMs", "retry delay min(base x 2^attempts, max)"
    ),
    _numeric("RETRY_MAX_DELAY_MS", "retry_max_delay_ms", "RetryMaxDelayMs", "cap of the retry delay (>= the base)"),
    Variable("JITTER", "jitter", "Jitter", "full jitter on retry delays", read=_boolean, accepted_text="true or false"),
    _numeric(
        "DISPATCH_TIMEOUT_SECONDS",
        "dispatch_timeout_seconds",
        "DispatchTimeoutSeconds",
        "a batch not sent within this is a failed attempt; < RUN_SECONDS",
        read=float,
    ),
    _numeric("POLL_INTERVAL_MS", "poll_interval_ms", "PollIntervalMs", "look-ahead and longest idle sleep of a cycle"),
    _numeric("CONCURRENCY", "concurrency", "Concurrency", "threads for concurrent claims, sends and acks"),
    _numeric(
        "RUN_SECONDS",
        "run_seconds",
        "RunSeconds (continuous), 240 (on-demand)",
        "length of one dispatcher run (on-demand: its cap); with STOP_MARGIN_SECONDS at most 900",
        read=float,
    ),
    _numeric(
        "STOP_MARGIN_SECONDS",
        "stop_margin_seconds",
        "StopMarginSeconds",
        "kept back from the invocation's remaining time",
        read=float,
    ),
    _numeric(
        "DISPATCH_PERIOD_MINUTES",
        "dispatch_period_minutes",
        "DispatchPeriodMinutes (continuous), 1 (on-demand)",
        "the schedule's period, for the coverage check (none: no check, for a function invoked by hand; "
        "required on demand)",
        read=_period,
    ),
    Variable(
        "DISPATCH_MODE",
        "dispatch_mode",
        "DispatchMode",
        "continuous: some run always polling; on-demand: runs that return when nothing is due before the next",
        read=str.lower,
        choices=DISPATCH_MODES,
    ),
    Variable(
        "POWERTOOLS_SERVICE_NAME",
        "service_name",
        "ServiceName",
        "log field service, metric dimension service",
        pattern=_NAME,
        accepted_text=_NAME_TEXT,
    ),
    Variable(
        "POWERTOOLS_METRICS_NAMESPACE",
        "metrics_namespace",
        "MetricsNamespace",
        "CloudWatch namespace of the metrics",
        pattern=_NAMESPACE,
        accepted_text="a CloudWatch namespace",
    ),
    Variable("LOG_LEVEL", "log_level", "LogLevel", "the functions' log level", read=str.upper, choices=LOG_LEVELS),
)
BY_FIELD: dict[str, Variable] = {v.field: v for v in VARIABLES}
# Settings field -> the environment variable it is read from.
ENV_VARS: dict[str, str] = {v.field: v.env for v in VARIABLES}
# SchedulerWorkerConfig field -> the Settings field that feeds it (to name variables in its errors).
WORKER_FIELDS = {
    "lease": "lease_seconds",
    "batch_size": "batch_size",
    "retry_base_delay": "retry_base_delay_ms",
    "retry_max_delay": "retry_max_delay_ms",
    "dispatch_timeout": "dispatch_timeout_seconds",
    "poll_interval": "poll_interval_ms",
    "concurrency": "concurrency",
}


@dataclass(frozen=True)
class Settings:
    """The Lambda functions' configuration. Defaults suit a dispatcher started every 5 minutes.

    ``poll_interval_ms`` 1000 does not mean a second of latency: each cycle looks one poll interval
    ahead and sleeps only until the soonest due instant it saw. ``source`` keeps the text each
    variable was read from, so an error shows what was typed.
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
    source: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for var in VARIABLES:
            value = getattr(self, var.field)
            if value is None and var.field != "table_name":
                continue
            problem = var.problem(value)
            if problem is not None:
                shown = repr(self.source[var.env]) if var.env in self.source else repr(value)
                raise ConfigError(f"{var.env}: {problem}, got {shown}", var.env)
        self._check_shards()
        if self.dispatch_mode == ON_DEMAND and self.dispatch_period_minutes is None:
            raise ConfigError(
                "DISPATCH_PERIOD_MINUTES: required with DISPATCH_MODE=on-demand (a run stays until the next one "
                "starts; the template sets 1)",
                "DISPATCH_PERIOD_MINUTES",
                "DISPATCH_MODE",
            )
        if self.run_seconds + self.stop_margin_seconds > LAMBDA_MAX_SECONDS:
            raise ConfigError(
                f"RUN_SECONDS + STOP_MARGIN_SECONDS ({self.run_seconds:g} + {self.stop_margin_seconds:g}) "
                f"exceeds the Lambda maximum of {LAMBDA_MAX_SECONDS} s",
                "RUN_SECONDS",
                "STOP_MARGIN_SECONDS",
            )
        if self.run_seconds <= self.dispatch_timeout_seconds:
            raise ConfigError(
                f"RUN_SECONDS ({self.run_seconds:g}) must exceed DISPATCH_TIMEOUT_SECONDS "
                f"({self.dispatch_timeout_seconds:g}): a run polls until one dispatch timeout before its end",
                "RUN_SECONDS",
                "DISPATCH_TIMEOUT_SECONDS",
            )
        self._check_coverage()
        self.worker_config()  # the worker's own rules, at cold start

    def _check_shards(self) -> None:
        """The dispatchers' ranges split the shards (checked first: every dispatcher of a stack reports
        the same problem), this dispatcher's shards exist and are one of the ranges."""
        ranges, mine = self.dispatcher_shard_ranges, self.dispatcher_shards
        if ranges is not None:
            try:
                check_partition(ranges, self.shard_count)
            except ConfigError as exc:
                raise ConfigError(f"DISPATCHER_SHARD_RANGES: {exc}", "DISPATCHER_SHARD_RANGES", "SHARD_COUNT") from None
        if mine is not None:
            bad = [s for s in mine if s >= self.shard_count]
            if bad:
                raise ConfigError(
                    f"DISPATCHER_SHARDS: shards {bad} do not exist with SHARD_COUNT={self.shard_count} "
                    f"(0-{self.shard_count - 1})",
                    "DISPATCHER_SHARDS",
                    "SHARD_COUNT",
                )
        every = tuple(range(self.shard_count))  # the same as all
        if ranges is not None and mine is not None and mine not in ranges and not (ranges == (None,) and mine == every):
            listed = ", ".join("all" if r is None else format_shards(r) for r in ranges)
            raise ConfigError(
                f"DISPATCHER_SHARDS ({format_shards(mine)}) is not one of DISPATCHER_SHARD_RANGES ({listed})",
                "DISPATCHER_SHARDS",
                "DISPATCHER_SHARD_RANGES",
            )

    def _check_coverage(self) -> None:
        """Runs overlap (continuous), or a run can stay until the next starts (on demand)."""
        if self.dispatch_period_minutes is None:
            return
        needed = self.dispatch_period_minutes * 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS + self.dispatch_timeout_seconds
        if self.run_seconds < needed:
            why = (
                "an on-demand run could not stay until the next one starts"
                if self.on_demand
                else "it leaves gaps between dispatcher runs"
            )
            raise ConfigError(
                f"RUN_SECONDS ({self.run_seconds:g}) is too short, {why}: it must be >= "
                f"DISPATCH_PERIOD_MINUTES x 60 + {SCHEDULER_DELIVERY_WINDOW_SECONDS} + DISPATCH_TIMEOUT_SECONDS "
                f"= {needed:g}",
                "RUN_SECONDS",
                "DISPATCH_PERIOD_MINUTES",
                "DISPATCH_TIMEOUT_SECONDS",
            )

    @property
    def on_demand(self) -> bool:
        return self.dispatch_mode == ON_DEMAND

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every variable of :data:`VARIABLES` (absent or empty: the default), then check them."""
        values: dict[str, Any] = {}
        source: dict[str, str] = {}
        for var in VARIABLES:
            raw = environ.get(var.env, "").strip()
            if not raw:
                continue
            source[var.env] = raw
            try:
                values[var.field] = var.read(raw)
            except ConfigError as exc:  # a shard selection says what is wrong with it
                raise ConfigError(f"{var.env}: {exc}", var.env) from None
            except ValueError:
                raise ConfigError(f"{var.env}: expected {var.accepted}, got {raw!r}", var.env) from None
        if "table_name" not in values:
            raise ConfigError("TABLE_NAME: required (the schedules table's name)", "TABLE_NAME")
        if "DISPATCH_PERIOD_MINUTES" not in source:
            values["dispatch_period_minutes"] = None  # unset: invoked by hand, no coverage check
        return cls(**values, source=source)

    def worker_config(self) -> SchedulerWorkerConfig:
        """The worker's configuration; its errors name the variables to change."""
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
            named = tuple(BY_FIELD[WORKER_FIELDS[f]].env for f in exc.fields if f in WORKER_FIELDS)
            raise ConfigError(f"{', '.join(named) or 'worker settings'}: {exc}", *named) from None
