"""Torture harness: worker OS processes against one moto server, with seeded crashes and faults.

The parent (a test) seeds a table with due one-shot schedules, then runs worker processes
(``python -m tests.torture.harness worker ...``) that claim, send and ack over HTTP. A worker may
``SIGKILL`` itself at a seeded point of the claim → send → ack path, fail a share of its sends, or
see DynamoDB throttling; the parent restarts killed workers and, at the end, checks the table and
the queue: nothing lost, nothing left leased or pending, duplicates only from re-claims.

Crash points (a botocore hook counts them; the N-th one kills the process):

* ``claim.before`` / ``claim.after``: the claiming UpdateItem about to be sent / just applied;
* ``send.before`` / ``send.after``: SendMessageBatch about to be sent / just accepted;
* ``ack.before`` / ``ack.after``: the fenced ack UpdateItem about to be sent / just applied.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.clock import UTC, SystemClock
from hexeract_scheduler.domain.model import LeasedOccurrence, ScheduledMessage, Target, Trigger
from hexeract_scheduler.domain.occurrence import OccurrenceId
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.engine.worker import SchedulerWorker
from hexeract_scheduler.sinks.batch import Outcome
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink
from hexeract_scheduler.store.dynamo import DUE_INDEX, DynamoScheduleStore

ROOT = Path(__file__).resolve().parents[2]
CRASH_POINTS = ("claim.before", "claim.after", "send.before", "send.after", "ack.before", "ack.after")
INJECTED = "InjectedFault"


# -- inside a worker process ---------------------------------------------------------------------


class Crasher:
    """Counts crash-point events on the clients; SIGKILLs this process at the ``kill_after``-th."""

    def __init__(self, kill_after: int, log_path: str | None, points: Sequence[str] = CRASH_POINTS) -> None:
        self.kill_after = kill_after
        self.points = set(points)
        self.log_path = log_path
        self.seen = 0

    def install(self, clients: ClientFactory) -> None:
        ddb = clients.dynamodb().meta.events
        ddb.register("before-parameter-build.dynamodb.UpdateItem", self._tag)
        ddb.register("before-call.dynamodb.UpdateItem", self._before)
        ddb.register("after-call.dynamodb.UpdateItem", self._after)
        sqs = clients.sqs().meta.events
        sqs.register("before-parameter-build.sqs.SendMessageBatch", self._tag_send)
        sqs.register("before-call.sqs.SendMessageBatch", self._before)
        sqs.register("after-call.sqs.SendMessageBatch", self._after)

    @staticmethod
    def _tag(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        update = params.get("UpdateExpression", "")
        context["hx_point"] = "claim" if "attempts = attempts + :one" in update else "ack"

    @staticmethod
    def _tag_send(context: dict[str, Any], **_: Any) -> None:
        context["hx_point"] = "send"

    def _before(self, context: dict[str, Any], **_: Any) -> None:
        self._hit(f"{context.get('hx_point')}.before")

    def _after(self, context: dict[str, Any], http_response: Any, **_: Any) -> None:
        if http_response.status_code < 300:  # only a request that took effect
            self._hit(f"{context.get('hx_point')}.after")

    def _hit(self, point: str) -> None:
        if self.kill_after <= 0 or point not in self.points:
            return
        self.seen += 1
        if self.seen == self.kill_after:
            if self.log_path:
                fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.write(fd, (point + "\n").encode())
                os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)


class _FakeHttp:
    status_code = 400
    headers: dict[str, str] = {}  # noqa: RUF012
    content = b""


class Throttler:
    """Answers a share of UpdateItem/Query calls with ProvisionedThroughputExceededException,
    as if botocore's own retries had given up (the request never reaches the server)."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        self.rate = rate
        self.rng = rng
        self.count = 0

    def install(self, clients: ClientFactory) -> None:
        events = clients.dynamodb().meta.events
        events.register("before-call.dynamodb.UpdateItem", self._maybe)
        events.register("before-call.dynamodb.Query", self._maybe)

    def _maybe(self, **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if self.rng.random() >= self.rate:
            return None
        self.count += 1
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected throttling"}
        return _FakeHttp(), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}


