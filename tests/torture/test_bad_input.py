"""Malformed input to the library: each case raises a clear, typed error and leaves the table as it was.

The CLI and the Lambda handlers map these errors to exit codes and FunctionError; their own edges
are covered by tests/cli and tests/functional.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from hexeract_scheduler import (
    ConfigError,
    InvalidCron,
    InvalidInput,
    InvalidTarget,
    NotReplayable,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerWorkerConfig,
    Trigger,
)
from hexeract_scheduler.domain.clock import ManualClock
from hexeract_scheduler.domain.model import MAX_PAYLOAD_BYTES
from hexeract_scheduler.store.dynamo import DynamoScheduleStore

from ..conftest import Queue

QURL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
UNKNOWN = "0190f5b2-0000-7000-8000-000000000000"
Case = Callable[[DynamoScheduleStore, Queue, datetime, str], Any]


def _insert(store: DynamoScheduleStore, now: datetime, **kw: Any) -> Any:
    return store.insert(ScheduledMessage(**kw), now)


def _cron(expr: str, tz: str | None = None) -> Case:
    return lambda store, q, now, pending: store.insert(ScheduledMessage.cron(q.target, expr, timezone=tz), now)


def _target(text: str) -> Case:
    return lambda store, q, now, pending: store.insert(ScheduledMessage.delay(text, at=now), now)


def _delay(**kw: Any) -> Case:
    return lambda store, q, now, pending: store.insert(ScheduledMessage.delay(q.target, at=now, **kw), now)


def _config(**kw: Any) -> Case:
    return lambda store, q, now, pending: SchedulerWorkerConfig(**kw)


CASES: list[tuple[str, Case, type[Exception], str]] = [
    ("cron: words", _cron("every five minutes"), InvalidCron, "invalid cron"),
    ("cron: 3 fields", _cron("* * *"), InvalidCron, "expected 5 fields"),
    ("cron: minute 61", _cron("61 * * * *"), InvalidCron, "invalid cron"),
    ("cron: unknown macro", _cron("@every"), InvalidCron, "unknown macro"),
    ("cron: 30 February", _cron("0 0 30 2 *"), InvalidCron, "never fires"),
    ("cron: empty", _cron(""), InvalidCron, "invalid cron"),
    ("zone: unknown", _cron("* * * * *", "Mars/Olympus"), InvalidCron, "unknown time zone"),
    ("zone: path", _cron("* * * * *", "../../etc/passwd"), InvalidCron, "unknown time zone"),
    ("target: no kind", _target(QURL), InvalidTarget, "expected sqs:"),
    ("target: kafka", _target("kafka:orders"), InvalidTarget, "expected sqs:"),
    ("target: sqs not a URL", _target("sqs:orders"), InvalidTarget, "SQS queue URL or ARN"),
    (
        "target: sns with an SQS ARN",
        _target("sns:arn:aws:sqs:us-east-1:123456789012:q"),
        InvalidTarget,
        "SNS topic ARN",
    ),
    ("target: group on a standard queue", _target(f"sqs:{QURL}?group=g"), InvalidTarget, "not FIFO"),
    ("target: unknown option", _target(f"sqs:{QURL}.fifo?grp=g"), InvalidTarget, "only option"),
    ("payload: oversized", _delay(payload=b"x" * (MAX_PAYLOAD_BYTES + 1)), InvalidInput, "limit"),
    ("payload: empty", _delay(payload=b""), InvalidInput, "must not be empty"),
    ("payload: not UTF-8", _delay(payload=b"\xff\xfe"), InvalidInput, "UTF-8"),
    ("payload: NUL", _delay(payload="a\x00b"), InvalidInput, "control character"),
    ("max_attempts: 0", _delay(max_attempts=0), InvalidInput, "max_attempts"),
    ("max_attempts: -1", _delay(max_attempts=-1), InvalidInput, "max_attempts"),
    ("max_attempts: True", _delay(max_attempts=True), InvalidInput, "max_attempts"),
    ("event type: empty", _delay(event_type=""), InvalidInput, "event type"),
    (
        "instant without zone",
        lambda s, q, now, p: s.insert(ScheduledMessage.delay(q.target, at=datetime(2030, 1, 1)), now),
        InvalidInput,
        "time zone",
    ),
    ("id: garbage (inspect)", lambda s, q, now, p: s.inspect("not-a-uuid"), InvalidInput, "malformed schedule id"),
    ("id: garbage (pause)", lambda s, q, now, p: s.pause("12345"), InvalidInput, "malformed schedule id"),
    ("id: garbage (cancel)", lambda s, q, now, p: s.cancel(""), InvalidInput, "malformed schedule id"),
    ("id: garbage (replay)", lambda s, q, now, p: s.replay("zz", now), InvalidInput, "malformed schedule id"),
    ("id: unknown (pause)", lambda s, q, now, p: s.pause(UNKNOWN), ScheduleNotFound, "not found"),
    ("id: unknown (resume)", lambda s, q, now, p: s.resume(UNKNOWN, now), ScheduleNotFound, "not found"),
    ("id: unknown (cancel)", lambda s, q, now, p: s.cancel(UNKNOWN), ScheduleNotFound, "not found"),
    ("id: unknown (replay)", lambda s, q, now, p: s.replay(UNKNOWN, now), ScheduleNotFound, "not found"),
    ("replay: not dead-lettered", lambda s, q, now, p: s.replay(p, now), NotReplayable, "nothing to replay"),
    (
        "id: duplicate insert",
        lambda s, q, now, p: _insert(s, now, target=q.target, trigger=Trigger(at=now), schedule_id=uuid.UUID(p)),
        InvalidInput,
        "already exists",
    ),
    ("limit: 0", lambda s, q, now, p: s.list_pending(0), InvalidInput, "limit"),
    ("limit: -5", lambda s, q, now, p: s.list_dead_letter(-5), InvalidInput, "limit"),
    (
        "shards: 0",
        lambda s, q, now, p: DynamoScheduleStore(s.table_name, dynamodb=s.client, shards=0),
        ConfigError,
        "shard",
    ),
    ("shards: 300", lambda s, q, now, p: s.create_table(shards=300), ConfigError, "shard count"),
    ("config: batch_size 0", _config(batch_size=0), ConfigError, "batch_size"),
    ("config: batch_size -1", _config(batch_size=-1), ConfigError, "batch_size"),
    ("config: lease 0", _config(lease=timedelta(0)), ConfigError, "lease must be non-zero"),
    ("config: negative poll", _config(poll_interval=timedelta(seconds=-1)), ConfigError, "must not be negative"),
    ("config: zero dispatch_timeout", _config(dispatch_timeout=timedelta(0)), ConfigError, "non-zero"),
    (
        "config: max delay < base",
        _config(retry_base_delay=timedelta(seconds=10), retry_max_delay=timedelta(seconds=1)),
        ConfigError,
        "retry_max_delay",
    ),
    ("config: lease < batch", _config(lease=timedelta(seconds=10)), ConfigError, "must cover a whole batch"),
    ("config: concurrency 0", _config(concurrency=0), ConfigError, "concurrency"),
    (
        "store: empty shard selection",
        lambda s, q, now, p: DynamoScheduleStore(s.table_name, dynamodb=s.client, read_shards=()),
        ConfigError,
        "read_shards",
    ),
    (
        "store: negative shard",
        lambda s, q, now, p: DynamoScheduleStore(s.table_name, dynamodb=s.client, read_shards=(-1,)),
        ConfigError,
        "read_shards",
    ),
]


def _table(store: DynamoScheduleStore) -> list[dict[str, Any]]:
    items = store.client.scan(TableName=store.table_name, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda i: i["schedule_id"]["S"])


@pytest.mark.parametrize(("name", "case", "error", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(
    store: DynamoScheduleStore,
    queue: Queue,
    clock: ManualClock,
    name: str,
    case: Case,
    error: type[Exception],
    match: str,
) -> None:
    now = clock.now()
    pending = store.insert(ScheduledMessage.delay(queue.target, at=now + timedelta(minutes=5)), now)
    store.insert(ScheduledMessage.cron(queue.target, "*/5 * * * *"), now)
    before = _table(store)
    with pytest.raises(error, match=match) as info:
        case(store, queue, now, str(pending.schedule_id))
    # One line, no traceback text, no botocore class names leaking through.
    message = str(info.value)
    assert "\n" not in message and "botocore" not in message and "Traceback" not in message
    assert _table(store) == before, f"{name}: the table changed"
