"""A bad entry fails alone, end to end: the sinks over HTTP against moto's SQS and SNS.

Only SQS and SNS are involved (no DynamoDB), so these tests use the session's moto endpoint
directly and run once, not once per DynamoDB backend. The occurrences are built by hand, as the
store would read them from an item written by hand: ``ScheduledMessage`` refuses such payloads.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.model import LeasedOccurrence, Target, Trigger
from hexeract_scheduler.local import LocalEndpoint
from hexeract_scheduler.sinks import batch
from hexeract_scheduler.sinks.dispatcher import Dispatcher

from ..conftest import T0, Queue, make_queue, unique

BAD_UTF8 = b'{"name": "caf\xe9"}'  # Latin-1, as a migration could leave it


@pytest.fixture(scope="module")
def moto(endpoint: LocalEndpoint) -> ClientFactory:
    return ClientFactory(Connection(endpoint_url=endpoint.url))


def leased(target: Target, payload: bytes, event_type: str = "e") -> LeasedOccurrence:
    return LeasedOccurrence(
        schedule_id=uuid.uuid4(),
        scheduled_for=T0,
        attempt=1,
        max_attempts=5,
        lease_token=uuid.uuid4().hex,
        leased_until=T0 + timedelta(minutes=5),
        target=target,
        trigger=Trigger(at=T0),
        payload=payload,
        event_type=event_type,
    )


def dispatch(clients: ClientFactory, occs: list[LeasedOccurrence]) -> list[str | None]:
    with ThreadPoolExecutor(4) as pool:
        return Dispatcher.for_clients(clients).dispatch(occs, executor=pool, timeout=10)


def received_ids(queue: Queue) -> list[str]:
    return sorted(m["MessageAttributes"]["occurrence_id"]["StringValue"] for m in queue.receive_all())


def topic_into_queue(clients: ClientFactory) -> tuple[Target, Queue]:
    """A topic with a queue subscribed (raw delivery: the queue gets the message body and its
    attributes as published)."""
    queue = make_queue(clients)
    arn = clients.sns().create_topic(Name=unique("t"))["TopicArn"]
    clients.sns().subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue.arn, Attributes={"RawMessageDelivery": "true"})
    return Target.sns(arn), queue


def test_sqs_batch_with_a_non_utf8_payload_delivers_the_others(moto):
    queue = make_queue(moto)
    target = Target.parse(queue.target)
    occs = [leased(target, b'{"n": 0}'), leased(target, BAD_UTF8), leased(target, b'{"n": 2}')]
    assert batch.chunks(occs) == [[0, 1, 2]]  # one batch: the bad entry would have failed it all

    out = dispatch(moto, occs)

    assert out == [None, "payload is not valid UTF-8 text: invalid continuation byte at offset 13 (byte 0xe9)", None]
    assert received_ids(queue) == sorted(str(occs[i].occurrence_id) for i in (0, 2))


def test_sns_batch_with_a_non_utf8_payload_delivers_the_others(moto):
    target, queue = topic_into_queue(moto)
    occs = [leased(target, BAD_UTF8), leased(target, b'{"n": 1}'), leased(target, b"a\x00b")]

    out = dispatch(moto, occs)

    assert out[1] is None
    assert out[0] == "payload is not valid UTF-8 text: invalid continuation byte at offset 13 (byte 0xe9)"
    assert out[2] == "payload has characters SQS does not accept: U+0000 at offset 1"
    assert received_ids(queue) == [str(occs[1].occurrence_id)]


def test_a_batch_the_service_refuses_is_isolated(moto, monkeypatch):
    """moto refuses a whole PublishBatch for one entry with an empty attribute value, as SNS does.
    The local check would catch that entry first, so it is switched off here to reach the service."""
    monkeypatch.setattr(batch, "unsendable", lambda occ: None)
    target, queue = topic_into_queue(moto)
    occs = [leased(target, b'{"n": 0}'), leased(target, b'{"n": 1}', event_type=""), leased(target, b'{"n": 2}')]
    requests: list[int] = []
    moto.sns(target.region).meta.events.register(
        "before-parameter-build.sns.PublishBatch",
        lambda params, **_: requests.append(len(params["PublishBatchRequestEntries"])),
    )

    out = dispatch(moto, occs)

    assert out[0] is None and out[2] is None
    assert out[1] is not None and out[1].startswith("InvalidParameter: The message attribute 'event_type'")
    assert out[1].endswith(f"(sending to {target})")
    assert requests == [3, 1, 1, 1]  # the refused batch, then each entry alone
    assert received_ids(queue) == sorted(str(occs[i].occurrence_id) for i in (0, 2))
