"""Throughput: one dispatcher draining a backlog of due one-shots, against the endpoint's ceiling.

For each DynamoDB backend (dynalite, moto; SQS and SNS are always moto) and each injected latency:

1. a fresh table (``Settings`` defaults: 4 shards) gets ``--n`` one-shots, all due, to one SNS topic;
2. the endpoint's ceiling: ``concurrency`` (16) client threads doing conditional UpdateItems on that
   table through the same connection, before and after the dispatcher's run (ops/s, mean of the
   two). A one-shot costs two conditional writes (claim, ack), so ceiling / 2 is the occurrences/s
   that the endpoint allows a client of that many threads;
3. the dispatcher: store and worker composed as the Lambda composes them, ``Settings`` defaults
   (``settings.worker_config()``), its own ``run`` loop with the real clock, stopped once every
   occurrence is sent (``run`` settles what it holds before it returns); occ/s = acked / time;
4. the AWS calls the dispatcher made, per delivered occurrence and per operation (botocore
   ``after-call`` hooks on every client of its session).

Latency: ``bench.latencyproxy``, a TCP proxy in a process of its own in front of dynalite and moto
that holds every request ``--latency-ms`` before forwarding it (the request keeps its pooled
connection meanwhile, as over a real network). 0: straight to the endpoint.

    .venv/bin/python -m bench.throughput [--backend dynalite|moto|both] [--latency-ms 0,10] [--n 1000]
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.service.settings import Settings

from .common import (
    ApiCounter,
    CpuMeter,
    Endpoints,
    backends,
    ceiling,
    composed_worker,
    create_store,
    create_topic,
    drain,
    floats,
    format_cores,
    format_per_occurrence,
    insert_all,
    one_shots,
    pending_left,
    print_conditions,
    unique,
    write_result,
)

GOAL_RATIO = 0.8
GOAL_REQUESTS = 2.2


def run_one(
    endpoints: Endpoints, backend: str, latency_ms: float, n: int, ceiling_seconds: float, seed: int
) -> dict[str, Any]:
    conn = endpoints.connection(backend, latency_ms)
    direct = ClientFactory(endpoints.connection(backend))
    settings = Settings(table_name=unique(f"tp-{backend}"))
    t_seed = time.perf_counter()
    admin = create_store(direct, settings)
    target = create_topic(direct, settings.table_name)
    insert_all(admin, one_shots(target, n, due=datetime.now(UTC), seed=seed))
    seeded_s = time.perf_counter() - t_seed

    threads = settings.concurrency
    meter = CpuMeter(endpoints.pids(backend, latency_ms))
    meter.start()
    before = ceiling(conn, settings.table_name, threads=threads, seconds=ceiling_seconds)
    ceiling_cores = meter.stop()

    counter = ApiCounter(target=n)
    clients = counter.clients(conn)
    with composed_worker(settings, clients) as worker:
        worker.ready()  # the table's shard count, read once (a warm Lambda has it)
        counter.start()
        meter.start()
        summary, elapsed = drain(worker, counter, timeout=60 + n * 0.2)
        run_cores = meter.stop()
    counter.active = False
    after = ceiling(conn, settings.table_name, threads=threads, seconds=ceiling_seconds, offset=10_000)
    left = pending_left(admin)

    ceil = (before["per_second"] + after["per_second"]) / 2
    allowed = ceil / 2
    rate = summary.dispatched / elapsed
    return {
        "backend": backend,
        "latency_ms": latency_ms,
        "occurrences": n,
        "seeding_seconds": round(seeded_s, 1),
        "ceiling": {
            "threads": threads,
            "updates_per_second": round(ceil, 1),
            "before_run": round(before["per_second"], 1),
            "after_run": round(after["per_second"], 1),
            "occurrences_per_second_allowed": round(allowed, 1),
            "cores_busy": ceiling_cores,
        },
        "dispatcher": {
            "dispatched": summary.dispatched,
            "seconds": round(elapsed, 3),
            "per_second": round(rate, 1),
            "ratio_to_allowed": round(rate / allowed, 3) if allowed else None,
            "pending_left": left,
            "summary": summary.as_dict(),
            "lost_claims": summary.lost_claims,
            "rounds": summary.cycles,
            "cores_busy": run_cores,
        },
        "requests": counter.snapshot(summary.dispatched),
    }


def report(row: dict[str, Any]) -> None:
    c, d, r = row["ceiling"], row["dispatcher"], row["requests"]
    ok = "meets" if (d["ratio_to_allowed"] or 0) >= GOAL_RATIO else "below"
    print(
        f"[{row['backend']} +{row['latency_ms']:g} ms] ceiling {c['updates_per_second']:.0f} conditional "
        f"UpdateItem/s from {c['threads']} threads (before {c['before_run']:.0f}, after {c['after_run']:.0f}) "
        f"-> {c['occurrences_per_second_allowed']:.0f} occ/s allowed at 2 writes/occurrence"
    )
    print(
        f"    dispatcher {d['per_second']:.1f} occ/s ({d['dispatched']} in {d['seconds']:.2f} s, "
        f"{d['pending_left']} left pending) = {d['ratio_to_allowed']:.2f} of allowed ({ok} the {GOAL_RATIO:.0%} goal)"
    )
    per = r["per_occurrence"]
    ok = "meets" if per["total"] <= GOAL_REQUESTS else "above"
    print(f"    AWS calls per delivered occurrence: {format_per_occurrence(per)} ({ok} the {GOAL_REQUESTS} goal)")
    extra = sum(r["calls"].values())
    if r["errors"] or r["http_requests"] != extra:
        print(f"    errors {r['errors'] or 'none'}; HTTP requests {r['http_requests']} for {extra} calls")
    print(
        f"    cores busy (CPU s per s) during the ceiling: {format_cores(c['cores_busy'])}; "
        f"during the run: {format_cores(d['cores_busy'])}"
    )
    s = {k: v for k, v in d["summary"].items() if v}
    print(f"    summary {s}, lost claims {d['lost_claims']}, {d['rounds']} claim rounds", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("dynalite", "moto", "both"), default="both")
    p.add_argument("--latency-ms", default="0,10", help="comma-separated latencies injected per request")
    p.add_argument("--n", type=int, default=1000, help="due one-shots per run")
    p.add_argument("--ceiling-seconds", type=float, default=3.0, help="length of each ceiling measurement")
    args = p.parse_args()
    names = backends(args.backend)
    settings = Settings(table_name="throughput")
    print_conditions()
    print(
        f"{args.n} due one-shots per run, Settings defaults: concurrency {settings.concurrency}, batch "
        f"{settings.batch_size}, {settings.shard_count} shards, poll {settings.poll_interval_ms} ms; SQS/SNS on moto"
    )
    rows = []
    t0 = time.perf_counter()
    with Endpoints(names) as endpoints:
        for i, backend in enumerate(names):
            for j, ms in enumerate(floats(args.latency_ms)):
                row = run_one(endpoints, backend, ms, args.n, args.ceiling_seconds, seed=10 * i + j)
                report(row)
                rows.append(row)
    print(f"total {time.perf_counter() - t0:.0f} s")
    write_result(
        "throughput",
        {
            "setup": {
                "dynamodb": "dynalite (Node.js) or moto_server, each in a child process on 127.0.0.1",
                "sqs_sns": "moto_server in a child process; target: one SNS topic (PublishBatch)",
                "dispatcher": "app.py's composition, Settings defaults, run() until all are sent, then stop()",
                "ceiling": "Settings.concurrency threads x conditional UpdateItem on the same table, same connection",
                "latency": "bench.latencyproxy: TCP proxy (own process) delaying each request; 0 = direct",
                "requests": "botocore after-call hooks on the dispatcher's session (API calls; retries not counted)",
                "goals": {"ratio_to_allowed": GOAL_RATIO, "requests_per_occurrence": GOAL_REQUESTS},
            },
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
