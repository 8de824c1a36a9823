from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from hexeract_scheduler import (
    ConfigError,
    InvalidCron,
    InvalidInput,
    InvalidTarget,
    ScheduledMessage,
    SchedulerWorkerConfig,
    Target,
    retry_delay,
)
from hexeract_scheduler.domain.clock import UTC, rfc3339, to_ms
from hexeract_scheduler.domain.model import MAX_PAYLOAD_BYTES, parse_schedule_id
from hexeract_scheduler.domain.shards import parse_shards

Q = "sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "kind", "fifo", "region"),
    [
        (Q, "sqs", False, "eu-west-1"),
        ("sqs:arn:aws:sqs:us-east-1:123456789012:jobs.fifo", "sqs", True, "us-east-1"),
        ("sqs:http://127.0.0.1:5000/123456789012/local", "sqs", False, None),
        ("sns:arn:aws:sns:us-west-2:123456789012:alerts", "sns", False, "us-west-2"),
        ("sns:arn:aws:sns:us-west-2:123456789012:alerts.fifo?group=tenant-7", "sns", True, "us-west-2"),
    ],
)
def test_targets(text, kind, fifo, region):
    t = Target.parse(text)
    assert (t.kind, t.is_fifo, t.region) == (kind, fifo, region)
    assert Target.parse(str(t)) == t


@pytest.mark.parametrize(
    "bad",
    [
        "orders",
        "http://x/123/q",
        "sqs:",
        "sqs:not a url",
        "sns:https://sns.amazonaws.com/topic",
        "sqs:arn:aws:sns:us-east-1:123456789012:topic",
        "sqs:arn:aws:sqs:us-east-1:12345:short-account",
        "kafka:arn:aws:sqs:us-east-1:123456789012:q",
        "sqs:arn:aws:sqs:us-east-1:123456789012:q?group=g",  # group on a standard queue
        "sqs:arn:aws:sqs:us-east-1:123456789012:q.fifo?grp=g",
    ],
)
def test_bad_targets(bad):
    with pytest.raises(InvalidTarget):
        Target.parse(bad)


def test_schedule_ids_are_uuid_v7_and_instants_are_kept_to_the_millisecond():
    m = ScheduledMessage.delay(Q, at=NOW + timedelta(microseconds=1_234_567))
    assert m.schedule_id.version == 7
    assert m.trigger.at == NOW + timedelta(milliseconds=1234)
    assert rfc3339(m.trigger.at) == "2026-12-02T10:00:01.234Z"
    assert to_ms(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == -1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"payload": b"\xff\xfe"}, "UTF-8"),
        ({"payload": "x" * (MAX_PAYLOAD_BYTES + 1)}, "limit"),
        ({"payload": "bell\x07"}, "control character"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"event_type": ""}, "event type"),
    ],
)
def test_bad_messages_are_refused_at_construction(kwargs, error):
    with pytest.raises(InvalidInput, match=error):
        ScheduledMessage.delay(Q, at=NOW, **kwargs)


def test_payload_at_the_limit_is_accepted_byte_for_byte():
    body = "é" * (MAX_PAYLOAD_BYTES // 2)
    assert ScheduledMessage.delay(Q, at=NOW, payload=body).payload == body.encode()


def test_bad_triggers():
    with pytest.raises(InvalidInput, match="time zone"):
        ScheduledMessage.delay(Q, at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInput):
        ScheduledMessage.delay(Q, at=NOW, after=timedelta(seconds=1), now=NOW)
    with pytest.raises(InvalidCron):
        ScheduledMessage.cron(Q, "every minute")
    with pytest.raises(InvalidCron):
        ScheduledMessage.cron(Q, "* * * * *", timezone="Nowhere/City")


@pytest.mark.parametrize("bad", ["", "42", "not-a-uuid", "0192f0a4-7b1c-7d3e-8a5b-2c4d6e8f0a1"])
def test_malformed_schedule_ids(bad):
    with pytest.raises(InvalidInput, match="malformed schedule id"):
        parse_schedule_id(bad)
    assert parse_schedule_id(" 0192f0a4-7b1c-7d3e-8a5b-2c4d6e8f0a1b ") == uuid.UUID(
        "0192f0a4-7b1c-7d3e-8a5b-2c4d6e8f0a1b"
    )


def test_hexeract_defaults():
    c = SchedulerWorkerConfig()
    assert c.poll_interval == timedelta(milliseconds=100)
    assert (c.batch_size, c.jitter) == (10, True)
    assert c.lease == timedelta(seconds=300)
    assert (c.retry_base_delay, c.retry_max_delay) == (timedelta(seconds=1), timedelta(seconds=300))
    assert c.min_cycle_delay == timedelta(milliseconds=5)
    assert c.dispatch_timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"poll_interval": timedelta(0)}, "poll_interval must be non-zero"),
        ({"lease": timedelta(0)}, "lease must be non-zero"),
        ({"retry_base_delay": timedelta(0)}, "retry_base_delay must be non-zero"),
        ({"dispatch_timeout": timedelta(0)}, "dispatch_timeout must be non-zero"),
        ({"min_cycle_delay": timedelta(milliseconds=-1)}, "must not be negative"),
        ({"retry_base_delay": timedelta(seconds=10), "retry_max_delay": timedelta(seconds=5)}, "retry_max_delay"),
        ({"lease": timedelta(seconds=299)}, "cover a whole batch"),
        ({"batch_size": 11}, "cover a whole batch"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_incoherent_configs_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SchedulerWorkerConfig(**kwargs)


def test_zero_min_cycle_delay_is_allowed():
    assert SchedulerWorkerConfig(min_cycle_delay=timedelta(0)).min_cycle_delay == timedelta(0)


def test_backoff_without_jitter_doubles_and_caps():
    c = SchedulerWorkerConfig(
        jitter=False, retry_base_delay=timedelta(seconds=1), retry_max_delay=timedelta(seconds=60)
    )
    assert [retry_delay(a, c).total_seconds() for a in (0, 1, 2, 5, 6, 7, 500)] == [1, 2, 4, 32, 60, 60, 60]


def test_backoff_full_jitter_is_uniform_below_the_cap():
    import random

    c = SchedulerWorkerConfig(retry_base_delay=timedelta(seconds=1), retry_max_delay=timedelta(seconds=60))
    rng = random.Random(1)
    samples = [retry_delay(3, c, rng).total_seconds() for _ in range(2000)]
    assert 0 <= min(samples) < 0.5 and 7.5 < max(samples) <= 8
    assert 3.5 < sum(samples) / len(samples) < 4.5


@pytest.mark.parametrize(("text", "shards"), [("all", None), ("", None), ("0-3", (0, 1, 2, 3)), ("5,1,1", (1, 5))])
def test_shard_ranges(text, shards):
    assert parse_shards(text) == shards


@pytest.mark.parametrize("bad", ["x", "3-", "-1", "1,,2"])
def test_bad_shard_ranges(bad):
    with pytest.raises(ConfigError):
        parse_shards(bad)
