"""Throughput: one dispatcher draining a backlog of due one-shots, vs the naive sequential loop.

Both run in this process against one moto server in another process, at 0 ms and at an injected
per-request latency (a ``before-send`` hook that sleeps, i.e. a simulated network round trip).
Also measured in the same run: the moto ceiling (conditional UpdateItems/s from 8 threads), and
the HTTP requests each approach makes per occurrence, split by API.

    .venv/bin/python -m bench.throughput [--backlog 800] [--baseline 300] [--latency-ms 0,20]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from hexeract_scheduler.clock import SystemClock
from hexeract_scheduler.sinks import Dispatcher
from hexeract_scheduler.worker import SchedulerWorker, SchedulerWorkerConfig

from .common import Purger, RequestCounter, clients_for, inject_latency, moto_server, seed_due, write_result


def moto_ceiling(url: str, seconds: float = 4.0, threads: int = 8) -> float:
    """Conditional UpdateItems/s that moto sustains from ``threads`` client threads (no latency)."""
    clients = clients_for(url, max_pool_connections=threads * 2)
    ddb = clients.dynamodb()
    table = "ceiling"
    ddb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
    )
    for i in range(threads * 10):
        ddb.put_item(TableName=table, Item={"k": {"S": str(i)}, "n": {"N": "0"}})
    stop = time.monotonic() + seconds
    done = [0] * threads

    def hammer(t: int) -> None:
        i = 0
        while time.monotonic() < stop:
            ddb.update_item(
                TableName=table,
                Key={"k": {"S": str(t * 10 + i % 10)}},
                UpdateExpression="SET n = n + :one",
                ConditionExpression="attribute_exists(k) AND n >= :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )
            i += 1
        done[t] = i

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(hammer, range(threads)))
    return sum(done) / (time.monotonic() - t0)


def per_occurrence(counts: dict[str, int], n: int) -> dict[str, float]:
    out = {op: round(c / n, 3) for op, c in sorted(counts.items())}
    out["total"] = round(sum(counts.values()) / n, 3)
    return out


def run_worker(url: str, table_no: int, backlog: int, latency: float, concurrency: int) -> dict[str, Any]:
    seeder = clients_for(url)
    store, queue_url = seed_due(seeder, f"tp-worker-{table_no}", backlog, seed=table_no)
    clients = clients_for(url)
    ddb, sqs = clients.dynamodb(), clients.sqs()
    store.client = ddb
    inject_latency(latency, ddb, sqs)
    counter = RequestCounter()
    cfg = SchedulerWorkerConfig(concurrency=concurrency, batch_size=10)
    with (
        Purger(url, [queue_url]),
        SchedulerWorker(store, Dispatcher.for_clients(clients), cfg, clock=SystemClock()) as worker,
    ):
        worker.ready()  # table metadata read once, outside the timed part (a warm Lambda has it)
        counter.install(ddb, sqs)
        dispatched = 0
        t0 = time.perf_counter()
        while dispatched < backlog:
            s = worker.run(cycles=1)
            dispatched += s.dispatched
            if s.claimed == 0 and s.lost_claims == 0 and time.perf_counter() - t0 > 120:
                break
        elapsed = time.perf_counter() - t0
    return {
        "occurrences": dispatched,
        "seconds": round(elapsed, 3),
        "per_second": round(dispatched / elapsed, 1),
        "requests_per_occurrence": per_occurrence(counter.counts, dispatched),
    }


def run_baseline(url: str, table_no: int, count: int, latency: float) -> dict[str, Any]:
    """The naive loop: query the due index, then per occurrence claim, SendMessage, ack, one at a time."""
    from hexeract_scheduler.sinks import message_attributes

    seeder = clients_for(url)
    store, queue_url = seed_due(seeder, f"tp-base-{table_no}", count, seed=100 + table_no)
    clients = clients_for(url)
    ddb, sqs = clients.dynamodb(), clients.sqs()
    store.client = ddb
    _ = store.shards
    inject_latency(latency, ddb, sqs)
    counter = RequestCounter().install(ddb, sqs)
    clock = SystemClock()
    lease = timedelta(seconds=300)
    done = 0
    purger = Purger(url, [queue_url]).__enter__()
    t0 = time.perf_counter()
    while done < count:
        entries = store.find_due(clock.now(), 10)
        if not entries:
            break
        for entry in entries:
            occ = store.claim(entry.schedule_id, clock.now(), lease)
            if not hasattr(occ, "lease_token"):
                continue
            sqs.send_message(
                QueueUrl=queue_url,
                MessageBody=occ.payload.decode(),
                MessageAttributes=message_attributes(occ),  # type: ignore[arg-type]
            )
            store.mark_delivered(occ)  # type: ignore[arg-type]
            done += 1
    elapsed = time.perf_counter() - t0
    purger.__exit__()
    return {
        "occurrences": done,
        "seconds": round(elapsed, 3),
        "per_second": round(done / elapsed, 1),
        "requests_per_occurrence": per_occurrence(counter.counts, done),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backlog", type=int, default=800, help="due one-shots the dispatcher drains")
    p.add_argument("--baseline", type=int, default=300, help="due one-shots the sequential loop drains")
    p.add_argument("--latency-ms", default="0,20")
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args()
    latencies = [float(x) for x in args.latency_ms.split(",")]
    rows = []
    with moto_server() as url:
        ceiling = moto_ceiling(url)
        print(f"moto ceiling: {ceiling:.0f} conditional UpdateItem/s from 8 threads (moto in its own process)")
        for i, ms in enumerate(latencies):
            w = run_worker(url, i, args.backlog, ms / 1000, args.concurrency)
            b = run_baseline(url, i, args.baseline, ms / 1000)
            ratio = w["per_second"] / b["per_second"]
            rows.append({"latency_ms": ms, "worker": w, "baseline": b, "ratio": round(ratio, 2)})
            print(
                f"latency {ms:>4.0f} ms/request: dispatcher {w['per_second']:>7.1f} occ/s "
                f"({w['occurrences']} in {w['seconds']:.1f}s, {w['requests_per_occurrence']['total']} req/occ) | "
                f"sequential {b['per_second']:>6.1f} occ/s ({b['occurrences']} in {b['seconds']:.1f}s, "
                f"{b['requests_per_occurrence']['total']} req/occ) | ratio x{ratio:.1f}"
            )
            print(f"    dispatcher requests/occurrence by API: {w['requests_per_occurrence']}")
            print(f"    sequential requests/occurrence by API: {b['requests_per_occurrence']}")
    write_result(
        "throughput",
        {
            "setup": {
                "moto": "moto_server in a separate process on 127.0.0.1",
                "dispatcher": f"SchedulerWorker concurrency={args.concurrency} batch_size=10 shards=4, run(cycles=1)",
                "baseline": "find_due(limit 10) then claim / sqs.send_message / mark_delivered one at a time",
                "latency": "before-send hook sleeping the given time on every DynamoDB and SQS request",
            },
            "moto_ceiling_conditional_updates_per_s": round(ceiling, 1),
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
