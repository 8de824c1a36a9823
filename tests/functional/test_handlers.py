"""The Lambda handlers, driven with the events/*.json files against the moto server.

The handler modules build their state (settings, clients, store, worker) at import, as on a cold
start; each test sets the environment and (re)imports the module, so the handler under test is
built from exactly that environment. ``AWS_ENDPOINT_URL`` points its boto3 clients at moto.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from aws_lambda_powertools import Logger

from hexeract_scheduler import ScheduledMessage, ScheduleStatus
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.errors import ConfigError, HexeractError, NotReplayable, ScheduleNotFound
from hexeract_scheduler.service.dead_letter import InvalidRequest
from hexeract_scheduler.service.settings import ENV_VARS

from ..conftest import Backend, make_worker
from ..support.faultproxy import fault_proxy

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SERVICE = "hexeract-handler-tests"
NAMESPACE = "HexeractTests"
SUMMARY_KEYS = {
    "claimed",
    "dispatched",
    "rescheduled",
    "retried",
    "dead_lettered",
    "swept",
    "lease_lost",
    "skipped",
    "failed_cycles",
    "quarantined",
    "unreadable",
}

# Powertools keeps the first Logger configured for a service name, with the stream that was
# sys.stdout then. Configure it here, outside any per-test capture, so no test leaves it a stream
# that pytest closes afterwards.
Logger(service=SERVICE)


def event(name: str, **substitute: Any) -> Any:
    data = json.loads((EVENTS / name).read_text())
    data.update(substitute)
    return data


class FakeContext:
    """A Lambda context whose remaining time runs down with the real clock."""

    function_name = "hexeract-test-function"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:hexeract-test-function"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    log_group_name = "/hexeract/test"
    log_stream_name = "test"

    def __init__(self, remaining_ms: int) -> None:
        self._ends = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._ends - time.monotonic()) * 1000), 0)


@pytest.fixture(autouse=True)
def _restore_core_logger() -> Iterator[None]:
    """The handlers give the core logger Powertools' handler and stop it propagating: undo that,
    so other tests' caplog still sees the core's records."""
    core = logging.getLogger("hexeract_scheduler")
    saved = (list(core.handlers), core.propagate, core.level)
    yield
    core.handlers[:], core.propagate = saved[0], saved[1]
    core.setLevel(saved[2])


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> Iterator[Any]:
    """``load("dispatcher", store.table_name, RUN_SECONDS="2")``: the handler module, cold-started
    with that table, this run's endpoints and these variables on top of fast test defaults."""
    loaded: list[ModuleType] = []

    def _load(function: str, table: str, *, dynamodb_url: str | None = None, **env: str) -> ModuleType:
        base = {
            "TABLE_NAME": table,
            "SHARD_COUNT": "4",
            "DISPATCHER_SHARDS": "all",
            "DISPATCHER_SHARD_RANGES": "",
            "LEASE_SECONDS": "30",
            "BATCH_SIZE": "10",
            "RETRY_BASE_DELAY_MS": "1000",
            "RETRY_MAX_DELAY_MS": "60000",
            "JITTER": "false",
            "DISPATCH_TIMEOUT_SECONDS": "1",
            "POLL_INTERVAL_MS": "100",
            "CONCURRENCY": "8",
            "RUN_SECONDS": "2",
            "STOP_MARGIN_SECONDS": "0.2",
            "DISPATCH_PERIOD_MINUTES": "",  # invoked by hand: no coverage requirement
            "DISPATCH_MODE": "continuous",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            "LOG_LEVEL": "INFO",
        }
        base.update(env)
        assert set(base) == set(ENV_VARS.values())
        for var, value in base.items():
            monkeypatch.setenv(var, value)
        for var, value in backend.env.items():
            monkeypatch.setenv(var, value)
        if dynamodb_url is not None:  # e.g. a fault-injecting proxy in front of the backend
            monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_url)
        name = f"functions.{function}.app"
        module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
        loaded.append(module)
        return module

    yield _load
    for module in loaded:
        worker = getattr(module, "worker", None)
        if worker is not None:
            worker.close()


