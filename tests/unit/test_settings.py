"""Settings.from_env: every numeric variable has an upper bound, and a value past it is refused by name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hexeract_scheduler.errors import ConfigError
from hexeract_scheduler.service.bounds import (
    BOUNDS,
    LAMBDA_MAX_SECONDS,
    MAX_BATCH_SIZE,
    MAX_CONCURRENCY,
    MAX_DISPATCH_PERIOD_MINUTES,
    MAX_LEASE_SECONDS,
    MAX_POLL_INTERVAL_MS,
    MAX_RETRY_DELAY_MS,
    SCHEDULER_DELIVERY_WINDOW_SECONDS,
)
from hexeract_scheduler.service.settings import ENV_VARS, VARIABLES, Settings

from ..support.limits import memory_headroom

BASE = {"TABLE_NAME": "schedules", "DISPATCH_PERIOD_MINUTES": "none"}
HUGE = str(10**20)


def refused(env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({**BASE, **env})
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("var", "raw", "expected"),
    [
        ("LEASE_SECONDS", "1e20", "an integer from 1 to 43200"),
        ("LEASE_SECONDS", HUGE, "an integer from 1 to 43200"),
        ("LEASE_SECONDS", "43201", "an integer from 1 to 43200"),
        ("POLL_INTERVAL_MS", "1e17", "an integer from 1 to 60000"),
        ("POLL_INTERVAL_MS", str(10**17), "an integer from 1 to 60000"),
        ("POLL_INTERVAL_MS", "60001", "an integer from 1 to 60000"),
        ("RETRY_BASE_DELAY_MS", "1e17", "an integer from 1 to 86400000"),
        ("RETRY_BASE_DELAY_MS", str(10**17), "an integer from 1 to 86400000"),
        ("RETRY_MAX_DELAY_MS", "1e17", "an integer from 1 to 86400000"),
        ("RETRY_MAX_DELAY_MS", str(10**17), "an integer from 1 to 86400000"),
        ("RETRY_MAX_DELAY_MS", "86400001", "an integer from 1 to 86400000"),
        ("BATCH_SIZE", "1e13", "an integer from 1 to 1000"),
        ("BATCH_SIZE", str(10**13), "an integer from 1 to 1000"),
        ("BATCH_SIZE", "1001", "an integer from 1 to 1000"),
        ("CONCURRENCY", "257", "an integer from 1 to 256"),
        ("CONCURRENCY", HUGE, "an integer from 1 to 256"),
        ("SHARD_COUNT", HUGE, "an integer from 1 to 256"),
        ("DISPATCH_TIMEOUT_SECONDS", "1e20", "a number of seconds > 0 and <= 900"),
        ("DISPATCH_TIMEOUT_SECONDS", "1e300", "a number of seconds > 0 and <= 900"),
        ("DISPATCH_TIMEOUT_SECONDS", "901", "a number of seconds > 0 and <= 900"),
        ("DISPATCH_TIMEOUT_SECONDS", "nan", "a number of seconds > 0 and <= 900"),
        ("DISPATCH_TIMEOUT_SECONDS", "inf", "a number of seconds > 0 and <= 900"),
        ("RUN_SECONDS", "1e300", "a number of seconds > 0 and <= 900"),
        ("STOP_MARGIN_SECONDS", "1e300", "a number of seconds from 0 to 900"),
        ("DISPATCH_PERIOD_MINUTES", "14", "an integer from 1 to 13"),
        # int * 60 + a float: "int too large to convert to float" before the bound.
        ("DISPATCH_PERIOD_MINUTES", "9" * 400, "an integer from 1 to 13"),
    ],
)
def test_a_number_past_its_bound_is_refused_naming_the_variable_and_the_value(var, raw, expected):
    assert refused({var: raw}) == f"{var}: expected {expected}, got {raw!r}"


@pytest.mark.parametrize("raw", ["0-300000000", "0-3,300", "256", "0-256"])
def test_dispatcher_shards_past_the_most_shards_are_refused_before_any_allocation(raw):
    with memory_headroom():  # the old parser built the whole range first: 300 million numbers
        message = refused({"DISPATCHER_SHARDS": raw, "SHARD_COUNT": "256"})
    assert message.startswith(f"DISPATCHER_SHARDS: invalid shard range {raw!r}: shard ")
    assert "out of range (shard numbers are 0 to 255)" in message


def test_dispatcher_shards_must_not_run_backwards():
    assert (
        refused({"DISPATCHER_SHARDS": "3-1"})
        == "DISPATCHER_SHARDS: invalid shard range '3-1': 3-1 ends before it starts"
    )


def test_every_bound_is_accepted_at_its_maximum():
    period = MAX_DISPATCH_PERIOD_MINUTES
    settings = Settings.from_env(
        {
            "TABLE_NAME": "schedules",
            "SHARD_COUNT": "256",
            "DISPATCHER_SHARDS": "0-255",
            "LEASE_SECONDS": str(MAX_LEASE_SECONDS),
            "BATCH_SIZE": str(MAX_BATCH_SIZE),
            "RETRY_BASE_DELAY_MS": str(MAX_RETRY_DELAY_MS),
            "RETRY_MAX_DELAY_MS": str(MAX_RETRY_DELAY_MS),
            "POLL_INTERVAL_MS": str(MAX_POLL_INTERVAL_MS),
            "CONCURRENCY": str(MAX_CONCURRENCY),
            "DISPATCH_TIMEOUT_SECONDS": "10",
            "DISPATCH_PERIOD_MINUTES": str(period),
            "RUN_SECONDS": str(period * 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS + 10),
            "STOP_MARGIN_SECONDS": "15",
        }
    )
    config = settings.worker_config()
    assert config.lease == timedelta(hours=12)
    assert config.retry_max_delay == timedelta(days=1)
    assert config.poll_interval == timedelta(minutes=1)
    assert settings.dispatcher_shards == tuple(range(256))
    # A period one minute longer can never be covered by a run within the Lambda maximum.
    assert (period + 1) * 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS >= LAMBDA_MAX_SECONDS
    assert refused({"SHARD_COUNT": "0"}) == "SHARD_COUNT: expected an integer from 1 to 256, got '0'"
    assert refused({"LEASE_SECONDS": "five"}) == "LEASE_SECONDS: expected an integer from 1 to 43200, got 'five'"


def test_the_bounds_hold_for_settings_built_in_code_too():
    with pytest.raises(ConfigError, match=r"^LEASE_SECONDS: expected an integer from 1 to 43200, got 10{20}$"):
        Settings(table_name="schedules", lease_seconds=10**20)
    with pytest.raises(ConfigError, match=r"^RUN_SECONDS: expected a number of seconds > 0 and <= 900, got nan$"):
        Settings(table_name="schedules", run_seconds=float("nan"))
    with pytest.raises(ConfigError, match=r"^BATCH_SIZE: .* got True$"):
        Settings(table_name="schedules", batch_size=True)  # type: ignore[arg-type]


def test_every_numeric_variable_has_a_bound():
    numeric = {
        field
        for field, default in Settings.__dataclass_fields__.items()
        if default.type in ("int", "float", "int | None")
    }
    assert numeric == set(BOUNDS)
    assert set(BOUNDS) <= set(ENV_VARS)


@pytest.mark.parametrize(
    ("env", "fields"),
    [
        ({"LEASE_SECONDS": "five"}, ("LEASE_SECONDS",)),
        ({"DISPATCH_MODE": "sometimes"}, ("DISPATCH_MODE",)),
        ({"DISPATCHER_SHARDS": "3-1"}, ("DISPATCHER_SHARDS",)),
        ({"DISPATCHER_SHARDS": "0-9"}, ("DISPATCHER_SHARDS", "SHARD_COUNT")),
        ({"LEASE_SECONDS": "4", "BATCH_SIZE": "10"}, ("LEASE_SECONDS", "BATCH_SIZE", "DISPATCH_TIMEOUT_SECONDS")),
        ({"RETRY_BASE_DELAY_MS": "5000", "RETRY_MAX_DELAY_MS": "1000"}, ("RETRY_MAX_DELAY_MS", "RETRY_BASE_DELAY_MS")),
        (
            {"DISPATCH_PERIOD_MINUTES": "5", "RUN_SECONDS": "300"},
            ("RUN_SECONDS", "DISPATCH_PERIOD_MINUTES", "DISPATCH_TIMEOUT_SECONDS"),
        ),
    ],
)
def test_a_configuration_error_names_its_variables_as_fields_not_only_in_its_message(env, fields):
    with pytest.raises(ConfigError) as info:
        Settings.from_env({**BASE, **env})
    assert (info.value.field, info.value.fields) == (fields[0], fields)
    assert str(info.value).startswith(fields[0])


def test_one_table_lists_every_variable_and_from_env_reads_no_other():
    class Recording(dict):
        def get(self, key, default=None):
            asked.append(key)
            return super().get(key, default)

    asked: list[str] = []
    Settings.from_env(Recording(BASE))
    assert asked == [v.env for v in VARIABLES]
    assert [v.field for v in VARIABLES] == [f for f in Settings.__dataclass_fields__ if f != "source"]


@pytest.mark.parametrize("var", VARIABLES, ids=lambda v: v.env)
def test_every_variable_says_what_it_accepts_and_means(var):
    assert var.accepted and var.meaning and var.parameter
