"""Shared benchmark plumbing: local endpoints, a latency proxy, request counters, the endpoint's
ceiling, seeding, the Lambda's composition of store and worker, results.

Only the package's public API is used (``Settings``, the compositions of ``service.compose``,
``ScheduledMessage``, ``ClientFactory``/``Connection``, ``hexeract_scheduler.local``)
and the AWS APIs themselves: nothing here knows the table's item layout, so the benchmarks keep
working when it changes.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
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
from typing import Any, ClassVar

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
    os.environ.pop(_var, None)

import boto3  # noqa: E402

from hexeract_scheduler.aws.clients import ClientFactory, Connection  # noqa: E402
from hexeract_scheduler.domain.clock import UTC  # noqa: E402
from hexeract_scheduler.domain.model import ScheduledMessage, Target, Trigger  # noqa: E402
from hexeract_scheduler.engine.worker import SchedulerWorker  # noqa: E402
from hexeract_scheduler.local import LocalEndpoint, spawn_local_endpoint  # noqa: E402
from hexeract_scheduler.service.compose import build_lambda_dispatcher, build_store  # noqa: E402
from hexeract_scheduler.service.settings import Settings  # noqa: E402
from hexeract_scheduler.store.dynamo import DynamoScheduleStore  # noqa: E402
from tests.support.dynalite import DYNALITE_SERVER, spawn_dynalite  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BACKENDS = ("dynalite", "moto")


def backends(choice: str) -> list[str]:
    """``--backend`` values: dynalite, moto or both (dynalite first)."""
    return list(BACKENDS) if choice == "both" else [choice]


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _version(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def conditions() -> dict[str, Any]:
    import botocore
    import moto

    dynalite = DYNALITE_SERVER.parent / "node_modules" / "dynalite" / "package.json"
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "boto3": boto3.__version__,
        "botocore": botocore.__version__,
        "moto": moto.__version__,
        "dynalite": json.loads(dynalite.read_text())["version"] if dynalite.exists() else None,
        "node": _version(["node", "--version"]) if shutil.which("node") else None,
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def print_conditions() -> None:
    c = conditions()
    print(
        f"conditions: Python {c['python']} on {c['cpus']} CPUs ({c['machine']}), load average "
        f"{'/'.join(str(x) for x in c['load_average_1_5_15'])}; boto3 {c['boto3']}, moto {c['moto']}, "
        f"dynalite {c['dynalite']} on Node {c['node']}",
        flush=True,
    )


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "conditions": conditions(), **data}, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc; None elsewhere)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class CpuMeter:
    """CPU used by this process and the endpoints' processes between ``start()`` and ``stop()``, as
    cores (CPU seconds per wall second): who was busy while something was measured."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if pid is not None}

    def _now(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"client": time.process_time()}
        out |= {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        return out

    def start(self) -> CpuMeter:
        self._t0, self._c0 = time.perf_counter(), self._now()
        return self

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self._t0
        end = self._now()
        return {
            name: round((end[name] - c0) / wall, 2)  # type: ignore[operator]
            for name, c0 in self._c0.items()
            if c0 is not None and end[name] is not None
        }


def format_cores(cores: dict[str, float]) -> str:
    return ", ".join(f"{name} {v:.2f}" for name, v in cores.items())


_names = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


# -- endpoints ---------------------------------------------------------------------------------


def _first_line(proc: subprocess.Popen[str], what: str, timeout: float = 30.0) -> str:
    assert proc.stdout is not None
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    line = got[0].strip() if got else ""
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"{what} did not start (got {line!r})")
    return line