def table_items(clients: Any, store: Any) -> list[dict[str, Any]]:
    items = clients.dynamodb().scan(TableName=store.table_name, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda i: i["schedule_id"]["S"])


def emf_records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]


def values(records: list[dict[str, Any]], metric: str) -> list[float]:
    """Every value of ``metric`` over the EMF records (Powertools writes a list per metric)."""
    out: list[float] = []
    for r in records:
        v = r.get(metric, [])
        out += v if isinstance(v, list) else [v]
    return out


# -- dispatcher --------------------------------------------------------------------------------


def test_dispatcher_delivers_due_schedules_and_returns_its_summary(load, store, queue, capsys):
    app = load("dispatcher", store.table_name)
    now = datetime.now(UTC)
    due = ScheduledMessage.delay(queue.target, at=now, payload='{"n":1}')
    soon = ScheduledMessage.delay(queue.target, at=now + timedelta(milliseconds=400), payload='{"n":2}')
    later = ScheduledMessage.delay(queue.target, at=now + timedelta(hours=1), payload='{"n":3}')
    for msg in (due, soon, later):
        store.insert(msg, now)

    started = time.monotonic()
    result = app.lambda_handler(event("dispatcher.json"), FakeContext(60_000))
    elapsed = time.monotonic() - started

    assert set(result) == SUMMARY_KEYS
    assert result["claimed"] == 2 and result["dispatched"] == 2, result
    assert result["retried"] == result["dead_lettered"] == result["swept"] == result["lease_lost"] == 0
    assert elapsed < 2 + 1.0  # RUN_SECONDS, not the 60 s the invocation had left
    bodies = sorted(m["Body"] for m in queue.receive_all())
    assert bodies == ['{"n":1}', '{"n":2}']
    assert store.inspect(due.schedule_id).status is ScheduleStatus.DELIVERED
    assert store.inspect(soon.schedule_id).status is ScheduleStatus.DELIVERED
    assert store.inspect(later.schedule_id).status is ScheduleStatus.PENDING

    records = emf_records(capsys.readouterr().out)
    assert records, "no EMF metrics printed"
    assert all(r["_aws"]["CloudWatchMetrics"][0]["Namespace"] == NAMESPACE for r in records)
    assert sum(values(records, "Dispatched")) == 2
    lags = values(records, "DispatchLagMs")
    # Delivered within about a second of being due (docs/contracts.md#lambda-functions), not at the next run.
    assert len(lags) == 2 and max(lags) < 1500, lags
    assert len(values(records, "InvocationDelayMs")) == 1  # from the sample event's scheduled_time
    assert all(r["service"] == SERVICE for r in records)


def test_dispatcher_stops_before_the_remaining_time_runs_out(load, store, queue):
    store.insert(ScheduledMessage.delay(queue.target, at=datetime.now(UTC), payload="{}"), datetime.now(UTC))
    app = load("dispatcher", store.table_name, RUN_SECONDS="60", STOP_MARGIN_SECONDS="0.3")

    context = FakeContext(3_000)
    started = time.monotonic()
    result = app.lambda_handler(event("dispatcher.json"), context)
    elapsed = time.monotonic() - started

    assert result["dispatched"] == 1
    assert context.get_remaining_time_in_millis() > 0, f"ran {elapsed:.2f}s of a 3s invocation"
    assert elapsed >= 1.0  # it did poll: until the deadline (2.7 s) less one dispatch timeout (1 s)


def test_a_hung_dynamodb_cannot_hold_the_dispatcher_past_its_stop_margin(load, store, queue, backend):
    """DynamoDB accepts connections and never answers: the run still returns within its stop
    margin (not after 30 s read timeouts x retries), so Lambda never kills it mid-batch."""
    store.insert(ScheduledMessage.delay(queue.target, at=datetime.now(UTC), payload="{}"), datetime.now(UTC))
    with fault_proxy(backend.dynamodb_url, mode="hang") as proxy:
        app = load("dispatcher", store.table_name, dynamodb_url=proxy.url, RUN_SECONDS="1.5", STOP_MARGIN_SECONDS="2")
        context = FakeContext(4_000)
        started = time.monotonic()
        result = app.lambda_handler(event("dispatcher.json"), context)
        elapsed = time.monotonic() - started
        app.worker.close()
    assert result["dispatched"] == 0 and proxy.faults >= 1
    # the soft deadline (1.5 s) plus half the stop margin, well inside the 4 s invocation
    assert elapsed < 1.5 + 1.0 + 0.5, f"ran {elapsed:.2f}s"
    assert context.get_remaining_time_in_millis() > 1000


