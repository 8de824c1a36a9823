"""``make demo``: hexeract-scheduler end to end on this machine, no AWS account, no Docker.

1. Starts an AWS endpoint in this process (moto on a free 127.0.0.1 port), creates the schedules
   table, a queue, and a topic delivering to a second queue (raw delivery: the body stays the payload).
2. Shows at-least-once delivery: a worker claims a reminder, sends it and "crashes" before
   acknowledging; once the lease expires the real worker sends it again (same occurrence id).
3. Schedules a one-shot reminder 2 s ahead (to the queue), a recurring ``*/2 * * * * *`` reminder
   (to the topic) and a reminder to a queue that does not exist (3 attempts, short backoff).
4. Runs a worker (poll 150 ms) and a consumer that prints each reminder and drops duplicates by
   ``occurrence_id``, for about 15 s.
5. With the real ``hexeract`` command: lists the dead letter, "fixes" the target (creates the
   queue), replays it, and shows it delivered.

``python -m demo [--seconds N] [--keep]``; ``--keep`` leaves the endpoint, worker and consumer
running until Ctrl-C, and prints shell lines (exports, then ``hexeract`` commands) that work as
pasted into a second terminal meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from demo.consumer import MemoryDedupeStore, Reminder, ReminderConsumer
from hexeract_scheduler import (
    Dispatcher,
    DynamoScheduleStore,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    SystemClock,
)
from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.local import DEMO_QUEUE, DEMO_TOPIC, MissingLocalExtra, export_lines, start_local_endpoint

TABLE = "hexeract-schedules"
# (argv after "hexeract") -> (exit status, stdout + stderr)
Cli = Callable[[Sequence[str]], tuple[int, str]]
Out = Callable[[str], None]


def subprocess_cli(args: Sequence[str]) -> tuple[int, str]:
    """The real command, in its own process: the console script next to this interpreter."""
    script = Path(sys.executable).with_name("hexeract")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "hexeract_scheduler.cli"]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).rstrip("\n")


class Demo:
    """Timestamped progress lines; lines from the worker and consumer threads that arrive while a
    command runs are held back and printed after its output, so the two never interleave."""

    def __init__(self, out: Out, cli: Cli) -> None:
        self.out = out
        self.cli = cli
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._held: list[str] | None = None
        self._blank = False  # a blank line is due before the next line (after a command's output)

    def say(self, text: str) -> None:
        line = f"[{time.monotonic() - self.t0:5.1f}s] {text}"
        with self._lock:
            if self._held is not None:
                self._held.append(line)
                return
            self._line(line)

    def _line(self, line: str) -> None:
        if self._blank:
            self.out("")
            self._blank = False
        self.out(line)

    def hexeract(self, *args: str, conn: str) -> str:
        """Run ``hexeract scheduler ARGS --conn URL`` and show it like a terminal would."""
        argv = ["scheduler", *args, "--conn", conn]
        with self._lock:
            self._held = []
        try:
            code, output = self.cli(argv)
        finally:
            with self._lock:
                held, self._held = self._held or [], None
                self._blank = True
                self._line(f"$ hexeract {shlex.join(argv)}")
                for line in output.splitlines():
                    self.out(f"  {line}")
                self._blank = True
                for line in held:
                    self._line(line)
        if code != 0:
            raise RuntimeError(f"hexeract {' '.join(args)} exited {code}")
        return output


def _until_interrupted() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)


def run_demo(
    seconds: float = 15.0,
    *,
    keep: bool = False,
    out: Out | None = None,
    cli: Cli = subprocess_cli,
    hold: Callable[[], None] = _until_interrupted,
) -> dict[str, int]:
    """The whole demo; returns what the consumer saw (``raw``, ``distinct``, ``duplicates``).

    With ``keep``, the endpoint, worker and consumer keep running while ``hold()`` does (by
    default, until Ctrl-C); the lines printed before it work in another terminal meanwhile."""
    out = out or (lambda line: print(line, flush=True))
    demo = Demo(out, cli)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log

    endpoint = start_local_endpoint()
    url = endpoint.url
    worker: SchedulerWorker | None = None
    consumer: ReminderConsumer | None = None
    threads: list[threading.Thread] = []
    restore_log = _show_worker_log(demo)
    try:
        out(f"hexeract-scheduler demo: local AWS endpoint (moto) at {url}, in this process\n")
        clients = ClientFactory(Connection(endpoint_url=url))
        sqs, sns = clients.sqs(), clients.sns()
        store = DynamoScheduleStore(TABLE, dynamodb=clients.dynamodb())
        created, shards = store.create_table(4)
        demo.say(f"table {TABLE} {'created' if created else 'exists'} ({shards} shards)")

        queue_url = sqs.create_queue(QueueName=DEMO_QUEUE)["QueueUrl"]
        topic_arn = sns.create_topic(Name=DEMO_TOPIC)["TopicArn"]
        topic_queue_url = sqs.create_queue(QueueName="reminders-from-topic")["QueueUrl"]
        topic_queue_arn = sqs.get_queue_attributes(QueueUrl=topic_queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=topic_arn, Protocol="sqs", Endpoint=topic_queue_arn, Attributes={"RawMessageDelivery": "true"}
        )
        missing_queue_url = queue_url.rsplit("/", 1)[0] + "/reminders-typo"
        demo.say("queue reminders; topic reminders-topic -> queue reminders-from-topic (raw delivery)")

        handled: set[str] = set()  # schedule ids

        def handle(r: Reminder) -> None:
            what = json.loads(r.body).get("text", r.body)
            demo.say(f"<- {r.source:5} {what!r}  occurrence {r.occurrence_id[:8]}  attempt {r.attempt}")
            handled.add(r.schedule_id)

        def duplicate(r: Reminder) -> None:
            demo.say(f"<- {r.source:5} duplicate of occurrence {r.occurrence_id[:8]} (attempt {r.attempt}): dropped")

        consumer = ReminderConsumer(sqs, MemoryDedupeStore(), handle, duplicate)
        consumer.watch("queue", queue_url)
        consumer.watch("topic", topic_queue_url)
        dispatcher = Dispatcher.for_clients(clients)

        # 2. At-least-once: send, then die before the ack.
        clock = SystemClock()
        now = clock.now()
        crash = ScheduledMessage.delay(
            f"sqs:{queue_url}", at=now, payload='{"text": "sent twice, processed once"}', event_type="reminder"
        )
        store.insert(crash, now)
        batch = store.claim_due(clock.now(), timedelta(seconds=1), 10)
        with ThreadPoolExecutor(2) as pool:
            dispatcher.dispatch(batch.leased, executor=pool, timeout=10)
        demo.say(
            f"a worker claimed {crash.schedule_id} (lease 1 s), sent it, and crashed before acking: "
            "the lease will expire and it is sent again"
        )

        # 3. The schedules.
        now = clock.now()
        one_shot = ScheduledMessage.delay(
            f"sqs:{queue_url}",
            after=timedelta(seconds=2),
            now=now,
            payload='{"text": "stand up and stretch"}',
            event_type="reminder",
        )
        recurring = ScheduledMessage.cron(
            f"sns:{topic_arn}", "*/2 * * * * *", payload='{"text": "drink some water"}', event_type="reminder"
        )
        doomed = ScheduledMessage.delay(
            f"sqs:{missing_queue_url}",
            at=now,
            payload='{"text": "this one was lost, then replayed"}',
            event_type="reminder",
            max_attempts=3,
        )
        for msg, what in (
            (one_shot, "one-shot in 2 s -> queue"),
            (recurring, "recurring */2 * * * * * -> topic"),
            (doomed, "one-shot now -> queue reminders-typo (does not exist), 3 attempts"),
        ):
            store.insert(msg, now)
            demo.say(f"scheduled {msg.schedule_id}: {what}")

        # 4. Worker and consumer.
        config = SchedulerWorkerConfig(
            poll_interval=timedelta(milliseconds=150),
            retry_base_delay=timedelta(milliseconds=200),
            retry_max_delay=timedelta(seconds=1),
            jitter=False,
        )
        worker = SchedulerWorker(store, dispatcher, config)
        threads = [
            threading.Thread(target=worker.run, name="demo-worker", daemon=True),
            threading.Thread(target=consumer.run, name="demo-consumer", daemon=True),
        ]
        for t in threads:
            t.start()
        demo.say(f"worker (poll 150 ms, retries after 200 ms..1 s) and consumer running for {seconds:g} s ...")
        time.sleep(seconds)
        _wait_for(lambda: bool(store.list_dead_letter(1)), 10.0)
        demo.say(f"consumer so far: {consumer.raw} messages received, {consumer.distinct} distinct occurrences")

        # 5. The dead letter, with the real command line.
        demo.hexeract("dead-letter", "list", conn=url)
        sqs.create_queue(QueueName="reminders-typo")
        consumer.watch("fixed", missing_queue_url)
        demo.say("fixed the target: created queue reminders-typo")
        demo.hexeract("dead-letter", "replay", str(doomed.schedule_id), conn=url)
        replayed = _wait_for(lambda: _status(store, doomed) == "delivered" and str(doomed.schedule_id) in handled, 10.0)
        demo.hexeract("inspect", str(doomed.schedule_id), conn=url)
        demo.hexeract("cancel", str(recurring.schedule_id), conn=url)
        demo.hexeract("list", conn=url)
        _wait_for(lambda: consumer.poll_once() == 0, 2.0)

        summary = {
            "raw": consumer.raw,
            "distinct": consumer.distinct,
            "duplicates": consumer.raw - consumer.distinct,
            "replayed_and_delivered": int(replayed),
        }
        demo.say(
            f"done: {summary['raw']} messages received, {summary['distinct']} distinct occurrences, "
            f"{summary['duplicates']} duplicate(s) dropped by occurrence_id"
        )
        for line in try_it_yourself(url, queue_url, topic_arn, keep=keep):
            out(line)
        if keep:
            hold()
            out("stopping")
        return summary
    finally:
        if consumer is not None:
            consumer.stop()
        if worker is not None:
            worker.stop()
        for t in threads:
            t.join(timeout=5)
        if worker is not None:
            worker.close()
        restore_log()
        endpoint.stop()


def _status(store: DynamoScheduleStore, msg: ScheduledMessage) -> str | None:
    snap = store.inspect(msg.schedule_id)
    return snap.status.label if snap else None


def _wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


# What to try against the endpoint: each line works as pasted into bash, once the export lines ran.
# The demo's worker delivers both schedules (the consumer prints them): "hi" once, then every 5 s.
TRY_COMMANDS = (
    "hexeract scheduler list",
    """ID=$(hexeract scheduler add --at +10s --target "sqs:$QUEUE_URL" --payload '{"text": "hi"}')""",
    'hexeract scheduler inspect "$ID" --format json',
    """hexeract scheduler add --cron '*/5 * * * * *' --target "sns:$TOPIC_ARN" --payload '{"text": "every 5 s"}'""",
    "hexeract scheduler list",
    "hexeract scheduler dead-letter list",
)


def try_it_yourself(url: str, queue_url: str, topic_arn: str, *, keep: bool) -> list[str]:
    """The closing lines. With ``keep``: the export lines for this endpoint, then commands to paste
    into a second terminal. Without: that the endpoint stops with the demo, and how to keep it."""
    if keep:
        head = [
            "",
            "Try it yourself: paste these lines into a second terminal (the endpoint, worker and consumer",
            "keep running until Ctrl-C here; what the worker delivers shows up here):",
            "",
            *(f"  {line}" for line in export_lines(url, queue_url, topic_arn)),
        ]
        return [*head, *(f"  {cmd}" for cmd in TRY_COMMANDS), "", "Ctrl-C to stop"]
    return [
        "",
        f"The endpoint at {url} stops with the demo. To try the hexeract command against a running one,",
        "run `make demo DEMO_ARGS=--keep` (or `python -m demo --keep`): it keeps the endpoint up and prints",
        "the export lines that make commands like these work in a second terminal:",
        "",
        *(f"  {cmd}" for cmd in TRY_COMMANDS),
    ]


def _show_worker_log(demo: Demo) -> Callable[[], None]:
    """The worker's retries and dead letters, in the demo's output; returns how to undo it."""

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = " ".join(record.getMessage().split())
            demo.say(f"worker: {message if len(message) <= 110 else message[:109] + '…'}")

    handler = Handler(logging.INFO)
    logger = logging.getLogger("hexeract_scheduler")
    old = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    def restore() -> None:
        logger.removeHandler(handler)
        logger.setLevel(old[0])
        logger.propagate = old[1]

    return restore


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the worker runs before the replay")
    parser.add_argument("--keep", action="store_true", help="keep the endpoint running until Ctrl-C")
    args = parser.parse_args(argv)
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):  # the demo never talks to real AWS
        os.environ.pop(var, None)
    started = time.monotonic()
    try:
        summary = run_demo(args.seconds, keep=args.keep)
    except MissingLocalExtra as exc:
        print(f"python -m demo: {exc}", file=sys.stderr)
        return 2
    print(f"\ndemo finished in {time.monotonic() - started:.1f} s", flush=True)
    return 0 if summary["distinct"] > 0 and summary["replayed_and_delivered"] else 1


if __name__ == "__main__":
    sys.exit(main())