class LatencyProxy:
    """``bench.latencyproxy`` in a child process, one listening port per upstream URL."""

    def __init__(self, latency_ms: float, upstreams: list[str]) -> None:
        self.latency_ms = latency_ms
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.latencyproxy", "--latency-ms", str(latency_ms), *upstreams],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.urls = {up: _first_line(self.proc, "the latency proxy") for up in upstreams}

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Endpoints:
    """moto (SQS and SNS always; DynamoDB for the ``moto`` backend) and, when asked for, dynalite
    (DynamoDB for the ``dynalite`` backend), each in a child process; latency proxies in front of
    both, one per latency, started on first use."""

    def __init__(self, names: list[str]) -> None:
        self.moto: LocalEndpoint = spawn_local_endpoint()
        self.dynalite: LocalEndpoint | None = spawn_dynalite() if "dynalite" in names else None
        self._proxies: dict[float, LatencyProxy] = {}

    def __enter__(self) -> Endpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        for proxy in self._proxies.values():
            proxy.stop()
        if self.dynalite is not None:
            self.dynalite.stop()
        self.moto.stop()

    def pids(self, backend: str, latency_ms: float = 0.0) -> dict[str, int | None]:
        """The processes a run on ``backend`` at ``latency_ms`` talks to, by role."""
        out: dict[str, int | None] = {"moto": self.moto.process.pid if self.moto.process else None}
        if backend == "dynalite" and self.dynalite is not None and self.dynalite.process is not None:
            out["dynalite"] = self.dynalite.process.pid
        if latency_ms in self._proxies:
            out["proxy"] = self._proxies[latency_ms].proc.pid
        return out

    def dynamodb_url(self, backend: str) -> str:
        if backend == "dynalite":
            assert self.dynalite is not None, "dynalite was not started"
            self.dynalite.check_alive()
            return self.dynalite.url
        return self.moto.url

    def connection(self, backend: str, latency_ms: float = 0.0) -> Connection:
        """DynamoDB on ``backend``, SQS/SNS on moto, every request ``latency_ms`` late (0: direct)."""
        ddb, aws = self.dynamodb_url(backend), self.moto.url
        if latency_ms > 0:
            if latency_ms not in self._proxies:
                upstreams = [self.moto.url] + ([self.dynalite.url] if self.dynalite else [])
                self._proxies[latency_ms] = LatencyProxy(latency_ms, upstreams)
            urls = self._proxies[latency_ms].urls
            ddb, aws = urls[ddb], urls[aws]
        return Connection(endpoint_url=aws, service_endpoints=(("dynamodb", ddb),))


# -- counting the requests a worker makes --------------------------------------------------------