def test_a_bad_item_does_not_stop_the_dispatcher(load, store, queue):
    now = datetime.now(UTC)
    good = [ScheduledMessage.delay(queue.target, at=now, payload=f'{{"i":{i}}}') for i in range(12)]
    for msg in good:
        store.insert(msg, now)
    bad = ScheduledMessage.delay(queue.target, at=now)
    store.insert(bad, now)
    key = {"schedule_id": {"S": str(bad.schedule_id)}}
    item = store.client.get_item(TableName=store.table_name, Key=key)["Item"]
    store.client.delete_item(TableName=store.table_name, Key=key)
    store.client.put_item(TableName=store.table_name, Item={**item, "schedule_id": {"S": "not-a-uuid"}})
    app = load("dispatcher", store.table_name, RUN_SECONDS="1.5")

    result = app.lambda_handler(event("dispatcher.json"), FakeContext(60_000))

    assert (result["dispatched"], result["quarantined"], result["failed_cycles"]) == (12, 1, 0), result
    dead = load("dead_letter", store.table_name).lambda_handler({"action": "list"}, FakeContext(10_000))
    assert dead["items"] == [] and dead["skipped"] == [
        {"key": "not-a-uuid", "reason": "unreadable item: schedule_id is not a UUID"}
    ]


def test_dispatcher_reads_only_its_shards(load, store, queue):
    now = datetime.now(UTC)
    msgs = [ScheduledMessage.delay(queue.target, at=now, payload=f'{{"i":{i}}}') for i in range(12)]
    for msg in msgs:
        store.insert(msg, now)
    app = load("dispatcher", store.table_name, DISPATCHER_SHARDS="0-1", RUN_SECONDS="1.5")

    result = app.lambda_handler(event("dispatcher.json"), FakeContext(60_000))

    mine = [m for m in msgs if m.schedule_id.int % 4 in (0, 1)]
    assert result["dispatched"] == len(mine)
    for m in msgs:
        expected = ScheduleStatus.DELIVERED if m in mine else ScheduleStatus.PENDING
        assert store.inspect(m.schedule_id).status is expected


def test_dispatchers_over_shard_ranges_check_the_split_at_cold_start(load, store, queue):
    """Two dispatchers as the template deploys them for DispatcherShardRanges=0-1,2-3: each reads
    its range; together they deliver everything once."""
    now = datetime.now(UTC)
    msgs = [ScheduledMessage.delay(queue.target, at=now, payload=f'{{"i":{i}}}') for i in range(12)]
    for msg in msgs:
        store.insert(msg, now)
    dispatched = 0
    for shards in ("0-1", "2-3"):
        app = load("dispatcher", store.table_name, DISPATCHER_SHARDS=shards, DISPATCHER_SHARD_RANGES="0-1,2-3")
        dispatched += app.lambda_handler(event("dispatcher.json"), FakeContext(60_000))["dispatched"]
    assert dispatched == len(msgs) == len(queue.receive_all())
    assert all(store.inspect(m.schedule_id).status is ScheduleStatus.DELIVERED for m in msgs)


