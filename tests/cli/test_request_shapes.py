"""The request-shape guard: every DynamoDB request of a whole lifecycle obeys DynamoDB's own rules.

Emulators skip rules that DynamoDB enforces (moto accepted an empty ``ExpressionAttributeNames``
that DynamoDB refuses, and cron schedules broke on AWS). This test records every DynamoDB request
the store, the worker, the CLI and the handlers' core make over one lifecycle (table create,
insert, a payload stored apart and read back, claim, failure and retry, reschedule, delivery,
dead-letter, replay, pause, resume, cancel, listings, inspect, the crash sweep) and checks each
one with ``tests/dynamo_rules.py``.
It lives beside the CLI tests for their ``hexeract`` fixture.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient

from hexeract_scheduler import ScheduledMessage, ScheduleStatus
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.service.dead_letter import handle_dead_letter
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED
from hexeract_scheduler.store.dynamo import DynamoScheduleStore

from ..conftest import Backend, Queue, make_worker
from ..support.dynamo_rules import check_request

S = timedelta(seconds=1)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every DynamoDB request made in this process while the test runs: (operation, parameters).

    Hooked below every client (``BaseClient._make_api_call``), so the clients the CLI and the
    handlers build for themselves are recorded too."""
    calls: list[tuple[str, dict[str, Any]]] = []
    real = BaseClient._make_api_call

    def recording(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            calls.append((operation_name, json.loads(json.dumps(api_params, default=_bytes))))
        return real(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    yield calls


def _bytes(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": len(value)}
    raise TypeError(type(value).__name__)


def _restore_bytes(value: Any) -> Any:
    """The checker sizes binary values: give it bytes of the recorded length back."""
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return b"x" * value["__bytes__"]
        return {k: _restore_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_bytes(v) for v in value]
    return value


def test_every_request_of_a_lifecycle_obeys_dynamodbs_rules(
    recorded, hexeract, backend: Backend, store: DynamoScheduleStore, clients, clock, queue: Queue
):
    broken = f"sqs:{backend.aws_url}/123456789012/missing-{uuid.uuid4().hex[:8]}"
    now = clock.now()
    one_shot = ScheduledMessage.delay(queue.target, at=now, payload='{"n": 1}', event_type="reminder")
    cron = ScheduledMessage.cron(queue.target, "* * * * * *", timezone="Europe/Paris")
    failing = ScheduledMessage.delay(broken, at=now, max_attempts=2)
    crashed = ScheduledMessage.delay(queue.target, at=now, max_attempts=1)
    large = ScheduledMessage.delay(queue.target, at=now, payload=json.dumps({"blob": "x" * 64 * 1024}))
    for message in (one_shot, cron, failing, large):
        store.insert(message, now)
    worker = make_worker(
        store, clients, clock, retry_base_delay=S, retry_max_delay=10 * S, lease=30 * S, dispatch_timeout=S
    )

    # claim, deliver the one-shots (one with its payload stored apart), fail with budget left (a retry 2 s later)
    first = worker.run_once()
    assert (first.claimed, first.dispatched, first.retried) == (3, 2, 1)
    # the cron's first instant (reschedule) and the retry, whose last attempt fails (dead-letter)
    clock.advance(2)
    second = worker.run_once()
    assert (second.claimed, second.dispatched, second.dead_lettered) == (2, 1, 1)
    # a claim whose worker "crashes" before the ack, with its budget spent: swept when the lease ends
    store.insert(crashed, clock.now())
    leased = store.claim(crashed.schedule_id, clock.now(), worker.config.lease)
    assert isinstance(leased, LeasedOccurrence) and leased.attempt == 1
    clock.advance(31)
    assert worker.run_once().swept == 1
    assert store.inspect(crashed.schedule_id).last_error == CRASH_EXHAUSTED

    # the CLI: listings, inspect, pause, resume, cancel, dead-letter list and replay
    def cli(*args: str) -> str:
        result = hexeract("scheduler", *args)
        assert result.exit_code == 0, result.output
        return result.output

    assert str(cron.schedule_id) in cli("list", "--format", "json")
    assert str(cron.schedule_id) in cli("inspect", str(cron.schedule_id))
    cli("pause", str(cron.schedule_id))
    clock.advance(5)
    cli("resume", str(cron.schedule_id))
    assert str(failing.schedule_id) in cli("dead-letter", "list", "--format", "json")
    cli("dead-letter", "replay", str(failing.schedule_id))
    cli("cancel", str(cron.schedule_id))
    # the dead-letter function's core (the handler builds its store as the CLI does): list, replay
    assert handle_dead_letter(store, clock, {"action": "list", "limit": 5})["items"]
    handle_dead_letter(store, clock, {"action": "replay", "schedule_id": str(crashed.schedule_id)})
    assert store.inspect(crashed.schedule_id).status is ScheduleStatus.PENDING

    payload_key = f"{large.schedule_id}#payload"
    assert any(op == "PutItem" and p["Item"]["schedule_id"]["S"] == payload_key for op, p in recorded)
    payload_reads = [p for op, p in recorded if op == "BatchGetItem" and payload_key in json.dumps(p)]
    assert len(payload_reads) == 1  # the claimed batch's payloads, in one request
    operations = Counter(op for op, _ in recorded)
    for op in ("CreateTable", "DescribeTable", "PutItem", "GetItem", "UpdateItem", "Query", "BatchGetItem"):
        assert operations[op] > 0, f"the lifecycle made no {op}"
    violations = [
        f"{op} {params.get('UpdateExpression') or params.get('KeyConditionExpression') or ''}: {problem}"
        for op, params in recorded
        for problem in check_request(op, _restore_bytes(params))
    ]
    assert violations == [], "\n".join(violations)


def test_the_guard_catches_the_request_that_broke_cron_on_dynamodb():
    """The historical bug, as the store used to send it: an empty ExpressionAttributeNames."""
    request = {
        "TableName": "schedules",
        "Key": {"schedule_id": {"S": str(uuid.uuid4())}},
        "UpdateExpression": "SET scheduled_for = :next, due_at = :next, attempts = :zero "
        "REMOVE leased_until, lease_token, last_error",
        "ConditionExpression": "lease_token = :tok",
        "ExpressionAttributeNames": {},
        "ExpressionAttributeValues": {":next": {"N": "1"}, ":zero": {"N": "0"}, ":tok": {"S": "t"}},
    }
    assert any("ExpressionAttributeNames" in p for p in check_request("UpdateItem", request))
