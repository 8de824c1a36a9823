"""Client CPU per occurrence: the dispatcher vs bare boto3 making the very same requests.

Everything runs in this process against moto *in-process* (``mock_aws``: a ``before-send`` hook
answers each request from moto's backends, no HTTP), the way the endpoint used to be stubbed out,
except that the answers come from a real, stateful DynamoDB/SNS model rather than canned items: no
knowledge of the table's layout is needed. moto's own work is timed (``time.thread_time`` inside
its request handler, one request at a time under a lock, as the local endpoint serialises them)
and taken out, so what is left is client work: the worker's logic plus botocore serialising,
signing and parsing.

1. The dispatcher (store and worker composed as the Lambda composes them, ``Settings`` defaults,
   ``run`` with the real clock) drains ``--occurrences`` due one-shots to an SNS topic, at
   concurrency 1 and at the default 16, each on a fresh table.
2. The floor: a first drain records every request the worker made (operation and parameters, with
   a ``before-parameter-build`` hook); bare boto3 clients then replay them back to back, one
   thread, prepared parameters, on a fresh table seeded with the same schedules (same ids, same
   due times), so each replayed claim and ack applies as it did the first time.

Why not a real endpoint over HTTP: on this kind of machine (a VM, loopback through the kernel) the
socket calls cost as much CPU as botocore itself and vary with concurrency, which buries the
difference this benchmark is after.

The measurements run in ``--repeat`` (2) interleaved rounds and the least CPU of each is kept.

    .venv/bin/python -m bench.cpu [--occurrences 400] [--repeat 2]
"""

from __future__ import annotations

import argparse
import copy
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from botocore import xform_name
from botocore.exceptions import ClientError

from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.model import ScheduledMessage
from hexeract_scheduler.service.settings import Settings

from .common import (
    ApiCounter,
    composed_worker,
    create_store,
    create_topic,
    drain,
    format_per_occurrence,
    insert_all,
    one_shots,
    print_conditions,
    unique,
    write_result,
)