def test_an_on_demand_dispatcher_stays_for_what_is_due_before_the_next_start(load, store, queue, capsys):
    """Scheduled 118 s ago (the next start is 2 s away at the latest): it delivers what is due in
    1 s, on time, then returns instead of polling on; with nothing due it returns after one round."""
    on_demand = {"DISPATCH_MODE": "on-demand", "DISPATCH_PERIOD_MINUTES": "1", "RUN_SECONDS": "240"}
    app = load("dispatcher", store.table_name, **on_demand)
    now = datetime.now(UTC)
    soon = ScheduledMessage.delay(queue.target, at=now + timedelta(seconds=1), payload='{"n":1}')
    later = ScheduledMessage.delay(queue.target, at=now + timedelta(minutes=5), payload='{"n":2}')
    for msg in (soon, later):
        store.insert(msg, now)
    scheduled = (now - timedelta(seconds=118)).isoformat()

    started = time.monotonic()
    result = app.lambda_handler(event("dispatcher.json", scheduled_time=scheduled), FakeContext(270_000))
    elapsed = time.monotonic() - started
    assert result["dispatched"] == 1 and [m["Body"] for m in queue.receive_all()] == ['{"n":1}']
    assert store.inspect(later.schedule_id).status is ScheduleStatus.PENDING  # the next run's
    assert 1.0 <= elapsed < 2 + 1 + 5, f"ran {elapsed:.2f}s"  # at most: next start + timeout + overlap
    lags = values(emf_records(capsys.readouterr().out), "DispatchLagMs")
    assert len(lags) == 1 and lags[0] < 1000, lags  # on time

    started = time.monotonic()
    idle = app.lambda_handler(event("dispatcher.json", scheduled_time=now.isoformat()), FakeContext(270_000))
    elapsed = time.monotonic() - started
    assert idle["claimed"] == 0
    # one round, no waiting: far from the 120 s to the latest next start (margin for a loaded machine)
    assert elapsed < 3.0, f"an idle on-demand run took {elapsed:.2f}s"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"TABLE_NAME": ""}, "TABLE_NAME"),
        ({"DISPATCHER_SHARD_RANGES": "0-1"}, "DISPATCHER_SHARD_RANGES"),
        ({"DISPATCHER_SHARD_RANGES": "0-1,2-3", "DISPATCHER_SHARDS": "1-2"}, "DISPATCHER_SHARDS"),
        ({"DISPATCH_MODE": "sometimes"}, "DISPATCH_MODE"),
        ({"LEASE_SECONDS": "five"}, "LEASE_SECONDS"),
        ({"BATCH_SIZE": "0"}, "BATCH_SIZE"),
        ({"JITTER": "maybe"}, "JITTER"),
        ({"DISPATCHER_SHARDS": "0-9"}, "DISPATCHER_SHARDS"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL"),
        ({"LEASE_SECONDS": "4", "BATCH_SIZE": "10"}, "LEASE_SECONDS"),
        ({"RETRY_BASE_DELAY_MS": "5000", "RETRY_MAX_DELAY_MS": "1000"}, "RETRY_MAX_DELAY_MS"),
        ({"DISPATCH_PERIOD_MINUTES": "5", "RUN_SECONDS": "300"}, "RUN_SECONDS"),
    ],
)
def test_a_bad_setting_fails_the_cold_start_naming_the_variable(load, env, names):
    with pytest.raises(ConfigError, match=names) as info:
        load("dispatcher", "schedules", **env)
    assert "\n" not in str(info.value)


# -- dead letters ------------------------------------------------------------------------------


@pytest.fixture
def dead_letter(store, clients, clock, endpoint, queue) -> tuple[ScheduledMessage, ScheduledMessage]:
    """One schedule dead-lettered (its queue does not exist, one attempt) and one still pending."""
    missing = f"sqs:{endpoint.url}/123456789012/missing-{uuid.uuid4().hex[:8]}"
    dead = ScheduledMessage.delay(missing, at=clock.now(), payload="{}", max_attempts=1)
    alive = ScheduledMessage.delay(queue.target, at=clock.now() + timedelta(hours=1), payload="{}")
    store.insert(dead, clock.now())
    store.insert(alive, clock.now())
    summary = make_worker(store, clients, clock).run_once()
    assert summary.dead_lettered == 1, summary
    return dead, alive


