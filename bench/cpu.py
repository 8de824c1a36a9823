"""Client CPU per occurrence with the endpoint stubbed out, vs the CPU boto3 alone needs.

A ``before-send`` hook answers every request in-process with a canned, valid response (due index
entries, the claimed item, batch results), so the process's CPU time is all client work:
the worker's own logic plus botocore serialising, signing and parsing. The floor is the same
requests, made back to back with prepared parameters and no worker logic around them.

    .venv/bin/python -m bench.cpu [--occurrences 3000]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from hexeract_scheduler.aws import ClientFactory, Connection
from hexeract_scheduler.clock import SystemClock, to_ms
from hexeract_scheduler.dynamo import DynamoScheduleStore
from hexeract_scheduler.sinks import Dispatcher
from hexeract_scheduler.worker import SchedulerWorker, SchedulerWorkerConfig

from .common import write_result

QUEUE = "http://127.0.0.1:1/123456789012/stub"


def _headers() -> HTTPHeaders:
    headers = HTTPHeaders()
    headers["x-amzn-RequestId"] = "stub"
    return headers


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


class StubEndpoint:
    """Answers DynamoDB Query/UpdateItem and SQS SendMessageBatch in-process."""

    def __init__(self, shards: int = 4) -> None:
        self.shards = shards
        self.requests = 0

    def install(self, *clients: Any) -> None:
        for c in clients:
            c.meta.events.register("before-send", self.respond)

    def respond(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        self.requests += 1
        op = event_name.split(".")[-1]
        body = json.loads(request.body or b"{}")
        now = to_ms(SystemClock().now())
        out: dict[str, Any]
        if op == "Query":
            limit = int(body.get("Limit", 10))
            out = {
                "Items": [
                    {"schedule_id": {"S": str(uuid.uuid4())}, "due_at": {"N": str(now - 1000)}, "due_shard": {"S": "0"}}
                    for _ in range(max(1, limit // self.shards))
                ],
                "Count": 1,
            }
        elif op == "UpdateItem" and body.get("ReturnValues") == "ALL_NEW":
            vals = body["ExpressionAttributeValues"]
            out = {
                "Attributes": {
                    "schedule_id": body["Key"]["schedule_id"],
                    "status": {"S": "pending"},
                    "trigger_kind": {"S": "delay"},
                    "target": {"S": f"sqs:{QUEUE}"},
                    "event_type": {"S": "scheduled"},
                    "payload": {"B": "eyJrIjogMX0="},
                    "scheduled_for": {"N": str(now - 1000)},
                    "due_at": vals[":until"],
                    "leased_until": vals[":until"],
                    "attempts": {"N": "1"},
                    "max_attempts": {"N": "5"},
                    "lease_token": vals[":tok"],
                }
            }
        elif op == "UpdateItem":
            out = {}
        elif op == "GetItem":
            out = {"Item": {"schedule_id": {"S": "#meta"}, "shards": {"N": str(self.shards)}}}
        elif op == "PutItem":
            out = {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "message": "exists"}
            return AWSResponse(request.url, 400, _headers(), _Raw(json.dumps(out).encode()))
        elif op == "SendMessageBatch":
            out = {
                "Successful": [
                    {"Id": e["Id"], "MessageId": str(uuid.uuid4()), "MD5OfMessageBody": "0" * 32}
                    for e in body["Entries"]
                ]
            }
        else:
            raise RuntimeError(f"no stub for {op}")
        return AWSResponse(request.url, 200, _headers(), _Raw(json.dumps(out).encode()))


def worker_cpu(occurrences: int, concurrency: int) -> dict[str, Any]:
    clients = ClientFactory(Connection(endpoint_url="http://127.0.0.1:1"))
    stub = StubEndpoint()
    stub.install(clients.dynamodb(), clients.sqs())
    store = DynamoScheduleStore("stub", dynamodb=clients.dynamodb())
    cfg = SchedulerWorkerConfig(concurrency=concurrency, jitter=False)
    with SchedulerWorker(store, Dispatcher.for_clients(clients), cfg, clock=SystemClock()) as worker:
        worker.run_once()  # warm-up
        stub.requests = 0
        done = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while done < occurrences:
            done += worker.run_once().dispatched
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "occurrences": done,
        "cpu_us_per_occurrence": round(cpu / done * 1e6, 1),
        "wall_us_per_occurrence": round(wall / done * 1e6, 1),
        "requests_per_occurrence": round(stub.requests / done, 2),
    }


def floor_cpu(occurrences: int) -> dict[str, Any]:
    """The same requests per occurrence (1 claim, 1 ack, 0.4 Query, 0.1 SendMessageBatch), bare."""
    clients = ClientFactory(Connection(endpoint_url="http://127.0.0.1:1"))
    ddb, sqs = clients.dynamodb(), clients.sqs()
    StubEndpoint().install(ddb, sqs)
    attrs = {
        k: {"DataType": "String", "StringValue": "x" * 36}
        for k in ("occurrence_id", "schedule_id", "event_type", "scheduled_for")
    }
    attrs["attempt"] = {"DataType": "Number", "StringValue": "1"}
    entries = [{"Id": str(i), "MessageBody": '{"k": 1}', "MessageAttributes": attrs} for i in range(10)]
    key = {"schedule_id": {"S": str(uuid.uuid4())}}
    tok = {"S": "f" * 32}
    cpu0 = time.process_time()
    for i in range(occurrences):
        if i % 10 == 0:
            for shard in range(4):
                ddb.query(
                    TableName="stub",
                    IndexName="due-index",
                    KeyConditionExpression="due_shard = :s AND due_at <= :t",
                    ExpressionAttributeValues={":s": {"S": str(shard)}, ":t": {"N": "1767225600000"}},
                    Limit=10,
                )
            sqs.send_message_batch(QueueUrl=QUEUE, Entries=entries)  # type: ignore[arg-type]
        ddb.update_item(
            TableName="stub",
            Key=key,
            UpdateExpression="SET attempts = attempts + :one, leased_until = :until, due_at = :until, "
            "lease_token = :tok",
            ConditionExpression="#st = :pending AND due_at <= :now",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":until": {"N": "1767225900000"},
                ":tok": tok,
                ":pending": {"S": "pending"},
                ":now": {"N": "1767225600000"},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        ddb.update_item(
            TableName="stub",
            Key=key,
            UpdateExpression="SET #st = :d REMOVE due_at",
            ConditionExpression="lease_token = :tok",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":d": {"S": "delivered"}, ":tok": tok},
        )
    cpu = time.process_time() - cpu0
    return {"occurrences": occurrences, "cpu_us_per_occurrence": round(cpu / occurrences * 1e6, 1)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--occurrences", type=int, default=3000)
    args = p.parse_args()
    floor = floor_cpu(args.occurrences)
    seq = worker_cpu(args.occurrences, 1)
    par = worker_cpu(args.occurrences, 16)
    print(f"boto3 floor (same requests, bare):  {floor['cpu_us_per_occurrence']:7.1f} µs CPU / occurrence")
    print(
        f"SchedulerWorker, concurrency 1:     {seq['cpu_us_per_occurrence']:7.1f} µs CPU / occurrence "
        f"({seq['requests_per_occurrence']} requests/occurrence)"
    )
    print(
        f"SchedulerWorker, concurrency 16:    {par['cpu_us_per_occurrence']:7.1f} µs CPU / occurrence "
        f"(x{par['cpu_us_per_occurrence'] / floor['cpu_us_per_occurrence']:.2f} the floor)"
    )
    write_result(
        "cpu",
        {
            "setup": "before-send hook answers in-process; CPU = time.process_time of this process",
            "boto3_floor": floor,
            "worker_concurrency_1": seq,
            "worker_concurrency_16": par,
        },
    )


if __name__ == "__main__":
    main()
