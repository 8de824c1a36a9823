"""Shared benchmark plumbing: a moto server in its own process, request hooks, seeding, results."""

from __future__ import annotations

import json
import os
import platform
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
    os.environ.pop(_var, None)

from hexeract_scheduler.aws import ClientFactory, Connection  # noqa: E402
from hexeract_scheduler.clock import UTC  # noqa: E402
from hexeract_scheduler.dynamo import DynamoScheduleStore  # noqa: E402
from hexeract_scheduler.model import ScheduledMessage, Target, Trigger  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BIN = Path(sys.executable).parent


def conditions() -> dict[str, Any]:
    import boto3
    import moto

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "boto3": boto3.__version__,
        "moto": moto.__version__,
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "conditions": conditions(), **data}, indent=2) + "\n")
    print(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    return path


@contextmanager
def moto_server() -> Iterator[str]:
    """moto in a process of its own on 127.0.0.1 (so its work does not share our GIL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = BIN / "moto_server"
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def clients_for(url: str, **kwargs: Any) -> ClientFactory:
    return ClientFactory(Connection(endpoint_url=url), **kwargs)


class RequestCounter:
    """HTTP requests per operation (``before-send`` fires once per request, retries included)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def install(self, *clients: Any) -> RequestCounter:
        for client in clients:
            client.meta.events.register("before-send", self._count)
        return self

    def _count(self, event_name: str, **_: Any) -> None:
        self.counts[event_name.split(".")[-1]] += 1

    def reset(self) -> None:
        self.counts.clear()


def inject_latency(seconds: float, *clients: Any) -> None:
    """Every request of these clients waits ``seconds`` before it is sent (a network round trip)."""
    if seconds <= 0:
        return

    def sleep(**_: Any) -> None:
        time.sleep(seconds)

    for client in clients:
        client.meta.events.register("before-send", sleep)


def seed_due(
    clients: ClientFactory, table: str, n: int, *, payload: bytes = b'{"k": 1}', seed: int = 0, shards: int = 4
) -> tuple[DynamoScheduleStore, str]:
    """A table with ``n`` due one-shot schedules to one queue; returns (store, queue URL)."""
    rng = random.Random(seed)
    store = DynamoScheduleStore(table, dynamodb=clients.dynamodb())
    store.create_table(shards=shards)
    url = clients.sqs().create_queue(QueueName=f"{table}-q")["QueueUrl"]
    now = datetime.now(UTC)
    msgs = [
        ScheduledMessage(
            Target.sqs(url),
            Trigger(at=now - timedelta(seconds=60, milliseconds=rng.randrange(60_000))),
            payload=payload,
            schedule_id=uuid.UUID(int=rng.getrandbits(128), version=4),
        )
        for _ in range(n)
    ]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda m: store.insert(m, now), msgs))
    return store, url


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


class Purger:
    """Keeps queues empty (receive + delete) from a thread, with a client of its own (not counted,
    no injected latency). moto's SendMessageBatch slows down linearly with the queue depth (about
    10 ms per 100 queued messages); a real consumer would keep the queue short, so do we."""

    def __init__(self, url: str, queues: list[str], every: float = 0.05) -> None:
        self.sqs = clients_for(url).sqs()
        self.queues = queues
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Purger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            got = 0
            for q in self.queues:
                msgs = self.sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=600)
                entries = [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs.get("Messages", []))
                ]
                if entries:
                    self.sqs.delete_message_batch(QueueUrl=q, Entries=entries)  # type: ignore[arg-type]
                got += len(entries)
            if not got:
                self._stop.wait(self.every)