def test_dead_letter_lists_and_replays(load, store, dead_letter):
    dead, _ = dead_letter
    app = load("dead_letter", store.table_name)

    listed = app.lambda_handler(event("dead_letter_list.json"), FakeContext(30_000))
    assert [i["schedule_id"] for i in listed["items"]] == [str(dead.schedule_id)]
    item = listed["items"][0]
    assert item["status"] == "dead-lettered" and item["attempts"] == 1 and item["max_attempts"] == 1
    assert item["last_error"] and item["dead_lettered_at"].endswith("Z")
    assert set(item) == {
        "schedule_id",
        "status",
        "scheduled_for",
        "attempts",
        "max_attempts",
        "trigger",
        "target",
        "event_type",
        "last_error",
        "leased_until",
        "dead_lettered_at",
    }
    json.dumps(listed)  # what Lambda returns must serialise

    replayed = app.lambda_handler(
        event("dead_letter_replay.json", schedule_id=str(dead.schedule_id)), FakeContext(30_000)
    )
    assert replayed == {"replayed": str(dead.schedule_id)}
    snap = store.inspect(dead.schedule_id)
    assert snap.status is ScheduleStatus.PENDING and snap.attempts == 0 and snap.last_error is None
    assert app.lambda_handler({"action": "list"}, FakeContext(30_000)) == {"items": []}


BAD_REQUESTS: list[tuple[Any, type[HexeractError]]] = [
    ({"action": "purge"}, InvalidRequest),
    ({}, InvalidRequest),
    (["list"], InvalidRequest),
    ({"action": "list", "limit": 0}, InvalidRequest),
    ({"action": "list", "limit": 1001}, InvalidRequest),
    ({"action": "list", "limit": "5"}, InvalidRequest),
    ({"action": "list", "limit": True}, InvalidRequest),
    ({"action": "list", "schedule_id": "x"}, InvalidRequest),
    ({"action": "replay"}, InvalidRequest),
    ({"action": "replay", "schedule_id": 42}, InvalidRequest),
    ({"action": "replay", "schedule_id": "not-a-uuid"}, InvalidRequest),
    ({"action": "replay", "schedule_id": "UNKNOWN", "limit": 5}, InvalidRequest),
    ({"action": "replay", "schedule_id": "UNKNOWN"}, ScheduleNotFound),
    ({"action": "replay", "schedule_id": "ALIVE"}, NotReplayable),
]


def test_dead_letter_bad_input_raises_a_typed_error_and_changes_nothing(load, store, clients, dead_letter):
    _, alive = dead_letter
    ids = {"UNKNOWN": str(uuid.uuid4()), "ALIVE": str(alive.schedule_id)}
    app = load("dead_letter", store.table_name)
    before = table_items(clients, store)

    for request, error in BAD_REQUESTS:
        if isinstance(request, dict) and request.get("schedule_id") in ids:
            request = {**request, "schedule_id": ids[request["schedule_id"]]}
        with pytest.raises(error) as info:
            app.lambda_handler(request, FakeContext(30_000))
        assert isinstance(info.value, HexeractError), request
        assert "\n" not in str(info.value)

    assert table_items(clients, store) == before


# -- IAM: moto does not enforce it, so check that each policy covers every call its handler makes --

