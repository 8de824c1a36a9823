"""``make demo`` and the example consumers, shortened so ``make test`` covers them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from demo.consumer import MemoryDedupeStore, Reminder, ReminderConsumer
from demo.run import TRY_COMMANDS, run_demo, try_it_yourself
from examples.consumer.app import build_handler
from hexeract_scheduler.cli.commands import main
from hexeract_scheduler.domain.model import ScheduledMessage

from ..conftest import Queue, make_worker, unique


def in_process_cli(args: Sequence[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def pasted_block(lines: list[str]) -> list[str]:
    """The indented lines after the "Try it yourself" header, as a person would paste them."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Try it yourself"))
    block = []
    for line in lines[start + 1 :]:
        if line.startswith("  "):
            block.append(line.strip())
        elif block:
            break
    return block


def test_demo_runs_end_to_end_and_keep_prints_lines_that_work_in_a_second_terminal(tmp_path):
    """One run (the demo takes seconds): what it shows, then, while --keep holds the endpoint up,
    the printed lines pasted into a shell whose environment is a new terminal's (no venv on PATH,
    no HEXERACT_CONN, no AWS credentials)."""
    lines: list[str] = []
    pasted: list[subprocess.CompletedProcess[str]] = []

    def second_terminal() -> None:
        script = "\n".join(pasted_block(lines))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": os.environ.get("LANG", "C.UTF-8")}
        run = subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
        )
        pasted.append(run)

    summary = run_demo(3.0, keep=True, out=lines.append, cli=in_process_cli, hold=second_terminal)
    text = "\n".join(lines)
    assert summary["replayed_and_delivered"] == 1, text
    assert summary["duplicates"] >= 1, text  # the "crashed" worker's send, delivered again
    assert summary["distinct"] >= 3, text  # crash-test, one-shot, at least one cron occurrence, replay
    assert "$ hexeract scheduler dead-letter list --conn http://127.0.0.1:" in text
    assert "dead-lettered  " in text and "3/3" in text
    assert "replayed " in text and "status:        delivered" in text
    assert "duplicate of occurrence" in text
    assert "hexeract scheduler list --conn http://127.0.0.1:" in text

    block = pasted_block(lines)
    [path_line] = [line for line in block if line.startswith("export PATH=")]
    [conn_line] = [line for line in block if line.startswith("export HEXERACT_CONN=")]
    assert path_line == f'export PATH={Path(sys.executable).parent.absolute()}:"$PATH"'  # where `hexeract` is
    assert " QUEUE_URL=http://127.0.0.1:" in conn_line and "/reminders " in conn_line
    assert " TOPIC_ARN=arn:aws:sns:" in conn_line and conn_line.endswith(":reminders-topic")
    assert block[2:] == list(TRY_COMMANDS)
    [run] = pasted
    assert run.returncode == 0, run.stdout + run.stderr
    [inspected] = json.loads(run.stdout[run.stdout.index("[") : run.stdout.rindex("]") + 1])
    assert inspected["status"] == "pending"
    assert "cron:*/5 * * * * *" in run.stdout  # the second `list`


def test_without_keep_the_demo_says_its_endpoint_stops_and_how_to_keep_it():
    text = "\n".join(try_it_yourself("http://127.0.0.1:1234", "http://q", "arn:t", keep=False))
    assert "http://127.0.0.1:1234 stops with the demo" in text
    assert "make demo DEMO_ARGS=--keep" in text
    assert "export HEXERACT_CONN" not in text  # no lines that point at an endpoint about to go away


def test_consumer_drops_duplicates_by_occurrence_id(clients, store, clock, queue: Queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now(), payload='{"text": "once"}')
    store.insert(msg, clock.now())
    # A worker that sends and crashes before acking: the lease expires, the occurrence is sent again.
    batch = store.claim_due(clock.now(), timedelta(seconds=1), 10)
    worker = make_worker(store, clients, clock)
    worker.dispatcher.dispatch(batch.leased, executor=worker.executor, timeout=10)
    clock.advance(2)
    assert worker.run_once().dispatched == 1

    seen: list[Reminder] = []
    dupes: list[Reminder] = []
    consumer = ReminderConsumer(clients.sqs(), MemoryDedupeStore(), seen.append, dupes.append)
    consumer.watch("queue", queue.url)
    while consumer.poll_once():
        pass
    assert (consumer.raw, consumer.distinct) == (2, 1)
    assert [r.body for r in seen] == ['{"text": "once"}']
    assert seen[0].schedule_id == str(msg.schedule_id) and seen[0].attempt == 1
    assert dupes[0].occurrence_id == seen[0].occurrence_id and dupes[0].attempt == 2


def sqs_record(message_id: str, occurrence_id: str, attempt: int, body: str) -> dict[str, Any]:
    def attr(value: str, kind: str = "String") -> dict[str, Any]:
        return {"stringValue": value, "dataType": kind}

    return {
        "messageId": message_id,
        "receiptHandle": "handle-" + message_id,
        "body": body,
        "attributes": {},
        "messageAttributes": {
            "occurrence_id": attr(occurrence_id),
            "schedule_id": attr(str(uuid.uuid4())),
            "event_type": attr("reminder"),
            "scheduled_for": attr("2026-12-02T10:00:00.000Z"),
            "attempt": attr(str(attempt), "Number"),
        },
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:reminders",
        "awsRegion": "us-east-1",
    }


def test_lambda_consumer_is_idempotent_on_occurrence_id(clients):
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    table = unique("idempotency")
    ddb = clients.dynamodb()
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    acted: list[str] = []

    def act(reminder: dict[str, Any]) -> str:
        acted.append(reminder["occurrence_id"])
        return f"sent {json.dumps(reminder['payload'])}"

    handler = build_handler(DynamoDBPersistenceLayer(table_name=table, boto3_client=ddb), act)
    occurrence = str(uuid.uuid4())
    other = str(uuid.uuid4())
    first = {"Records": [sqs_record("m1", occurrence, 1, '{"text": "hi"}')]}
    again = {"Records": [sqs_record("m2", occurrence, 2, '{"text": "hi"}'), sqs_record("m3", other, 1, "{}")]}

    assert handler(first, LambdaContext()) == {"batchItemFailures": []}
    assert handler(again, LambdaContext()) == {"batchItemFailures": []}
    assert acted == [occurrence, other]  # the redelivered occurrence did not act again

    # A message without the contract attributes fails alone (a partial batch failure), not the batch.
    third = str(uuid.uuid4())
    mixed = {
        "Records": [{**sqs_record("m4", other, 1, "{}"), "messageAttributes": {}}, sqs_record("m5", third, 1, "{}")]
    }
    assert handler(mixed, LambdaContext()) == {"batchItemFailures": [{"itemIdentifier": "m4"}]}
    assert acted == [occurrence, other, third]


class LambdaContext:
    function_name = "consumer"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000