class FlakySink:
    """Fails a seeded share of entries (those are never sent); sends the rest with the real sink."""

    def __init__(self, inner: SqsSink | SnsSink, rate: float, rng: random.Random) -> None:
        self.inner = inner
        self.rate = rate
        self.rng = rng
        self.failed = 0
        self.sent = 0

    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        fail = [self.rng.random() < self.rate for _ in occs]
        ok = [o for o, f in zip(occs, fail, strict=True) if not f]
        sent = iter(self.inner.send_batch(target, ok) if ok else [])
        out: list[Outcome] = []
        for occ, f in zip(occs, fail, strict=True):
            out.append(f"{INJECTED}: attempt {occ.attempt} refused by the test sink" if f else next(sent))
        self.failed += sum(fail)
        self.sent += sum(1 for r in out if r is None)
        return out


def due_index_empty(store: DynamoScheduleStore) -> bool:
    for shard in range(store.shards):
        page = store.client.query(
            TableName=store.table_name,
            IndexName=DUE_INDEX,
            KeyConditionExpression="due_shard = :s",
            ExpressionAttributeValues={":s": {"S": str(shard)}},
            Limit=1,
        )
        if page.get("Items"):
            return False
    return True


def worker_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--dynamodb-endpoint", help="DynamoDB's endpoint, if not --endpoint's")
    p.add_argument("--table", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill-after", type=int, default=0)
    p.add_argument("--kill-points", default=",".join(CRASH_POINTS))
    p.add_argument("--crash-log")
    p.add_argument("--fail-rate", type=float, default=0.0)
    p.add_argument("--throttle-rate", type=float, default=0.0)
    p.add_argument("--lease", type=float, default=60.0)
    p.add_argument("--dispatch-timeout", type=float, default=5.0)
    p.add_argument("--retry-base", type=float, default=0.05)
    p.add_argument("--retry-max", type=float, default=0.4)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--max-seconds", type=float, default=600.0)
    args = p.parse_args(argv)

    rng = random.Random(args.seed)
    dynamodb = (("dynamodb", args.dynamodb_endpoint),) if args.dynamodb_endpoint else ()
    clients = ClientFactory(Connection(endpoint_url=args.endpoint, service_endpoints=dynamodb), retries=1)
    store = DynamoScheduleStore(args.table, dynamodb=clients.dynamodb())
    if args.kill_after:
        Crasher(args.kill_after, args.crash_log, args.kill_points.split(",")).install(clients)
    throttler = Throttler(args.throttle_rate, random.Random(rng.random()))
    if args.throttle_rate:
        throttler.install(clients)
    sqs: SqsSink | FlakySink = SqsSink(clients=clients)
    if args.fail_rate:
        sqs = FlakySink(sqs, args.fail_rate, random.Random(rng.random()))
    config = SchedulerWorkerConfig(
        lease=timedelta(seconds=args.lease),
        dispatch_timeout=timedelta(seconds=args.dispatch_timeout),
        retry_base_delay=timedelta(seconds=args.retry_base),
        retry_max_delay=timedelta(seconds=args.retry_max),
        concurrency=args.concurrency,
    )
    total = CycleSummary()
    end = time.monotonic() + args.max_seconds
    with SchedulerWorker(
        store, Dispatcher({"sqs": sqs}), config, clock=SystemClock(), rng=random.Random(rng.random())
    ) as worker:
        while time.monotonic() < end:
            got = worker.run(cycles=5)
            total.add(got)
            if got.claimed == 0 and got.swept == 0:
                try:
                    if due_index_empty(store):
                        break
                except Exception:  # throttled by our own hook, or a blip: look again next round
                    continue
    out = total.as_dict()
    out.update(lost_claims=total.lost_claims, throttled=throttler.count)
    if isinstance(sqs, FlakySink):
        out.update(sink_failed=sqs.failed, sink_sent=sqs.sent)
    print(json.dumps(out), flush=True)
    return 0


# -- in the parent (the test) --------------------------------------------------------------------


@dataclass
class Seeded:
    store: DynamoScheduleStore
    queue_url: str
    expected: dict[uuid.UUID, str]  # schedule id -> occurrence id of its single occurrence


def make_queue(clients: ClientFactory, name: str) -> str:
    return clients.sqs().create_queue(QueueName=name)["QueueUrl"]


def seed_schedules(
    clients: ClientFactory, table: str, n: int, seed: int, *, max_attempts: int = 5, shards: int = 4
) -> Seeded:
    """``n`` one-shot schedules, all already due, with seeded ids and instants."""
    rng = random.Random(seed)
    store = DynamoScheduleStore(table, dynamodb=clients.dynamodb())
    store.create_table(shards=shards)
    url = make_queue(clients, f"{table}-q")
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    messages = [
        ScheduledMessage(
            Target.sqs(url),
            Trigger(at=base + timedelta(milliseconds=rng.randrange(300_000))),
            payload=json.dumps({"n": i}),
            max_attempts=max_attempts,
            schedule_id=uuid.UUID(int=rng.getrandbits(128), version=4),
        )
        for i in range(n)
    ]
    now = datetime.now(UTC)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda m: store.insert(m, now), messages))
    expected = {m.schedule_id: str(OccurrenceId.derive(m.schedule_id, m.trigger.first_due(now))) for m in messages}
    return Seeded(store, url, expected)