# API operations whose IAM action has another name.
IAM_ACTION = {"sqs:SendMessageBatch": "sqs:SendMessage", "sns:PublishBatch": "sns:Publish"}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every AWS operation made through boto3 while the test runs, as IAM actions."""
    import botocore.client

    seen: set[str] = set()
    real = botocore.client.BaseClient._make_api_call

    def recording(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        action = f"{self.meta.service_model.signing_name}:{operation_name}"
        seen.add(IAM_ACTION.get(action, action))
        return real(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return seen


def policy_actions(policy: str) -> set[str]:
    from ..support.cfn_eval import CfnLoader

    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=CfnLoader)
    out: set[str] = set()

    def collect(stmt: Any) -> None:
        if isinstance(stmt, dict) and "Fn::If" in stmt:
            for branch in stmt["Fn::If"][1:]:
                collect(branch)
        elif isinstance(stmt, dict) and stmt.get("Effect") == "Allow":
            out.update(stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]])

    for stmt in template["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"]:
        collect(stmt)
    return out


def test_the_dispatcher_policy_allows_every_call_the_dispatcher_makes(load, store, clients, calls, endpoint):
    sns = clients.sns()
    topic = sns.create_topic(Name=f"iam-{uuid.uuid4().hex[:8]}")["TopicArn"]
    queue = clients.sqs().create_queue(QueueName=f"iam-{uuid.uuid4().hex[:8]}")
    arn = clients.sqs().get_queue_attributes(QueueUrl=queue["QueueUrl"], AttributeNames=["QueueArn"])
    now = datetime.now(UTC)
    for target in (f"sns:{topic}", f"sqs:{arn['Attributes']['QueueArn']}", f"sqs:{queue['QueueUrl']}"):
        store.insert(ScheduledMessage.delay(target, at=now, max_attempts=1), now)
    store.insert(ScheduledMessage.cron(f"sns:{topic}", "* * * * * *"), now)
    calls.clear()  # only what the function itself does from its cold start on
    app = load("dispatcher", store.table_name)
    app.lambda_handler(event("dispatcher.json"), FakeContext(30_000))
    assert {"dynamodb:Query", "dynamodb:UpdateItem", "sqs:SendMessage", "sns:Publish"} <= calls
    assert calls <= policy_actions("DispatcherPolicy"), calls - policy_actions("DispatcherPolicy")


def test_the_dispatcher_policy_allows_reading_payloads_stored_apart(load, store, clients, calls):
    queue = clients.sqs().create_queue(QueueName=f"iam-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    now = datetime.now(UTC)
    store.insert(ScheduledMessage.delay(f"sqs:{queue}", at=now, payload=json.dumps({"blob": "x" * 4096})), now)
    calls.clear()
    app = load("dispatcher", store.table_name)
    app.lambda_handler(event("dispatcher.json"), FakeContext(30_000))
    assert "dynamodb:BatchGetItem" in calls
    assert calls <= policy_actions("DispatcherPolicy"), calls - policy_actions("DispatcherPolicy")


def test_the_dead_letter_policy_allows_every_call_the_function_makes(load, store, dead_letter, calls):
    dead, _ = dead_letter
    calls.clear()
    app = load("dead_letter", store.table_name)
    app.lambda_handler(event("dead_letter_list.json"), FakeContext(30_000))
    app.lambda_handler(event("dead_letter_replay.json", schedule_id=str(dead.schedule_id)), FakeContext(30_000))
    assert {"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"} <= calls
    assert calls <= policy_actions("DeadLetterPolicy"), calls - policy_actions("DeadLetterPolicy")


# -- X-Ray through the Powertools Tracer ---------------------------------------------------------

TRACING_PROBE = """
import botocore.client, json, sys
app = __import__(f"functions.{sys.argv[1]}.app", fromlist=["app"])
patched = type(botocore.client.BaseClient.__dict__["_make_api_call"]).__name__ == "FunctionWrapper"
print(json.dumps({"disabled": bool(app.tracer.disabled), "botocore_patched": patched}))
"""


def tracing(function: str, **env: str) -> dict[str, bool]:
    """How the handler module, cold-started in a fresh interpreter with ``env``, traces."""
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "TABLE_NAME": "trace-probe"}
    base |= {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    result = subprocess.run(
        [sys.executable, "-c", TRACING_PROBE, function], env={**base, **env}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("function", ["dispatcher", "dead_letter"])
def test_the_tracer_is_inert_off_lambda(function):
    """In tests and on a laptop (no LAMBDA_TASK_ROOT), and wherever POWERTOOLS_TRACE_DISABLED is
    true, the Tracer records nothing and patches nothing."""
    assert tracing(function) == {"disabled": True, "botocore_patched": False}
    disabled = tracing(function, LAMBDA_TASK_ROOT="/var/task", POWERTOOLS_TRACE_DISABLED="true")
    assert disabled == {"disabled": True, "botocore_patched": False}


def test_in_lambda_the_dead_letter_function_traces_each_aws_call_and_the_dispatcher_only_its_runs():
    in_lambda = {"LAMBDA_TASK_ROOT": "/var/task"}
    assert tracing("dead_letter", **in_lambda) == {"disabled": False, "botocore_patched": True}
    # the dispatcher's calls run on a thread pool, where X-Ray has no segment: not patched
    assert tracing("dispatcher", **in_lambda) == {"disabled": False, "botocore_patched": False}


def test_the_handlers_are_traced_and_stay_short():
    for function in ("dispatcher", "dead_letter"):
        source = (ROOT / "functions" / function / "app.py").read_text()
        assert "@tracer.capture_lambda_handler" in source, function
        handler = source[source.index("@logger.inject_lambda_context") :]
        assert len(handler.splitlines()) <= 30, function
