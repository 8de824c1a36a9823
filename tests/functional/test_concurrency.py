"""Racing workers, stale index entries, timeouts and throttling."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hexeract_scheduler import ScheduledMessage, SchedulerWorker, SchedulerWorkerConfig, SystemClock
from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.errors import RetryableError
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.store.dynamo import DUE_INDEX, DynamoScheduleStore

from ..conftest import make_worker

S = timedelta(seconds=1)


def test_racing_workers_deliver_every_schedule(store, clients, queue, backend):
    """Four workers, each with its own clients, over HTTP against one endpoint: 300 due one-shots."""
    clock = SystemClock()
    n = 300
    for i in range(n):
        store.insert(ScheduledMessage.delay(queue.target, at=clock.now() - S, payload=f'{{"i": {i}}}'), clock.now())

    workers = []
    for _ in range(4):
        own = ClientFactory(backend.connection)
        workers.append(
            SchedulerWorker(
                DynamoScheduleStore(store.table_name, dynamodb=own.dynamodb()),
                Dispatcher.for_clients(own),
                SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=20), concurrency=8),
                clock=clock,
            )
        )
    deadline = clock.monotonic() + 90
    threads = [threading.Thread(target=w.run, kwargs={"deadline": deadline}) for w in workers]
    for t in threads:
        t.start()
    sqs = clients.sqs()
    while clock.monotonic() < deadline:
        attrs = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["ApproximateNumberOfMessages"])
        if int(attrs["Attributes"]["ApproximateNumberOfMessages"]) >= n:
            break
        time.sleep(0.25)
    for w in workers:
        w.stop()
    for t in threads:
        t.join()
    for w in workers:
        w.close()
    received: list[dict[str, Any]] = queue.receive_all(max_rounds=n)

    per_occurrence = Counter(m["MessageAttributes"]["occurrence_id"]["StringValue"] for m in received)
    assert len(per_occurrence) == n, "every schedule delivered, none lost"
    duplicates = sum(per_occurrence.values()) - n
    # A duplicate needs a lease to expire (300 s here), so this run must have none.
    assert duplicates == 0
    assert store.list_pending() == []


class StaleIndex:
    """A DynamoDB client whose due-index queries replay an old answer, as a lagging GSI can."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.stale: dict[str, Any] | None = None

    def query(self, **kwargs: Any) -> Any:
        if kwargs.get("IndexName") == DUE_INDEX and self.stale is not None:
            shard = kwargs["ExpressionAttributeValues"][":s"]
            return {"Items": [i for i in self.stale["Items"] if i["due_shard"] == shard]}
        return self._client.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_stale_index_entries_are_refused_by_the_claim_condition(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(msg, clock.now())
    stale = StaleIndex(clients.dynamodb())
    lagging = DynamoScheduleStore(store.table_name, dynamodb=stale)  # type: ignore[arg-type]
    stale.stale = clients.dynamodb().query(
        TableName=store.table_name,
        IndexName=DUE_INDEX,
        KeyConditionExpression="due_shard = :s",
        ExpressionAttributeValues={":s": {"S": str(msg.schedule_id.int % 4)}},
    )
    worker = make_worker(lagging, clients, clock)
    assert worker.run_once().dispatched == 1
    s = worker.run_once()  # the index still shows the delivered item as due
    assert (s.claimed, s.lost_claims, s.dispatched) == (0, 1, 0)
    assert len(queue.receive_all()) == 1


class HangingSink:
    def __init__(self) -> None:
        self.release = threading.Event()

    def send_batch(self, target, occs):
        self.release.wait(5)
        return [None] * len(occs)


def test_a_dispatch_over_the_timeout_is_a_failed_attempt(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(msg, clock.now())
    sink = HangingSink()
    worker = make_worker(store, clients, clock, Dispatcher({"sqs": sink}), dispatch_timeout=timedelta(milliseconds=200))
    s = worker.run_once()
    sink.release.set()
    assert (s.claimed, s.retried, s.dispatched) == (1, 1, 0)
    assert "timed out" in store.inspect(msg.schedule_id).last_error


def test_throttling_is_retryable_and_the_loop_backs_off(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now() + 2 * S)
    store.insert(msg, clock.now())
    throttled = {"left": 3}

    def throttle(**kwargs: Any) -> None:
        if throttled["left"] > 0:
            throttled["left"] -= 1
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "Query"
            )

    client = ClientFactory(clients.connection, retries=1).dynamodb()
    client.meta.events.register("before-call.dynamodb.Query", throttle)
    with pytest.raises(RetryableError, match="ProvisionedThroughputExceeded"):
        DynamoScheduleStore(store.table_name, dynamodb=client, read_shards=(0,)).find_due(clock.now(), 10)
    flaky = DynamoScheduleStore(store.table_name, dynamodb=client)

    worker = make_worker(flaky, clients, clock)
    summary = worker.run(deadline=clock.monotonic() + 40)
    assert summary.dispatched == 1
    assert throttled["left"] == 0
    assert len(queue.receive_all()) == 1


def test_the_loop_sleeps_until_the_next_due_instant(store, clients, clock, queue):
    for seconds in (5, 17, 31):
        store.insert(ScheduledMessage.delay(queue.target, at=clock.now() + seconds * S), clock.now())
    worker = make_worker(store, clients, clock, poll_interval=S, dispatch_timeout=S)
    start = clock.monotonic()
    summary = worker.run(deadline=start + 40)
    assert summary.dispatched == 3
    assert max(summary.lag_ms) == 0  # each sent at its instant on the injected clock
    # Idle polls are one per poll interval (or fewer, when the look-ahead saw the next instant), and
    # one more look after each settled batch (its acks may have written the next instant).
    assert summary.cycles <= 41 + 3


def test_an_error_on_one_claim_keeps_the_claims_that_landed(store, clients, clock, queue):
    msgs = [ScheduledMessage.delay(queue.target, at=clock.now()) for _ in range(3)]
    for m in msgs:
        store.insert(m, clock.now())
    unlucky = str(msgs[0].schedule_id)

    def throttle_one(params: dict[str, Any], **kwargs: Any) -> None:
        if params["Key"]["schedule_id"]["S"] == unlucky:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")

    client = ClientFactory(clients.connection, retries=1).dynamodb()
    client.meta.events.register("provide-client-params.dynamodb.UpdateItem", throttle_one)
    flaky = DynamoScheduleStore(store.table_name, dynamodb=client)
    batch = flaky.claim_due(clock.now(), timedelta(seconds=30), 10)
    assert {str(o.schedule_id) for o in batch.leased} == {str(m.schedule_id) for m in msgs[1:]}
    assert store.inspect(msgs[0].schedule_id).attempts == 0  # still due, budget untouched

    with pytest.raises(RetryableError):  # nothing landed: the worker must back off
        flaky.claim_due(clock.now(), timedelta(seconds=30), 10)
