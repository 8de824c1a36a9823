"""Sinks against stubbed clients (no network): per-entry failures, batching, FIFO fields."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber

from hexeract_scheduler import Target, Trigger
from hexeract_scheduler.clock import UTC
from hexeract_scheduler.model import LeasedOccurrence
from hexeract_scheduler.sinks import MAX_BATCH_BYTES, Dispatcher, SnsSink, SqsSink, chunks

AT = datetime(2026, 12, 2, 10, tzinfo=UTC)
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"


def occ(target: Target, payload: bytes = b"{}", attempt: int = 1) -> LeasedOccurrence:
    return LeasedOccurrence(
        schedule_id=uuid.uuid4(),
        scheduled_for=AT,
        attempt=attempt,
        max_attempts=5,
        lease_token="t",
        leased_until=AT + timedelta(minutes=5),
        target=target,
        trigger=Trigger(at=AT),
        payload=payload,
        event_type="e",
    )


def client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_a_failed_entry_fails_only_its_occurrence():
    sqs = client("sqs")
    target = Target.sqs(URL)
    occs = [occ(target) for _ in range(3)]
    with Stubber(sqs) as stub:
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [
                    {"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "x"},
                    {"Id": "2", "MessageId": "m2", "MD5OfMessageBody": "x"},
                ],
                "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError", "Message": "boom"}],
            },
            {"QueueUrl": URL, "Entries": ANY},
        )
        assert SqsSink(sqs).send_batch(target, occs) == [None, "InternalError: boom", None]


def test_a_failed_request_fails_every_entry_it_carried():
    sqs = client("sqs")
    target = Target.sqs(URL)
    with Stubber(sqs) as stub, ThreadPoolExecutor(2) as pool:
        stub.add_client_error("send_message_batch", "AWS.SimpleQueueService.NonExistentQueue", "no queue")
        out = Dispatcher({"sqs": SqsSink(sqs)}).dispatch([occ(target), occ(target)], executor=pool, timeout=5)
    assert len(out) == 2 and all(o and "NonExistentQueue" in o for o in out)


def test_sns_fifo_entries_carry_dedup_and_group():
    sns = client("sns")
    target = Target.parse("sns:arn:aws:sns:us-east-1:123456789012:t.fifo?group=g1")
    o = occ(target, b'{"k": 1}', attempt=3)
    expected_entry = {
        "Id": "0",
        "Message": '{"k": 1}',
        "MessageDeduplicationId": str(o.occurrence_id),
        "MessageGroupId": "g1",
        "MessageAttributes": {
            "occurrence_id": {"DataType": "String", "StringValue": str(o.occurrence_id)},
            "schedule_id": {"DataType": "String", "StringValue": str(o.schedule_id)},
            "event_type": {"DataType": "String", "StringValue": "e"},
            "scheduled_for": {"DataType": "String", "StringValue": "2026-12-02T10:00:00.000Z"},
            "attempt": {"DataType": "Number", "StringValue": "3"},
        },
    }
    with Stubber(sns) as stub:
        stub.add_response(
            "publish_batch",
            {"Successful": [{"Id": "0", "MessageId": "m"}], "Failed": []},
            {"TopicArn": target.address, "PublishBatchRequestEntries": [expected_entry]},
        )
        assert SnsSink(sns).send_batch(target, [o]) == [None]


def test_sqs_arn_targets_are_resolved_once():
    sqs = client("sqs")
    target = Target.parse("sqs:arn:aws:sqs:us-east-1:123456789012:orders")
    with Stubber(sqs) as stub:
        stub.add_response(
            "get_queue_url", {"QueueUrl": URL}, {"QueueName": "orders", "QueueOwnerAWSAccountId": "123456789012"}
        )
        sink = SqsSink(sqs)
        assert sink.queue_url(target) == URL
        assert sink.queue_url(target) == URL  # cached: the stub holds one response only


@pytest.mark.parametrize(("n", "size", "expected"), [(25, 10, [10, 10, 5]), (5, 100_000, [2, 2, 1]), (1, 200_000, [1])])
def test_chunks_respect_count_and_bytes(n, size, expected):
    target = Target.sqs(URL)
    batches = chunks([occ(target, b"x" * size) for _ in range(n)])
    assert [len(b) for b in batches] == expected
    assert sorted(i for b in batches for i in b) == list(range(n))
    assert all(len(b) * size < MAX_BATCH_BYTES or len(b) == 1 for b in batches)
