"""The table layout's two write-unit savers, on both DynamoDB backends (docs/contracts.md#table-layout).

A claim leaves ``due_at`` where it is and sets ``leased_until``, which the due index carries: the
entry is updated in place and the item is in flight until the lease ends. A payload too large for
the schedule's item to stay within one write unit is stored once, in an item of its own, and read
back by the claim path in one ``BatchGetItem`` per claimed batch.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient

from hexeract_scheduler import ScheduledMessage, ScheduleStatus
from hexeract_scheduler.domain.clock import to_ms
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.errors import InvalidInput
from hexeract_scheduler.store.dynamo import DUE_INDEX, DynamoScheduleStore, shard_of
from hexeract_scheduler.store.dynamo.codec import INLINE_LIMIT, item_size

from ..conftest import make_worker

S = timedelta(seconds=1)
LARGE = json.dumps({"blob": "x" * 64 * 1024})  # a 64 KB payload: stored apart
SMALL = '{"n": 1}'  # stored inline


def raw(store: DynamoScheduleStore, key: str) -> dict[str, Any] | None:
    got = store.client.get_item(TableName=store.table_name, Key={"schedule_id": {"S": key}}, ConsistentRead=True)
    return got.get("Item")


def index_entry(store: DynamoScheduleStore, message: ScheduledMessage) -> dict[str, Any]:
    shard = str(shard_of(message.schedule_id, 4))
    items = store.client.query(
        TableName=store.table_name,
        IndexName=DUE_INDEX,
        KeyConditionExpression="due_shard = :s",
        ExpressionAttributeValues={":s": {"S": shard}},
    )["Items"]
    [entry] = [i for i in items if i["schedule_id"]["S"] == str(message.schedule_id)]
    return entry


@pytest.fixture
def batch_gets(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every BatchGetItem made while the test runs."""
    calls: list[dict[str, Any]] = []
    real = BaseClient._make_api_call

    def recording(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        if operation_name == "BatchGetItem":
            calls.append(api_params)
        return real(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    yield calls


# -- a claim updates the index entry in place ----------------------------------------------------


def test_a_claim_leaves_due_at_and_the_index_carries_the_lease(store, clients, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(message, clock.now())
    occ = store.claim(message.schedule_id, clock.now() + S, 60 * S)
    assert isinstance(occ, LeasedOccurrence)

    item = raw(store, str(message.schedule_id))
    assert item is not None
    assert item["due_at"]["N"] == str(to_ms(clock.now()))  # where it was: the occurrence's instant
    assert item["leased_until"]["N"] == str(to_ms(occ.leased_until))
    entry = index_entry(store, message)
    assert set(entry) == {"schedule_id", "due_shard", "due_at", "leased_until"}  # keys + the lease, no more
    assert entry["leased_until"] == item["leased_until"]
    # In flight: not due, and not in the look-ahead, until the lease ends.
    assert store.find_due(clock.now() + 30 * S, 10) == []
    [entry_at_end] = store.find_due(clock.now() + 61 * S, 10)
    assert entry_at_end.available_at_ms == to_ms(occ.leased_until)


def test_an_entry_in_flight_is_the_next_due_instant_within_the_look_ahead(store, clients, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(message, clock.now())
    occ = store.claim(message.schedule_id, clock.now(), 2 * S)
    assert isinstance(occ, LeasedOccurrence)
    batch = store.claim_due(clock.now() + S, 60 * S, 10, horizon=5 * S)
    assert (batch.leased, batch.lost) == ([], 0)  # not tried: in flight
    assert batch.next_due_ms == to_ms(occ.leased_until)


def test_a_crashed_claim_is_claimed_again_when_its_lease_ends_and_swept_when_the_budget_is_spent(
    store, clients, clock, queue
):
    message = ScheduledMessage.delay(queue.target, at=clock.now(), max_attempts=2)
    store.insert(message, clock.now())
    for attempt in (1, 2):  # each worker "crashes" after its claim
        [occ] = store.claim_due(clock.now(), 10 * S, 10).leased
        assert occ.attempt == attempt
        assert store.claim_due(clock.now() + 9 * S, 10 * S, 10).leased == []
        clock.advance(10)
    batch = store.claim_due(clock.now(), 10 * S, 10)
    assert batch.swept == [message.schedule_id]
    assert store.inspect(message.schedule_id).status is ScheduleStatus.DEAD_LETTERED


def test_listing_orders_an_entry_in_flight_by_the_end_of_its_lease(store, clients, clock, queue):
    leased = ScheduledMessage.delay(queue.target, at=clock.now())
    later = ScheduledMessage.delay(queue.target, at=clock.now() + 5 * S)
    while shard_of(later.schedule_id, 4) != shard_of(leased.schedule_id, 4):  # one partition, read in due_at order
        later = ScheduledMessage.delay(queue.target, at=clock.now() + 5 * S)
    for m in (leased, later):
        store.insert(m, clock.now())
    store.claim(leased.schedule_id, clock.now(), 60 * S)
    [first] = store.list_pending(limit=1)
    assert first.schedule_id == later.schedule_id  # next attempted at +5 s; the leased one at +60 s
    assert [s.schedule_id for s in store.list_pending()] == [later.schedule_id, leased.schedule_id]


# -- large payloads are stored apart -------------------------------------------------------------


def test_a_large_payload_is_stored_once_apart_and_delivered_exactly(store, clients, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE)
    store.insert(message, clock.now())

    item = raw(store, str(message.schedule_id))
    assert item is not None and "payload" not in item
    assert item["payload_ref"] == {"S": f"{message.schedule_id}#payload"}
    assert item_size(item) <= INLINE_LIMIT  # claims and acks write a small item
    payload_item = raw(store, f"{message.schedule_id}#payload")
    assert payload_item == {"schedule_id": item["payload_ref"], "payload": {"B": LARGE.encode()}}
    # Listings read the indexes, which the payload item is in neither of.
    assert [s.schedule_id for s in store.list_pending()] == [message.schedule_id]
    assert store.inspect(message.schedule_id).status is ScheduleStatus.PENDING

    assert make_worker(store, clients, clock).run_once().dispatched == 1
    [received] = queue.receive_all()
    assert received["Body"] == LARGE
    assert store.inspect(message.schedule_id).status is ScheduleStatus.DELIVERED
    assert raw(store, f"{message.schedule_id}#payload") is not None  # kept (deleting it costs its size)


def test_small_payloads_stay_inline_and_cost_no_read(store, clients, clock, queue, batch_gets):
    messages = [ScheduledMessage.delay(queue.target, at=clock.now(), payload=SMALL) for _ in range(3)]
    for m in messages:
        store.insert(m, clock.now())
    assert all("payload" in (raw(store, str(m.schedule_id)) or {}) for m in messages)
    assert make_worker(store, clients, clock).run_once().dispatched == 3
    assert batch_gets == []


def test_a_batch_reads_its_payloads_in_one_request_and_quarantines_one_whose_item_is_missing(
    store, clients, clock, queue, batch_gets
):
    large = [ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE) for _ in range(4)]
    small = [ScheduledMessage.delay(queue.target, at=clock.now(), payload=SMALL) for _ in range(3)]
    for m in (*large, *small):
        store.insert(m, clock.now())
    lost = large[0]
    store.client.delete_item(TableName=store.table_name, Key={"schedule_id": {"S": f"{lost.schedule_id}#payload"}})

    summary = make_worker(store, clients, clock).run_once()
    assert (summary.dispatched, summary.quarantined) == (6, 1)
    # One eventually consistent read for the batch; the missing key read again, consistently.
    assert [len(c["RequestItems"][store.table_name]["Keys"]) for c in batch_gets] == [4, 1]
    assert [c["RequestItems"][store.table_name].get("ConsistentRead", False) for c in batch_gets] == [False, True]
    bodies = sorted(m["Body"] for m in queue.receive_all())
    assert bodies == sorted([LARGE] * 3 + [SMALL] * 3)
    snap = store.inspect(lost.schedule_id)
    assert snap.status is ScheduleStatus.DEAD_LETTERED
    assert snap.last_error == "unreadable item: payload item missing"


def test_a_single_claim_reads_its_payload(store, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE)
    store.insert(message, clock.now())
    occ = store.claim(message.schedule_id, clock.now(), 60 * S)
    assert isinstance(occ, LeasedOccurrence) and occ.payload == LARGE.encode()


def test_items_written_by_older_versions_with_a_large_payload_inline_are_delivered(store, clients, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=SMALL)
    store.insert(message, clock.now())
    item = raw(store, str(message.schedule_id))
    assert item is not None
    store.client.put_item(TableName=store.table_name, Item=item | {"payload": {"B": LARGE.encode()}})
    assert make_worker(store, clients, clock).run_once().dispatched == 1
    assert [m["Body"] for m in queue.receive_all()] == [LARGE]


def test_an_insert_whose_payload_item_was_already_written_completes(store, clients, clock, queue):
    """The payload put applied but its answer was lost (or the schedule's put failed): the insert,
    tried again, completes. Another payload under the same id is refused, and so is an insert of
    a schedule that exists."""
    message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE)
    payload_item = {"schedule_id": {"S": f"{message.schedule_id}#payload"}, "payload": {"B": LARGE.encode()}}
    store.client.put_item(TableName=store.table_name, Item=payload_item)
    store.insert(message, clock.now())
    with pytest.raises(InvalidInput, match="already exists"):
        store.insert(message, clock.now())
    other = dataclasses.replace(message, payload=LARGE.replace("x", "y"))
    with pytest.raises(InvalidInput, match="already exists"):
        store.insert(other, clock.now())
    assert raw(store, f"{message.schedule_id}#payload") == payload_item  # never overwritten

    assert make_worker(store, clients, clock).run_once().dispatched == 1
    assert [m["Body"] for m in queue.receive_all()] == [LARGE]


class Unprocessed:
    """A DynamoDB client whose BatchGetItem leaves every key unprocessed for the first ``rounds``
    calls (as DynamoDB does when throttled, or past 16 MB in one response)."""

    def __init__(self, client: Any, rounds: int) -> None:
        self._client = client
        self.rounds = rounds
        self.calls = 0

    def batch_get_item(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.rounds:
            return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}
        return self._client.batch_get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_unprocessed_keys_are_asked_for_again(store, clients, clock, queue):
    message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE)
    store.insert(message, clock.now())
    client = Unprocessed(store.client, rounds=2)
    throttled = DynamoScheduleStore(store.table_name, dynamodb=client)  # type: ignore[arg-type]
    assert make_worker(throttled, clients, clock).run_once().dispatched == 1
    assert client.calls == 3
    assert [m["Body"] for m in queue.receive_all()] == [LARGE]


def test_a_payload_left_unprocessed_leaves_its_occurrence_unsent_and_the_others_go(store, clients, clock, queue):
    large = ScheduledMessage.delay(queue.target, at=clock.now(), payload=LARGE)
    small = ScheduledMessage.delay(queue.target, at=clock.now(), payload=SMALL)
    for m in (large, small):
        store.insert(m, clock.now())
    client = Unprocessed(store.client, rounds=1000)
    throttled = DynamoScheduleStore(store.table_name, dynamodb=client)  # type: ignore[arg-type]
    worker = make_worker(throttled, clients, clock, lease=30 * S, dispatch_timeout=S)
    summary = worker.run_once()
    assert (summary.claimed, summary.dispatched, summary.quarantined) == (1, 1, 0)
    assert [m["Body"] for m in queue.receive_all()] == [SMALL]
    snap = store.inspect(large.schedule_id)
    assert (snap.status, snap.attempts) == (ScheduleStatus.PENDING, 1)  # claimed, unsent: its lease will end

    client.rounds = 0
    clock.advance(30)
    assert worker.run_once().dispatched == 1
    assert [m["Body"] for m in queue.receive_all()] == [LARGE]
