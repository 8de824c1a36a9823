"""Shared fixtures: local endpoints over real HTTP for the session, a fresh table per test.

Every test that talks to DynamoDB (through ``backend``, ``clients`` or ``store``) runs twice: on
moto, and on dynalite, an independent DynamoDB that applies DynamoDB's request validation (moto
accepts requests DynamoDB rejects) and atomic per-item writes. SQS and SNS are moto's in both runs.
``pytest --backend moto`` (or ``dynalite``) runs one of them while iterating; ``make test`` runs both.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

# Never let a test reach real AWS, whatever the developer's environment holds.
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
    os.environ.pop(_var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"

from hexeract_scheduler.aws.clients import ClientFactory, Connection  # noqa: E402
from hexeract_scheduler.domain.clock import UTC, ManualClock  # noqa: E402
from hexeract_scheduler.engine.config import SchedulerWorkerConfig  # noqa: E402
from hexeract_scheduler.engine.worker import SchedulerWorker  # noqa: E402
from hexeract_scheduler.local import LocalEndpoint, spawn_local_endpoint  # noqa: E402
from hexeract_scheduler.sinks.dispatcher import Dispatcher  # noqa: E402
from hexeract_scheduler.store.dynamo import DynamoScheduleStore  # noqa: E402

from .support.dynalite import spawn_dynalite  # noqa: E402

_names = itertools.count()
T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("moto", "dynalite")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="append",
        choices=BACKENDS,
        help="run the DynamoDB-facing tests on this backend only (repeatable; default: all of them)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("backend") or list(BACKENDS)
        metafunc.parametrize("backend", chosen, indirect=True, scope="session")


@pytest.fixture(scope="session")
def endpoint() -> Iterator[LocalEndpoint]:
    """moto: SQS and SNS for every test, and DynamoDB for the ``moto`` backend."""
    ep = spawn_local_endpoint()
    yield ep
    ep.stop()


_dynalite: list[LocalEndpoint] = []


def dynalite_endpoint(config: pytest.Config) -> LocalEndpoint:
    """One dynalite for the whole session, started on first use and stopped at the session's end.

    Not a fixture: pytest may tear a parametrised session fixture down and set it up again as it
    reorders tests, and whatever it requested would go with it (a restarted endpoint on another
    port, while clients built for the old one live on)."""
    if not _dynalite:
        _dynalite.append(spawn_dynalite())
        config.add_cleanup(_dynalite[0].stop)
    return _dynalite[0]


@dataclass(frozen=True)
class Backend:
    """Where DynamoDB is served for one run of the DynamoDB-facing tests (SQS/SNS: always moto)."""

    name: str
    aws_url: str  # moto
    dynamodb_url: str
    connection: Connection = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "connection",
            Connection(endpoint_url=self.aws_url, service_endpoints=(("dynamodb", self.dynamodb_url),)),
        )

    @property
    def env(self) -> dict[str, str]:
        """The standard endpoint variables, for processes (handlers, the console script) that
        build their clients from the environment."""
        return {"AWS_ENDPOINT_URL": self.aws_url, "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_url}


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest, endpoint: LocalEndpoint) -> Backend:
    if request.param == "moto":
        return Backend("moto", endpoint.url, endpoint.url)
    return Backend("dynalite", endpoint.url, dynalite_endpoint(request.config).url)


@pytest.fixture(scope="session")
def clients(backend: Backend) -> ClientFactory:
    return ClientFactory(backend.connection)


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def dead_port() -> int:
    """A port on 127.0.0.1 where nothing listens: bound by the system, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def store(clients: ClientFactory, backend: Backend) -> DynamoScheduleStore:
    if backend.name == "dynalite":
        _dynalite[0].check_alive()  # a dead endpoint fails here, with its stderr, not as a hang
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


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """An environment with no AWS credentials anywhere, real-AWS style (no --conn URL, so no
    stand-in credentials), its endpoint on a dead loopback port, no instance metadata; and a guard
    that records any connection attempted (there must be none: nothing can be signed)."""
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{dead_port()}")
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def guard(sock: socket.socket, address: Any) -> None:
        attempts.append(address)
        if not _loopback(str(address[0])):
            raise OSError(f"test guard: no connection may leave the machine ({address})")
        real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guard)
    yield attempts
