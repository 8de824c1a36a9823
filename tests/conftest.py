"""Shared fixtures: one moto server over real HTTP for the session, a fresh table per test."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

# Never let a test reach real AWS, whatever the developer's environment holds.
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
    os.environ.pop(_var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"

from hexeract_scheduler.aws import ClientFactory, Connection  # noqa: E402
from hexeract_scheduler.clock import UTC, ManualClock  # noqa: E402
from hexeract_scheduler.local import LocalEndpoint, spawn_local_endpoint  # noqa: E402
from hexeract_scheduler.sinks import Dispatcher  # noqa: E402
from hexeract_scheduler.store import DynamoScheduleStore  # noqa: E402
from hexeract_scheduler.worker import SchedulerWorker, SchedulerWorkerConfig  # noqa: E402

_names = itertools.count()
T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def endpoint() -> Iterator[LocalEndpoint]:
    ep = spawn_local_endpoint()
    yield ep
    ep.stop()


@pytest.fixture(scope="session")
def clients(endpoint: LocalEndpoint) -> ClientFactory:
    return ClientFactory(Connection(endpoint_url=endpoint.url))


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def store(clients: ClientFactory) -> DynamoScheduleStore:
    s = DynamoScheduleStore(unique("schedules"), dynamodb=clients.dynamodb())
    s.create_table(shards=4)
    return s


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@dataclass
class Queue:
    url: str
    arn: str
    clients: ClientFactory

    @property
    def target(self) -> str:
        return f"sqs:{self.url}"

    def receive_all(self, max_rounds: int = 20) -> list[dict[str, Any]]:
        """Drain the queue (moto returns at most 10 per call)."""
        sqs = self.clients.sqs()
        out: list[dict[str, Any]] = []
        for _ in range(max_rounds):
            resp = sqs.receive_message(
                QueueUrl=self.url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
            )
            msgs = resp.get("Messages", [])
            if not msgs:
                break
            out += msgs
            sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)],
            )
        return out


def make_queue(clients: ClientFactory, fifo: bool = False) -> Queue:
    sqs = clients.sqs()
    name = unique("q") + (".fifo" if fifo else "")
    attrs = {"FifoQueue": "true"} if fifo else {}
    url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return Queue(url, arn, clients)


@pytest.fixture
def queue(clients: ClientFactory) -> Queue:
    return make_queue(clients)


def make_worker(
    store: DynamoScheduleStore,
    clients: ClientFactory,
    clock: ManualClock,
    dispatcher: Dispatcher | None = None,
    **config: Any,
) -> SchedulerWorker:
    config.setdefault("jitter", False)
    return SchedulerWorker(
        store,
        dispatcher or Dispatcher.for_clients(clients),
        SchedulerWorkerConfig(**config),
        clock=clock,
        rng=random.Random(7),
    )