class InProcessMoto:
    """moto's backends answering in this process, one request at a time, their CPU time counted."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.requests = 0
        self._lock = threading.Lock()

    @contextmanager
    def running(self) -> Iterator[InProcessMoto]:
        from moto import mock_aws
        from moto.core.models import botocore_stubber

        original = botocore_stubber.process_request

        def timed(request: Any) -> Any:
            with self._lock:
                t0 = time.thread_time()
                try:
                    return original(request)
                finally:
                    self.cpu += time.thread_time() - t0
                    self.requests += 1

        botocore_stubber.process_request = timed  # type: ignore[method-assign]
        try:
            with mock_aws():
                yield self
        finally:
            del botocore_stubber.process_request

    @contextmanager
    def client_cpu(self) -> Iterator[dict[str, float]]:
        """Yields a dict that gets ``client`` (CPU s of this process less moto's) and ``moto``."""
        out: dict[str, float] = {}
        cpu0, moto0 = time.process_time(), self.cpu
        try:
            yield out
        finally:
            out["moto"] = self.cpu - moto0
            out["client"] = time.process_time() - cpu0 - out["moto"]


class Recorder:
    """Every API call's service, operation and parameters, in the order they were made."""

    def __init__(self, counter: ApiCounter) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        counter.session.events.register("before-parameter-build", self._record)

    def _record(self, event_name: str, params: dict[str, Any], **_: Any) -> None:
        _, service, op = event_name.split(".")
        with self._lock:
            self.calls.append((service, op, copy.deepcopy(params)))


def seeded_table(clients: ClientFactory, messages: list[ScheduledMessage], **settings: Any) -> Settings:
    s = Settings(table_name=unique("cpu"), **settings)
    insert_all(create_store(clients, s), messages)
    return s


def worker_cpu(
    moto: InProcessMoto, messages: list[ScheduledMessage], concurrency: int, record: bool = False
) -> tuple[dict[str, Any], Recorder | None]:
    settings = seeded_table(ClientFactory(Connection()), messages, concurrency=concurrency)
    n = len(messages)
    counter = ApiCounter(target=n)
    recorder = Recorder(counter) if record else None
    with composed_worker(settings, counter.clients(Connection())) as worker:
        worker.ready()
        counter.start()
        if recorder is not None:
            recorder.calls.clear()
        with moto.client_cpu() as cpu:
            summary, wall = drain(worker, counter, timeout=60 + n * 0.2)
    done = max(summary.dispatched, 1)
    return {
        "concurrency": concurrency,
        "occurrences": summary.dispatched,
        "cpu_us_per_occurrence": round(cpu["client"] / done * 1e6, 1),
        "moto_cpu_us_per_occurrence": round(cpu["moto"] / done * 1e6, 1),
        "wall_ms_per_occurrence": round(wall / done * 1e3, 2),
        "requests_per_occurrence": counter.per_occurrence(summary.dispatched),
    }, recorder


def floor_cpu(
    moto: InProcessMoto, messages: list[ScheduledMessage], recorded: list[tuple[str, str, Any]]
) -> dict[str, Any]:
    """Replay ``recorded`` with bare clients, one after the other, on a freshly seeded table."""
    table = seeded_table(ClientFactory(Connection()), messages).table_name
    clients = ClientFactory(Connection())
    methods = {(service, op): getattr(clients.client(service), xform_name(op)) for service, op, _ in recorded}
    calls = [
        (methods[(service, op)], {**params, "TableName": table} if "TableName" in params else params)
        for service, op, params in recorded
    ]
    refused = 0
    with moto.client_cpu() as cpu:
        for method, params in calls:
            try:
                method(**params)
            except ClientError:
                refused += 1
    return {
        "requests": len(calls),
        "refused": refused,
        "cpu_us_per_occurrence": round(cpu["client"] / len(messages) * 1e6, 1),
        "cpu_us_per_request": round(cpu["client"] / max(len(calls), 1) * 1e6, 1),
        "moto_cpu_us_per_occurrence": round(cpu["moto"] / len(messages) * 1e6, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--occurrences", type=int, default=400)
    p.add_argument("--repeat", type=int, default=2, help="rounds of (floor, concurrency 1, 16); the least CPU is kept")
    args = p.parse_args()
    print_conditions()
    concurrency = Settings(table_name="cpu").concurrency
    with InProcessMoto().running() as moto:
        target = create_topic(ClientFactory(Connection()), unique("cpu"))
        # Due an hour ago: still due when the floor replays the recorded claims (their ":now").
        messages = one_shots(target, args.occurrences, due=datetime.now(UTC) - timedelta(hours=1), seed=7)
        _, recorder = worker_cpu(moto, messages, concurrency, record=True)
        assert recorder is not None
        # Interleaved rounds, the least CPU of each kept: on a shared machine the load drifts
        # between measurements, and interference only ever adds CPU time.
        floors, seqs, pars = [], [], []
        for _ in range(max(args.repeat, 1)):
            floors.append(floor_cpu(moto, messages, recorder.calls))
            seqs.append(worker_cpu(moto, messages, 1)[0])
            pars.append(worker_cpu(moto, messages, concurrency)[0])

    def best(rows: list[dict[str, Any]]) -> dict[str, Any]:
        out = dict(min(rows, key=lambda r: r["cpu_us_per_occurrence"]))
        out["all_cpu_us_per_occurrence"] = [r["cpu_us_per_occurrence"] for r in rows]
        return out

    floor, seq, par = best(floors), best(seqs), best(pars)
    base = floor["cpu_us_per_occurrence"]
    print(
        f"{args.occurrences} due one-shots to an SNS topic; moto in-process (mock_aws), its CPU taken out; "
        f"CPU = time.process_time of this process"
    )
    print(
        f"boto3 floor (the worker's {floor['requests']} requests replayed bare, one thread): "
        f"{base:7.1f} µs CPU / occurrence ({floor['cpu_us_per_request']} µs per request, {floor['refused']} refused; "
        f"rounds {floor['all_cpu_us_per_occurrence']})"
    )
    for row in (seq, par):
        print(
            f"SchedulerWorker, concurrency {row['concurrency']:>2}:   {row['cpu_us_per_occurrence']:7.1f} µs CPU / "
            f"occurrence (x{row['cpu_us_per_occurrence'] / base:.2f} the floor); "
            f"calls/occurrence {format_per_occurrence(row['requests_per_occurrence'])}; "
            f"rounds {row['all_cpu_us_per_occurrence']}"
        )
    write_result(
        "cpu",
        {
            "setup": {
                "endpoint": "moto in-process (mock_aws), one request at a time; its thread CPU time subtracted",
                "cpu": "time.process_time of this process around worker.run / the replay, less moto's",
                "floor": "the worker's own requests (recorded) replayed by bare boto3 clients on a fresh seeded table",
                "rounds": f"{max(args.repeat, 1)} interleaved rounds, the least CPU of each kept",
            },
            "boto3_floor": floor,
            "worker_concurrency_1": seq,
            "worker_concurrency_16": par,
        },
    )


if __name__ == "__main__":
    main()