def worker_cmd(endpoint: str, table: str, **opts: Any) -> list[str]:
    cmd = [sys.executable, "-m", "tests.torture.harness", "worker", "--endpoint", endpoint, "--table", table]
    for key, value in opts.items():
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


@dataclass
class RunReport:
    kills: int = 0
    kill_points: Counter[str] = field(default_factory=Counter)
    clean_exits: int = 0
    summaries: list[dict[str, int]] = field(default_factory=list)
    seconds: float = 0.0

    def total(self, key: str) -> int:
        return sum(s.get(key, 0) for s in self.summaries)


def run_workers(
    endpoint: str,
    table: str,
    *,
    processes: int,
    kills: int,
    seed: int,
    tmp: Path,
    kill_window: int = 60,
    timeout: float = 900.0,
    **opts: Any,
) -> RunReport:
    """Keep ``processes`` workers running until the table is drained; the first ``kills`` starts
    carry a seeded kill point (the k-th crash-point event, k uniform in 1..kill_window)."""
    rng = random.Random(seed)
    report = RunReport()
    crash_log = tmp / f"{table}-crashes.log"
    armed = 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def start() -> subprocess.Popen[str]:
        nonlocal armed
        kill_after = 0
        if armed < kills:
            armed += 1
            kill_after = rng.randint(1, kill_window)
        cmd = worker_cmd(
            endpoint, table, seed=rng.randrange(2**31), kill_after=kill_after or None, crash_log=crash_log, **opts
        )
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)

    t0 = time.monotonic()
    running = [start() for _ in range(processes)]
    while running:
        if time.monotonic() - t0 > timeout:
            for proc in running:
                proc.kill()
            raise AssertionError(f"workers did not drain the table within {timeout:.0f}s")
        time.sleep(0.05)
        for proc in list(running):
            rc = proc.poll()
            if rc is None:
                continue
            running.remove(proc)
            out, err = proc.communicate()
            if rc == -signal.SIGKILL:
                report.kills += 1
                running.append(start())
            elif rc == 0:
                report.clean_exits += 1
                report.summaries.append(json.loads(out.strip().splitlines()[-1]))
            else:
                for other in running:
                    other.kill()
                raise AssertionError(f"worker failed with exit status {rc}:\n{err[-3000:]}")
    report.seconds = time.monotonic() - t0
    if crash_log.exists():
        report.kill_points.update(line for line in crash_log.read_text().split() if line)
    return report


class Consumer:
    """Receives and deletes messages while the workers run, as a real consumer would.

    Needed with moto: its SendMessageBatch slows down linearly with the queue depth (about 10 ms
    per 100 queued messages), which would turn a deep queue into dispatch timeouts.
    """

    def __init__(self, clients: ClientFactory, url: str) -> None:
        self.clients = clients
        self.url = url
        self.messages: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Consumer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            got = receive_some(self.clients, self.url)
            self.messages += got
            if not got:
                self._stop.wait(0.05)

    def drain(self) -> list[dict[str, Any]]:
        return self.messages + drain_queue(self.clients, self.url)


def receive_some(clients: ClientFactory, url: str) -> list[dict[str, Any]]:
    sqs = clients.sqs()
    msgs = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0, VisibilityTimeout=600
    ).get("Messages", [])
    if msgs:
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]
        )
    return msgs