class ApiCounter:
    """AWS API calls per operation, counted with botocore hooks on a session: every client the
    session creates, whatever its region (the sinks make one per target region), is counted.

    ``after-call`` fires once per API call with its final answer (retries are not calls);
    ``before-send`` once per HTTP request, retries included. Counting starts with ``start()``.
    ``sent`` counts the entries the sinks' batches accepted; ``reached`` is set once it gets to
    ``target``.
    """

    SEND_OPS: ClassVar[dict[str, str | None]] = {
        "PublishBatch": "Successful",
        "SendMessageBatch": "Successful",
        "Publish": None,
        "SendMessage": None,
    }

    def __init__(self, target: int | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.http_requests = 0
        self.sent = 0
        self.target = target
        self.reached = threading.Event()
        self.active = False
        self._lock = threading.Lock()
        self.session = boto3.session.Session()
        self.session.events.register("after-call", self._after_call)
        self.session.events.register("after-call-error", self._after_call_error)
        self.session.events.register("before-send", self._before_send)

    def clients(self, connection: Connection, **kwargs: Any) -> ClientFactory:
        return ClientFactory(connection, session=self.session, **kwargs)

    def start(self) -> None:
        with self._lock:
            self.calls.clear()
            self.errors.clear()
            self.http_requests = 0
            self.sent = 0
            self.active = True

    def _before_send(self, **_: Any) -> None:
        if self.active:
            with self._lock:
                self.http_requests += 1

    def _after_call(self, event_name: str, parsed: dict[str, Any] | None = None, **_: Any) -> None:
        if not self.active:
            return
        op = event_name.split(".")[-1]
        parsed = parsed or {}
        code = parsed.get("Error", {}).get("Code")
        with self._lock:
            self.calls[op] += 1
            if code:
                self.errors[f"{op}:{code}"] += 1
            elif op in self.SEND_OPS:
                field = self.SEND_OPS[op]
                self.sent += len(parsed.get(field, [])) if field else 1
            if self.target is not None and self.sent >= self.target:
                self.reached.set()

    def _after_call_error(self, event_name: str, exception: Exception | None = None, **_: Any) -> None:
        if self.active:
            with self._lock:
                op = event_name.split(".")[-1]
                self.calls[op] += 1
                self.errors[f"{op}:{type(exception).__name__}"] += 1

    def per_occurrence(self, occurrences: int) -> dict[str, float]:
        n = max(occurrences, 1)
        out = {op: round(c / n, 3) for op, c in sorted(self.calls.items())}
        out["total"] = round(sum(self.calls.values()) / n, 3)
        return out

    def snapshot(self, occurrences: int) -> dict[str, Any]:
        return {
            "calls": dict(sorted(self.calls.items())),
            "errors": dict(sorted(self.errors.items())),
            "http_requests": self.http_requests,
            "per_occurrence": self.per_occurrence(occurrences),
        }


def format_per_occurrence(per: dict[str, float]) -> str:
    parts = [f"{op} {v:g}" for op, v in per.items() if op != "total"]
    return f"{per.get('total', 0):g} ({', '.join(parts)})"


# -- the Lambda's composition ----------------------------------------------------------------------


@contextmanager
def composed_worker(settings: Settings, clients: ClientFactory) -> Iterator[SchedulerWorker]:
    """The dispatcher function's worker, built by the function's own composition
    (``build_lambda_dispatcher``): its thread pool, shards and worker configuration."""
    worker = build_lambda_dispatcher(settings, clients)
    try:
        yield worker
    finally:
        worker.close()


def drain(worker: SchedulerWorker, counter: ApiCounter, timeout: float) -> tuple[Any, float]:
    """Run the worker (its own ``run`` loop, real clock) until the sinks have accepted
    ``counter.target`` messages, then ``stop()`` it: ``run`` settles what it holds and returns.
    Returns (the run's summary, seconds from the start of ``run`` to its return). ``timeout``
    bounds the run (a stuck run is reported, never waited for forever)."""
    done = threading.Event()

    def stopper() -> None:
        while not done.is_set():
            if counter.reached.wait(0.05):
                worker.stop()
                return

    threading.Thread(target=stopper, daemon=True).start()
    t0 = time.perf_counter()
    try:
        summary = worker.run(deadline=time.monotonic() + timeout)
    finally:
        done.set()
    return summary, time.perf_counter() - t0


# -- tables, schedules, sinks ---------------------------------------------------------------------


def create_store(clients: ClientFactory, settings: Settings) -> DynamoScheduleStore:
    store = build_store(settings.table_name, clients, shard_count=settings.shard_count)
    store.create_table(shards=settings.shard_count)
    return store


def create_topic(clients: ClientFactory, name: str) -> Target:
    return Target.sns(clients.sns().create_topic(Name=name)["TopicArn"])


def one_shots(
    target: Target, n: int, *, due: datetime, seed: int = 0, spread_ms: int = 60_000
) -> list[ScheduledMessage]:
    """``n`` one-shots due at most ``spread_ms`` before ``due``, with ids drawn from ``seed``."""
    rng = random.Random(seed)
    return [
        ScheduledMessage(
            target,
            Trigger(at=due - timedelta(milliseconds=rng.randrange(spread_ms))),
            payload=b'{"k": 1}',
            schedule_id=uuid.UUID(int=rng.getrandbits(128), version=4),
        )
        for _ in range(n)
    ]


def insert_all(store: DynamoScheduleStore, messages: list[ScheduledMessage], threads: int = 16) -> None:
    now = datetime.now(UTC)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda m: store.insert(m, now), messages))


