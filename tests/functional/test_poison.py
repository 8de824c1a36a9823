"""No bad item, network blip or hung call stops the dispatcher (on both DynamoDB backends).

Items are written into the table by hand, as a bug, a migration or another tool could: each one
must be isolated (quarantined: dead-lettered with a reason naming the problem) while every healthy
schedule beside it, in the same batch and the same shard, is delivered in the same cycle.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hexeract_scheduler import ScheduledMessage, ScheduleStatus
from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.clock import to_ms
from hexeract_scheduler.store.dynamo import DynamoScheduleStore, shard_of
from hexeract_scheduler.store.dynamo import expressions as x

from ..conftest import Backend, make_worker
from ..support.faultproxy import fault_proxy
from ..support.poison import CORRUPTIONS

S = timedelta(seconds=1)
HEALTHY = 12


def raw_item(store: DynamoScheduleStore, message: ScheduledMessage, now) -> dict[str, Any]:
    """The item ``insert`` writes for ``message``, read back raw (then removed), to corrupt."""
    store.insert(message, now)
    key = {"schedule_id": {"S": str(message.schedule_id)}}
    item = store.client.get_item(TableName=store.table_name, Key=key, ConsistentRead=True)["Item"]
    store.client.delete_item(TableName=store.table_name, Key=key)
    return item


def put(store: DynamoScheduleStore, item: dict[str, Any]) -> None:
    store.client.put_item(TableName=store.table_name, Item=item)


def healthy(store, clock, queue, n: int = HEALTHY) -> list[ScheduledMessage]:
    messages = [ScheduledMessage.delay(queue.target, at=clock.now(), payload=f'{{"n": {i}}}') for i in range(n)]
    for m in messages:
        store.insert(m, clock.now())
    return messages


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_bad_item_is_isolated_and_every_healthy_schedule_delivered(store, clients, clock, queue, corruption, caplog):
    corrupt, reason = CORRUPTIONS[corruption]
    bad = corrupt(raw_item(store, ScheduledMessage.delay(queue.target, at=clock.now()), clock.now()))
    put(store, bad)
    good = healthy(store, clock, queue)
    worker = make_worker(store, clients, clock, batch_size=HEALTHY + 1, lease=60 * S, dispatch_timeout=S)

    with caplog.at_level(logging.ERROR, logger="hexeract_scheduler"):
        summary = worker.run_once()
        worker.run_once()  # quarantined once, never seen again

    assert summary.dispatched == HEALTHY, summary  # the whole batch, in the same cycle
    assert summary.failed_cycles == 0 and summary.lease_lost == 0
    assert len(queue.receive_all()) == HEALTHY
    for m in good:
        assert store.inspect(m.schedule_id).status is ScheduleStatus.DELIVERED
    key = {"schedule_id": bad["schedule_id"]}
    stored = store.client.get_item(TableName=store.table_name, Key=key, ConsistentRead=True)["Item"]
    assert (summary.quarantined, summary.unreadable) == (1, 0)
    assert stored["status"]["S"] == "dead_lettered"
    assert reason in stored["last_error"]["S"]
    assert "due_shard" not in stored and stored["dl_pk"]["S"]  # out of the due index, listed as dead
    [logged] = [r for r in caplog.records if "quarantined" in r.getMessage()]
    assert logged.item_key == bad["schedule_id"]["S"]  # type: ignore[attr-defined]
    # The listings show what they can and report what they skipped.
    pending, dead = store.list_pending(), store.list_dead_letter()
    assert all(s.status is not None for s in [*pending, *dead])
    if corruption == "schedule_id not a UUID":
        assert [k for k, _ in dead.skipped] == ["not-a-uuid"]


def test_an_item_due_under_a_lease_in_force_is_in_flight_and_claimed_once_the_lease_ends(
    store, clients, clock, queue, caplog
):
    """A claim leaves ``due_at`` where it is: an item due under a lease in force is one some worker
    holds (or held, and crashed). Nothing claims, quarantines or reports it before the lease ends;
    then it is claimed and delivered like any other."""
    message = ScheduledMessage.delay(queue.target, at=clock.now() - 60 * S)
    leased = raw_item(store, message, clock.now()) | {"leased_until": {"N": str(to_ms(clock.now() + 30 * S))}}
    put(store, leased)
    worker = make_worker(store, clients, clock, poll_interval=S)

    with caplog.at_level(logging.ERROR, logger="hexeract_scheduler"):
        before = worker.run(cycles=3)
    assert (before.claimed, before.lost_claims, before.quarantined, before.unreadable) == (0, 0, 0, 0)
    assert store.inspect(message.schedule_id).attempts == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    clock.advance(30)
    after = worker.run_once()
    assert (after.claimed, after.dispatched) == (1, 1)
    assert store.inspect(message.schedule_id).status is ScheduleStatus.DELIVERED
    assert len(queue.receive_all()) == 1


def test_entries_in_flight_at_the_head_of_a_shard_starve_nothing(clients, clock, queue):
    """45 entries due a minute ago, under leases an hour long (in flight with some worker), ahead
    of 12 healthy ones in a one-shard table: the claims read past them (the index carries
    ``leased_until``), never try them, and deliver every healthy schedule."""
    store = DynamoScheduleStore(f"hol-{uuid.uuid4().hex[:8]}", dynamodb=clients.dynamodb())
    store.create_table(shards=1)
    template = raw_item(store, ScheduledMessage.delay(queue.target, at=clock.now()), clock.now())
    head = to_ms(clock.now() - 60 * S)
    lease = {"leased_until": {"N": str(to_ms(clock.now() + 3600 * S))}}
    for _ in range(45):
        put(store, {**template, "schedule_id": {"S": str(uuid.uuid4())}, "due_at": {"N": str(head)}} | lease)
    good = healthy(store, clock, queue)
    worker = make_worker(store, clients, clock, poll_interval=S)

    total = worker.run(cycles=3)
    assert total.dispatched == HEALTHY
    assert (total.lost_claims, total.unreadable, total.quarantined) == (0, 0, 0)  # never even tried
    assert all(store.inspect(m.schedule_id).status is ScheduleStatus.DELIVERED for m in good)


class RefusedQuarantine:
    """A DynamoDB client that refuses every quarantining write, as DynamoDB refuses a write no
    item can take (one that would grow a hand-written item past 400 KB, a denied action)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def update_item(self, **kwargs: Any) -> Any:
        if kwargs.get("ConditionExpression") == x.QUARANTINE_CONDITION:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "refused"}}, "UpdateItem")
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_stuck_entries_at_the_head_of_a_shard_starve_nothing_and_the_loop_does_not_spin(clients, clock, queue):
    """Items no write can take (unreadable, and their quarantine refused) at the head of a shard:
    each is reported once, then read past; every healthy schedule behind them is delivered."""
    store = DynamoScheduleStore(f"hol-{uuid.uuid4().hex[:8]}", dynamodb=clients.dynamodb())
    store.create_table(shards=1)
    template = raw_item(store, ScheduledMessage.delay(queue.target, at=clock.now()), clock.now())
    head = to_ms(clock.now() - 60 * S)
    for i in range(45):  # due a minute ago, not UUIDs: straight to quarantine, which is refused
        put(store, {**template, "schedule_id": {"S": f"stuck-{i:02}"}, "due_at": {"N": str(head)}})
    good = healthy(store, clock, queue)
    refusing = DynamoScheduleStore(store.table_name, dynamodb=RefusedQuarantine(store.client))  # type: ignore[arg-type]
    worker = make_worker(refusing, clients, clock, poll_interval=S)

    total = worker.run(cycles=12)
    assert total.dispatched == HEALTHY
    assert total.unreadable == 45  # each stuck entry reported once, then read past
    assert all(store.inspect(m.schedule_id).status is ScheduleStatus.DELIVERED for m in good)