def drain_queue(clients: ClientFactory, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    empty_rounds = 0
    while empty_rounds < 2:
        msgs = receive_some(clients, url)
        empty_rounds = 0 if msgs else empty_rounds + 1
        out += msgs
    return out


def scan_table(store: DynamoScheduleStore) -> dict[uuid.UUID, dict[str, Any]]:
    items: dict[uuid.UUID, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"TableName": store.table_name}
    while True:
        page = store.client.scan(**kwargs)
        for item in page["Items"]:
            if item["schedule_id"]["S"] != "#meta":
                items[uuid.UUID(item["schedule_id"]["S"])] = item
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass
class Verdict:
    schedules: int
    delivered: int
    dead_lettered: int
    messages: int
    duplicates: int  # messages beyond the first per occurrence
    dead_errors: Counter[str]
    delivered_dead: int  # dead-lettered schedules whose occurrence was nevertheless sent

    def line(self) -> str:
        return (
            f"{self.schedules} schedules: {self.delivered} delivered, {self.dead_lettered} dead-lettered "
            f"({dict(self.dead_errors)}; {self.delivered_dead} of them sent before the budget ran out), "
            f"{self.messages} messages, {self.duplicates} duplicates"
        )


def verify(seeded: Seeded, clients: ClientFactory, consumed: Consumer | None = None) -> Verdict:
    """The at-least-once promise, checked on the table and the queue (raises AssertionError)."""
    items = scan_table(seeded.store)
    messages = consumed.drain() if consumed else drain_queue(clients, seeded.queue_url)
    assert set(items) == set(seeded.expected), "the table holds other schedules than the seeded ones"

    by_schedule: dict[uuid.UUID, list[dict[str, Any]]] = defaultdict(list)
    for msg in messages:
        attrs = {k: v["StringValue"] for k, v in msg["MessageAttributes"].items()}
        sid = uuid.UUID(attrs["schedule_id"])
        assert sid in seeded.expected, f"message for an unknown schedule {sid}"
        # Every delivery of an occurrence carries the one id derived from (schedule, instant).
        assert attrs["occurrence_id"] == seeded.expected[sid], f"{sid}: occurrence id {attrs['occurrence_id']}"
        at = datetime.strptime(attrs["scheduled_for"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert str(OccurrenceId.derive(sid, at)) == attrs["occurrence_id"]
        by_schedule[sid].append(attrs)

    statuses: Counter[str] = Counter()
    dead_errors: Counter[str] = Counter()
    delivered_dead = 0
    for sid, item in items.items():
        status = item["status"]["S"]
        statuses[status] += 1
        leftover = {"due_shard", "due_at", "list_shard", "leased_until", "lease_token"} & set(item)
        assert not leftover, f"{sid} is {status} but still carries {sorted(leftover)}"
        sent = by_schedule.get(sid, [])
        attempts = int(item["attempts"]["N"])
        # One message per claim at most: two messages never share an attempt number, so a
        # duplicate always comes from a re-claim (lease expired or a failed attempt), never from
        # two workers holding the same lease.
        numbers = [int(a["attempt"]) for a in sent]
        assert len(numbers) == len(set(numbers)), f"{sid}: two messages with one attempt number {numbers}"
        assert all(1 <= n <= attempts for n in numbers), f"{sid}: attempt numbers {numbers} vs attempts {attempts}"
        if status == "delivered":
            assert sent, f"{sid} is delivered but no message reached the queue: LOST"
        elif status == "dead_lettered":
            assert item.get("last_error", {}).get("S"), f"{sid} dead-lettered without an error"
            assert "dead_lettered_at" in item
            assert attempts >= int(item["max_attempts"]["N"])
            dead_errors[item["last_error"]["S"].split(":")[0]] += 1
            delivered_dead += bool(sent)
        else:
            raise AssertionError(f"{sid} left {status}")
    return Verdict(
        schedules=len(items),
        delivered=statuses["delivered"],
        dead_lettered=statuses["dead_lettered"],
        messages=len(messages),
        duplicates=len(messages) - len(by_schedule),
        dead_errors=dead_errors,
        delivered_dead=delivered_dead,
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit("usage: python -m tests.torture.harness worker --endpoint URL --table NAME [options]")
