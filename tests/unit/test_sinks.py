"""Sinks against stubbed clients (no network): per-entry failures, batching, FIFO fields, and a bad
entry failing alone (refused locally, or isolated by resending a refused batch entry by entry)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from hexeract_scheduler import Target, Trigger
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.sinks.batch import MAX_BATCH_BYTES, chunks
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.sinks.refusals import unsendable
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink

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


def ok(*ids: str) -> dict:
    return {"Successful": [{"Id": i, "MessageId": f"m{i}", "MD5OfMessageBody": "x"} for i in ids], "Failed": []}


def entries(*ids: int) -> dict:
    """The expected parameters of a SendMessageBatch carrying these entries (payload ``{}``)."""
    return {"QueueUrl": URL, "Entries": [{"Id": str(i), "MessageBody": "{}", "MessageAttributes": ANY} for i in ids]}


def record_requests(sqs) -> list[list[str]]:
    """The entry ids of each SendMessageBatch ``sqs`` makes (also those a Stubber answers)."""
    seen: list[list[str]] = []
    sqs.meta.events.register(
        "before-parameter-build.sqs.SendMessageBatch",
        lambda params, **_: seen.append([e["Id"] for e in params["Entries"]]),
    )
    return seen


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


# -- a bad entry fails alone -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "event_type", "expected"),
    [
        (b'{"a": "\xff"}', "e", "payload is not valid UTF-8 text: invalid start byte at offset 7 (byte 0xff)"),
        (b'{"a": "\xe2\x82', "e", "payload is not valid UTF-8 text: unexpected end of data at offset 7 (byte 0xe2)"),
        (b"\xed\xa0\x80", "e", "payload is not valid UTF-8 text: invalid continuation byte at offset 0 (byte 0xed)"),
        (b"abc\x00", "e", "payload has characters SQS does not accept: U+0000 at offset 3"),
        ("é\x01\x02".encode(), "e", "payload has characters SQS does not accept: U+0001 at offset 2 and 1 more"),
        ("ok\ufffe".encode(), "e", "payload has characters SQS does not accept: U+FFFE at offset 2"),
        (b"", "e", "payload is empty: SQS and SNS refuse an empty message body"),
        (b"{}", "", "event type is empty: SQS and SNS refuse an empty message attribute value"),
        (b"{}", "a\x1bb", "event type has characters SQS does not accept: U+001B at offset 1"),
        ("\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffff".encode(), "e", None),
    ],
)
def test_unsendable_names_what_the_service_would_refuse(payload, event_type, expected):
    o = replace(occ(Target.sqs(URL), payload), event_type=event_type)
    assert unsendable(o) == expected


def test_entries_refused_locally_fail_alone_and_the_rest_is_sent():
    sqs = client("sqs")
    target = Target.sqs(URL)
    occs = [occ(target, b'{"n": 0}'), occ(target, b"\xff"), occ(target, b'{"n": 2}'), occ(target, b"a\x00")]
    sent = [
        {"Id": "0", "MessageBody": '{"n": 0}', "MessageAttributes": ANY},
        {"Id": "2", "MessageBody": '{"n": 2}', "MessageAttributes": ANY},
    ]
    with Stubber(sqs) as stub:
        stub.add_response("send_message_batch", ok("0", "2"), {"QueueUrl": URL, "Entries": sent})
        out = SqsSink(sqs).send_batch(target, occs)
        stub.assert_no_pending_responses()
    assert out[0] is None and out[2] is None
    assert out[1] == "payload is not valid UTF-8 text: invalid start byte at offset 0 (byte 0xff)"
    assert out[3] == "payload has characters SQS does not accept: U+0000 at offset 1"


def test_a_batch_of_only_refused_entries_sends_nothing():
    sqs = client("sqs")
    target = Target.sqs(URL)
    requests = record_requests(sqs)
    with Stubber(sqs):
        out = SqsSink(sqs).send_batch(target, [occ(target, b"\xff"), occ(target, b"")])
    assert requests == []
    assert [o and o.split(":")[0] for o in out] == ["payload is not valid UTF-8 text", "payload is empty"]


def test_a_batch_refused_as_a_whole_is_resent_entry_by_entry():
    sqs = client("sqs")
    target = Target.sqs(URL)
    occs = [occ(target) for _ in range(3)]
    refused = "Invalid binary character '#x1' was found in the message body"
    with Stubber(sqs) as stub:
        stub.add_client_error(
            "send_message_batch", "InvalidMessageContents", refused, 400, expected_params=entries(0, 1, 2)
        )
        stub.add_response("send_message_batch", ok("0"), entries(0))
        stub.add_client_error("send_message_batch", "InvalidMessageContents", refused, 400, expected_params=entries(1))
        stub.add_response("send_message_batch", ok("2"), entries(2))
        out = SqsSink(sqs).send_batch(target, occs)
        stub.assert_no_pending_responses()
    assert out == [None, f"InvalidMessageContents: {refused} (sending to {target})", None]


def test_isolation_costs_at_most_one_request_per_entry():
    sqs = client("sqs")
    target = Target.sqs(URL)
    occs = [occ(target) for _ in range(10)]
    requests = record_requests(sqs)
    with Stubber(sqs) as stub:  # the worst case: every entry is refused alone too
        stub.add_client_error("send_message_batch", "InvalidParameterValue", "batch", 400)
        for i in range(10):
            stub.add_client_error(
                "send_message_batch", "InvalidParameterValue", f"entry {i}", 400, expected_params=entries(i)
            )
        out = SqsSink(sqs).send_batch(target, occs)
        stub.assert_no_pending_responses()
    assert requests == [[str(i) for i in range(10)]] + [[str(i)] for i in range(10)]  # 1 + 10, no more
    assert out == [f"InvalidParameterValue: entry {i} (sending to {target})" for i in range(10)]


def test_a_single_entry_refused_is_not_resent():
    sqs = client("sqs")
    target = Target.sqs(URL)
    with Stubber(sqs) as stub:
        stub.add_client_error("send_message_batch", "InvalidParameterValue", "no", 400)
        out = SqsSink(sqs).send_batch(target, [occ(target), occ(target, b"\xff")])
        stub.assert_no_pending_responses()
    assert out[0] == f"InvalidParameterValue: no (sending to {target})"
    assert out[1] is not None and out[1].startswith("payload is not valid UTF-8 text")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 400),
        ("RequestThrottled", 400),
        ("KmsThrottled", 400),
        ("TooManyRequests", 429),
        ("InternalError", 500),
        ("ServiceUnavailable", 503),
        ("AWS.SimpleQueueService.NonExistentQueue", 400),
        ("QueueDoesNotExist", 400),
        ("AccessDenied", 403),
        ("KmsDisabled", 400),
        ("KMSAccessDenied", 400),
        ("InvalidClientTokenId", 400),
        ("NotFound", 404),
    ],
)
def test_retryable_and_target_refusals_fail_the_batch_without_resending(code, status):
    sqs = client("sqs")
    target = Target.sqs(URL)
    requests = record_requests(sqs)
    with Stubber(sqs) as stub:
        stub.add_client_error("send_message_batch", code, "nope", status)
        out = SqsSink(sqs).send_batch(target, [occ(target) for _ in range(3)])
        stub.assert_no_pending_responses()
    assert requests == [["0", "1", "2"]]
    assert out == [f"{code}: nope (sending to {target})"] * 3


def test_a_failure_not_about_the_entry_stops_isolation_and_fails_the_entries_left():
    sqs = client("sqs")
    target = Target.sqs(URL)
    with Stubber(sqs) as stub:
        stub.add_client_error("send_message_batch", "InvalidParameterValue", "batch", 400)
        stub.add_response("send_message_batch", ok("0"), entries(0))
        stub.add_client_error("send_message_batch", "ThrottlingException", "slow down", 400, expected_params=entries(1))
        out = SqsSink(sqs).send_batch(target, [occ(target) for _ in range(3)])
        stub.assert_no_pending_responses()  # entry 2 was not tried: it fails with the throttling
    assert out == [None] + [f"ThrottlingException: slow down (sending to {target})"] * 2


def test_entries_resent_alone_keep_their_per_entry_failures():
    sqs = client("sqs")
    target = Target.sqs(URL)
    failed = {"Successful": [], "Failed": [{"Id": "1", "SenderFault": True, "Code": "InvalidParameterValue"}]}
    with Stubber(sqs) as stub:
        stub.add_client_error("send_message_batch", "InvalidParameterValue", "batch", 400)
        stub.add_response("send_message_batch", ok("0"), entries(0))
        stub.add_response("send_message_batch", failed, entries(1))
        out = SqsSink(sqs).send_batch(target, [occ(target) for _ in range(2)])
    assert out == [None, "InvalidParameterValue"]


def test_sns_batches_refused_as_a_whole_are_isolated_too():
    sns = client("sns")
    target = Target.sns("arn:aws:sns:us-east-1:123456789012:t")
    refused = "The message attribute 'event_type' must contain non-empty message attribute value"

    def published(*ids: int) -> dict:
        return {
            "TopicArn": target.address,
            "PublishBatchRequestEntries": [{"Id": str(i), "Message": "{}", "MessageAttributes": ANY} for i in ids],
        }

    with Stubber(sns) as stub:
        stub.add_client_error("publish_batch", "InvalidParameter", refused, 400, expected_params=published(0, 1, 2))
        stub.add_client_error("publish_batch", "InvalidParameter", refused, 400, expected_params=published(0))
        for i in (1, 2):
            stub.add_response(
                "publish_batch", {"Successful": [{"Id": str(i), "MessageId": "m"}], "Failed": []}, published(i)
            )
        out = SnsSink(sns).send_batch(target, [occ(target) for _ in range(3)])
        stub.assert_no_pending_responses()
    assert out == [f"InvalidParameter: {refused} (sending to sns:{target.address})", None, None]


class SlowRefusingSqs:
    """A fake SQS client: each request takes ``delay`` seconds, then is refused as a whole."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.requests: list[list[str]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict]) -> dict:
        self.requests.append([e["Id"] for e in Entries])
        time.sleep(self.delay)
        raise ClientError(
            {"Error": {"Code": "InvalidParameterValue", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
            "SendMessageBatch",
        )


def test_isolation_starts_no_request_after_the_dispatch_deadline():
    target = Target.sqs(URL)
    sqs = SlowRefusingSqs(delay=0.3)
    with ThreadPoolExecutor(2) as pool:
        out = Dispatcher({"sqs": SqsSink(sqs)}).dispatch([occ(target) for _ in range(3)], executor=pool, timeout=0.1)
    # The pool has finished the batch by now: the refused request was not followed by resends.
    assert sqs.requests == [["0", "1", "2"]]
    assert out == ["dispatch timed out after 0.1s"] * 3


def test_isolation_within_the_deadline_reports_each_entry():
    target = Target.sqs(URL)
    sqs = SlowRefusingSqs(delay=0)
    with ThreadPoolExecutor(2) as pool:
        out = Dispatcher({"sqs": SqsSink(sqs)}).dispatch([occ(target) for _ in range(2)], executor=pool, timeout=5)
    assert sqs.requests == [["0", "1"], ["0"], ["1"]]
    assert out == [f"InvalidParameterValue: no (sending to {target})"] * 2


def test_a_batch_whose_turn_comes_after_the_deadline_is_not_sent():
    class Recording:
        def __init__(self, delay: float) -> None:
            self.delay, self.calls = delay, 0

        def send_batch(self, target, occs):
            self.calls += 1
            time.sleep(self.delay)
            return [None] * len(occs)

    slow, late = Recording(0.3), Recording(0)
    occs = [occ(Target.sqs(URL)), occ(Target.sns("arn:aws:sns:us-east-1:123456789012:t"))]
    with ThreadPoolExecutor(1) as pool:  # the SNS batch waits for the SQS one
        out = Dispatcher({"sqs": slow, "sns": late}).dispatch(occs, executor=pool, timeout=0.1)
    assert out == ["dispatch timed out after 0.1s"] * 2
    assert (slow.calls, late.calls) == (1, 0)


def test_dispatch_fails_only_the_bad_entry_of_a_batch():
    sqs = client("sqs")
    target = Target.sqs(URL)
    with Stubber(sqs) as stub, ThreadPoolExecutor(2) as pool:
        stub.add_response("send_message_batch", ok("0", "2"), entries(0, 2))
        out = Dispatcher({"sqs": SqsSink(sqs)}).dispatch(
            [occ(target), occ(target, b"\xc3("), occ(target)], executor=pool, timeout=5
        )
    assert out == [None, "payload is not valid UTF-8 text: invalid continuation byte at offset 0 (byte 0xc3)", None]