def test_only_entries_in_flight_make_the_loop_wait_not_spin(clients, clock, queue, store):
    template = raw_item(store, ScheduledMessage.delay(queue.target, at=clock.now()), clock.now())
    for _ in range(15):
        sid = uuid.uuid4()
        put(
            store,
            {**template, "schedule_id": {"S": str(sid)}, "due_shard": {"S": str(shard_of(sid, 4))}}
            | {"leased_until": {"N": str(to_ms(clock.now() + 3600 * S))}},
        )
    worker = make_worker(store, clients, clock, poll_interval=S)
    start = clock.monotonic()
    total = worker.run(cycles=5)
    assert total.claimed == 0 and total.lost_claims == 0
    assert clock.monotonic() - start >= 4.0  # 4 waits of a poll interval, not 4 x 5 ms


def test_a_connection_reset_is_transient(backend: Backend, store, clock, queue):
    """Resets on DynamoDB's connection: the loop backs off and delivers; nothing is fatal."""
    good = healthy(store, clock, queue, n=3)
    with fault_proxy(backend.dynamodb_url, mode="reset") as proxy:
        factory = ClientFactory(
            Connection(endpoint_url=backend.aws_url, service_endpoints=(("dynamodb", proxy.url),)), retries=1
        )
        flaky = DynamoScheduleStore(store.table_name, dynamodb=factory.dynamodb(), shards=4)
        worker = make_worker(flaky, factory, clock)
        assert worker.run(cycles=2).claimed == 0  # every call reset, and the loop went on
        assert proxy.faults >= 2
        proxy.mode = "pass"
        total = worker.run(cycles=3)
    assert total.dispatched == 3 and total.failed_cycles == 0
    assert all(store.inspect(m.schedule_id).status is ScheduleStatus.DELIVERED for m in good)


def test_a_hung_endpoint_cannot_hold_a_run_past_its_hard_deadline(backend: Backend, store, clock, queue):
    healthy(store, clock, queue, n=3)
    with fault_proxy(backend.dynamodb_url, mode="hang") as proxy:
        factory = ClientFactory(
            Connection(endpoint_url=backend.aws_url, service_endpoints=(("dynamodb", proxy.url),)),
            read_timeout=30,
        )
        hung = DynamoScheduleStore(store.table_name, dynamodb=factory.dynamodb(), shards=4)
        worker = make_worker(hung, factory, clock)
        worker.clock = _RealMonotonic(clock)  # the hang is real: bound it by real time
        t0 = time.monotonic()
        total = worker.run(cycles=100, hard_deadline=time.monotonic() + 1.0)
        elapsed = time.monotonic() - t0
        worker.close()
    assert elapsed < 2.0, elapsed  # not 30 s x retries
    assert total.dispatched == 0 and proxy.faults >= 1


class _RealMonotonic:
    """The manual clock's instants with the real monotonic clock and sleeps (for a real hang)."""

    def __init__(self, manual: Any) -> None:
        self._manual = manual

    def now(self):
        return self._manual.now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, 0.05))