def pending_left(store: DynamoScheduleStore) -> int:
    """Schedules still pending (up to 50): 0 once a backlog is drained."""
    return len(store.list_pending(limit=50))


# -- the endpoint's ceiling -------------------------------------------------------------------------


def _key_of(ddb: Any, table: str) -> Any:
    """A function i -> a primary key of ``table`` (its key schema read with DescribeTable)."""
    desc = ddb.describe_table(TableName=table)["Table"]
    types = {a["AttributeName"]: a["AttributeType"] for a in desc["AttributeDefinitions"]}
    names = [k["AttributeName"] for k in desc["KeySchema"]]

    def key(i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            t = types[name]
            value: Any = str(i) if t == "N" else (f"bench-ceiling-{i}".encode() if t == "B" else f"bench-ceiling-{i}")
            out[name] = {t: value}
        return out

    return key


def ceiling(connection: Connection, table: str, *, threads: int, seconds: float, offset: int = 0) -> dict[str, Any]:
    """Conditional UpdateItems/s that ``threads`` client threads of one process get from the
    endpoint, on ``table`` itself (items of its own, outside the indexes, removed afterwards),
    through the same connection (so with the same injected latency) as the worker's.

    Each thread updates its own items (no contention on an item): ``SET n = n + 1`` on the
    condition that the item exists and ``n >= 0``, the shape of a claim or an ack."""
    ddb = ClientFactory(connection, max_pool_connections=max(threads, 10)).dynamodb()
    key = _key_of(ddb, table)
    per_thread = 4
    keys = [key(offset + i) for i in range(threads * per_thread)]
    for k in keys:
        ddb.put_item(TableName=table, Item={**k, "bench_n": {"N": "0"}})
    stop_at = time.monotonic() + seconds
    done = [0] * threads

    def hammer(t: int) -> None:
        i = 0
        while time.monotonic() < stop_at:
            ddb.update_item(
                TableName=table,
                Key=keys[t * per_thread + i % per_thread],
                UpdateExpression="SET bench_n = bench_n + :one",
                ConditionExpression="attribute_exists(bench_n) AND bench_n >= :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )
            i += 1
        done[t] = i

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(hammer, range(threads)))
    elapsed = time.monotonic() - t0
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda k: ddb.delete_item(TableName=table, Key=k), keys))
    return {"threads": threads, "updates": sum(done), "seconds": round(elapsed, 2), "per_second": sum(done) / elapsed}


# -- a consumer --------------------------------------------------------------------------------------


class Consumer:
    """Receives and deletes a queue's messages from a thread (a client of its own: not counted, no
    injected latency), keeping each one's message attributes and its ``SentTimestamp`` (ms).
    moto's SendMessageBatch slows down with the queue's depth; a real consumer keeps the queue
    short, so does this one."""

    def __init__(self, connection: Connection, queue_url: str) -> None:
        self.sqs = ClientFactory(connection).sqs()
        self.queue_url = queue_url
        self.messages: list[dict[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Consumer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def receive(self) -> int:
        got = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            MessageAttributeNames=["All"],
            AttributeNames=["SentTimestamp"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        for m in got:
            attrs = {k: v.get("StringValue", "") for k, v in m.get("MessageAttributes", {}).items()}
            attrs["SentTimestamp"] = m.get("Attributes", {}).get("SentTimestamp", "")
            self.messages.append(attrs)
        if got:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)  # type: ignore[arg-type]
        return len(got)

    def drain(self, quiet: float = 1.0) -> None:
        """Stop the thread, then receive until the queue has been empty for ``quiet`` seconds."""
        self._stop.set()
        self._thread.join()
        last = time.monotonic()
        while time.monotonic() - last < quiet:
            if self.receive():
                last = time.monotonic()
            else:
                time.sleep(0.05)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.receive():
                self._stop.wait(0.05)
