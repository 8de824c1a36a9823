"""One contract suite, three stores: memory, DynamoDB on moto, DynamoDB on dynalite.

``any_store`` is every implementation of ``ScheduleStore`` + ``ScheduleAdmin``; ``sink`` records
what a worker sends (no SQS or SNS), so on the memory store a test touches no network at all.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from hexeract_scheduler import InMemoryScheduleStore
from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.sinks.batch import Outcome
from hexeract_scheduler.sinks.dispatcher import Dispatcher

from ..conftest import unique

STORES = ("memory", "moto", "dynalite")
TARGET = "sqs:arn:aws:sqs:us-east-1:123456789012:contract"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("backend")
        kinds = ["memory", *chosen] if chosen else list(STORES)
        metafunc.parametrize("store_kind", kinds)


@pytest.fixture
def any_store(store_kind: str, request: pytest.FixtureRequest) -> Any:
    if store_kind == "memory":
        return InMemoryScheduleStore(rng=random.Random(7))
    from hexeract_scheduler.aws.clients import ClientFactory
    from hexeract_scheduler.store.dynamo import DynamoScheduleStore

    from ..conftest import dynalite_endpoint

    endpoint = request.getfixturevalue("endpoint")
    url = endpoint.url if store_kind == "moto" else dynalite_endpoint(request.config).url
    from hexeract_scheduler.aws.clients import Connection

    store = DynamoScheduleStore(unique("contract"), dynamodb=ClientFactory(Connection(endpoint_url=url)).dynamodb())
    store.create_table(shards=4)
    return store


class RecordingSink:
    """Sends nothing: records each occurrence it is given; ``failing`` targets fail with an error."""

    def __init__(self) -> None:
        self.sent: list[LeasedOccurrence] = []
        self.failing: set[str] = set()
        self._lock = threading.Lock()

    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        if str(target) in self.failing:
            return [f"Refused: {target} is down"] * len(occs)
        with self._lock:
            self.sent.extend(occs)
        return [None] * len(occs)


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


def worker_on(store: Any, sink: RecordingSink, clock: Any, **config: Any) -> SchedulerWorker:
    config.setdefault("jitter", False)
    return SchedulerWorker(
        store,
        Dispatcher({"sqs": sink, "sns": sink}),
        SchedulerWorkerConfig(**config),
        clock=clock,
        rng=random.Random(7),
    )
