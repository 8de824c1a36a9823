"""Dispatch lag under steady load: cron schedules firing every second, the real clock.

``--schedules`` (50) schedules ``* * * * * *`` (the 6-field form, seconds first) to one SQS queue;
one dispatcher composed as the Lambda composes it, ``Settings`` defaults, runs its own ``run`` loop
with the system clock for ``--seconds`` (30). ``lag = time the sink accepted the message -
scheduled_for`` for every delivery (the worker's ``summary.lag_ms``): p50, p95, p99, max; goal
p99 <= 1 s. A consumer thread drains the queue meanwhile and keeps each message's ``schedule_id``
and ``scheduled_for`` attributes: every schedule must get every whole second of the window (from
the first second after the start to 2 s before the end of the run); an instant missing is a
*skipped* instant (the misfire rule skips instants rather than bursting once a schedule is more
than its period late), listed at the end. Duplicates are counted too.

DynamoDB: dynalite by default (``--backend moto`` or ``both``), SQS moto; ``--latency-ms``
(default 0,10) through ``bench.latencyproxy``. Writes a histogram PNG per run (needs the ``bench``
extra: matplotlib) next to the JSON.

    .venv/bin/python -m bench.lag [--schedules 50] [--seconds 30] [--backend dynalite] [--latency-ms 0,10]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.model import ScheduledMessage, Target
from hexeract_scheduler.service.settings import Settings

from .common import (
    RESULTS,
    ROOT,
    Consumer,
    CpuMeter,
    Endpoints,
    backends,
    composed_worker,
    create_store,
    floats,
    format_cores,
    insert_all,
    percentile,
    print_conditions,
    unique,
    write_result,
)

GOAL_P99_MS = 1000
CRON = "* * * * * *"


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_window(
    messages: list[dict[str, str]], schedule_ids: list[str], first: datetime, last: datetime
) -> tuple[list[tuple[str, datetime]], int, int, list[int]]:
    """(instants of [first, last] some schedule did not get, duplicates, deliveries in the window,
    sorted lags in ms of those deliveries: the queue's SentTimestamp - scheduled_for)."""
    seen: Counter[tuple[str, datetime]] = Counter()
    lags: list[int] = []
    for m in messages:
        if "schedule_id" in m and "scheduled_for" in m:
            at = parse_instant(m["scheduled_for"])
            seen[(m["schedule_id"], at)] += 1
            if first <= at <= last and m.get("SentTimestamp"):
                lags.append(int(m["SentTimestamp"]) - round(at.timestamp() * 1000))
    expected = [first + timedelta(seconds=i) for i in range(int((last - first).total_seconds()) + 1)]
    missing = [(sid, t) for sid in schedule_ids for t in expected if (sid, t) not in seen]
    duplicates = sum(c - 1 for c in seen.values() if c > 1)
    in_window = sum(1 for (_, t) in seen if first <= t <= last)
    return missing, duplicates, in_window, sorted(lags)


def run_one(
    endpoints: Endpoints, backend: str, latency_ms: float, schedules: int, seconds: float, poll_ms: int | None
) -> dict[str, Any]:
    conn = endpoints.connection(backend, latency_ms)
    direct_conn = endpoints.connection(backend)
    direct = ClientFactory(direct_conn)
    settings = Settings(table_name=unique(f"lag-{backend}"))
    if poll_ms is not None:
        settings = replace(settings, poll_interval_ms=poll_ms)
    admin = create_store(direct, settings)
    queue_url = direct.sqs().create_queue(QueueName=settings.table_name)["QueueUrl"]
    crons = [ScheduledMessage.cron(Target.sqs(queue_url), CRON) for _ in range(schedules)]
    insert_all(admin, crons)
    ids = [str(m.schedule_id) for m in crons]
    budget = settings.dispatch_timeout_seconds  # run() starts no round that could outlive its deadline
    with Consumer(direct_conn, queue_url) as consumer, composed_worker(settings, ClientFactory(conn)) as worker:
        worker.ready()
        meter = CpuMeter(endpoints.pids(backend, latency_ms)).start()
        start = datetime.now(UTC)
        t0 = time.monotonic()
        summary = worker.run(deadline=t0 + seconds + budget)
        elapsed = time.monotonic() - t0
        end = datetime.now(UTC)
        cores = meter.stop()
        consumer.drain()
    # The steady-state window: whole seconds from the second after the start (the first is a
    # catch-up: every schedule came due while they were inserted and the worker started, and one
    # of them late by more than a period skips an instant, as the misfire rule says) to 2 s before
    # the end (the last instants may still have been in flight when the loop stopped claiming).
    first = start.replace(microsecond=0) + timedelta(seconds=2)
    last = end.replace(microsecond=0) - timedelta(seconds=2)
    missing, duplicates, in_window, window_lags = check_window(consumer.messages, ids, first, last)
    lags = sorted(summary.lag_ms)
    window_s = int((last - first).total_seconds()) + 1
    return {
        "backend": backend,
        "latency_ms": latency_ms,
        "poll_interval_ms": settings.poll_interval_ms,
        "schedules": schedules,
        "seconds": round(elapsed, 1),
        "deliveries": len(lags),
        "per_second": round(len(lags) / elapsed, 1),
        "p50_ms": percentile(lags, 50),
        "p95_ms": percentile(lags, 95),
        "p99_ms": percentile(lags, 99),
        "max_ms": lags[-1] if lags else None,
        "window": {
            "first": first.isoformat(),
            "last": last.isoformat(),
            "seconds": window_s,
            "lag_p50_ms": percentile(window_lags, 50),
            "lag_p95_ms": percentile(window_lags, 95),
            "lag_p99_ms": percentile(window_lags, 99),
            "lag_max_ms": window_lags[-1] if window_lags else None,
        },
        "expected_in_window": window_s * schedules,
        "received_in_window": in_window,
        "skipped_instants": len(missing),
        # UUIDv7 ids share their leading (time) digits: the last 8 tell schedules apart.
        "skipped": [f"{sid[-8:]}@{t.strftime('%H:%M:%S')}" for sid, t in missing[:1000]],
        "skipped_by_instant": dict(sorted(Counter(t.strftime("%H:%M:%S") for _, t in missing).items())),
        "duplicates": duplicates,
        "summary": {k: v for k, v in summary.as_dict().items() if v},
        "cores_busy": cores,
        "histogram_ms": {
            str(b): sum(1 for x in lags if b <= x < b + 50) for b in range(0, (lags[-1] if lags else 0) + 50, 50)
        },
        "_lags": lags,
    }


def plot(row: dict[str, Any], suffix: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("    matplotlib not installed (pip install -e '.[bench]'): no histogram")
        return
    lags = row["_lags"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.hist(lags, bins=60, color="#3b6ea8")
    for name in ("p50_ms", "p95_ms", "p99_ms"):
        if not math.isnan(row[name]):
            ax.axvline(row[name], color="#c0392b", linestyle="--", linewidth=1)
            ax.text(row[name], ax.get_ylim()[1] * 0.9, name[:3], rotation=90, fontsize=8, ha="right")
    ax.set_xlabel("dispatch lag (ms): sent − scheduled_for")
    ax.set_ylabel("deliveries")
    ax.set_title(
        f"{row['schedules']} per-second crons, {row['seconds']:.0f} s, {row['backend']}, "
        f"+{row['latency_ms']:g} ms/request, poll {row['poll_interval_ms']} ms",
        fontsize=9,
    )
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    png = RESULTS / f"lag{suffix}.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    print(f"    wrote {png.relative_to(ROOT)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedules", type=int, default=50)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--backend", choices=("dynalite", "moto", "both"), default="dynalite")
    p.add_argument("--latency-ms", default="0,10", help="comma-separated latencies injected per request")
    p.add_argument("--poll-ms", type=int, help="POLL_INTERVAL_MS (default: the Settings default)")
    args = p.parse_args()
    settings = Settings(table_name="lag", **({"poll_interval_ms": args.poll_ms} if args.poll_ms else {}))
    print_conditions()
    print(
        f"{args.schedules} cron schedules '{CRON}' for {args.seconds:g} s, Settings "
        f"{'defaults' if args.poll_ms is None else 'defaults but'} (poll {settings.poll_interval_ms} ms, "
        f"concurrency {settings.concurrency}, batch {settings.batch_size}), "
        f"SystemClock; SQS on moto"
    )
    rows = []
    names = backends(args.backend)
    with Endpoints(names) as endpoints:
        for backend in names:
            for ms in floats(args.latency_ms):
                row = run_one(endpoints, backend, ms, args.schedules, args.seconds, args.poll_ms)
                ok = "meets" if row["p99_ms"] <= GOAL_P99_MS else "misses"
                print(
                    f"[{backend} +{ms:g} ms] {row['deliveries']} deliveries ({row['per_second']}/s) in "
                    f"{row['seconds']:.0f} s: lag p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
                    f"p99 {row['p99_ms']} ms ({ok} the {GOAL_P99_MS} ms goal), max {row['max_ms']} ms"
                )
                w = row["window"]
                print(
                    f"    steady-state window {w['first'][11:19]}-{w['last'][11:19]}, lag by the queue's "
                    f"SentTimestamp: p50 {w['lag_p50_ms']} ms, p95 {w['lag_p95_ms']} ms, "
                    f"p99 {w['lag_p99_ms']} ms, max {w['lag_max_ms']} ms"
                )
                print(
                    f"    window {row['window']['seconds']} s x {args.schedules} schedules = "
                    f"{row['expected_in_window']} instants: {row['received_in_window']} received, "
                    f"{row['skipped_instants']} skipped, {row['duplicates']} duplicates; "
                    f"summary {row['summary']}"
                )
                if row["skipped"]:
                    by = ", ".join(f"{t} x{c}" for t, c in row["skipped_by_instant"].items())
                    print(f"    skipped instants (instant x schedules that missed it): {by}")
                    some = " ".join(row["skipped"][:20])
                    print(f"    skipped (schedule@instant, first 20 of {row['skipped_instants']}): {some}")
                print(f"    cores busy: {format_cores(row['cores_busy'])}", flush=True)
                suffix = f"-{backend}-{ms:g}ms" + (f"-poll{args.poll_ms}" if args.poll_ms else "")
                plot(row, suffix)
                del row["_lags"]
                rows.append(row)
    write_result(
        "lag" + (f"-poll{args.poll_ms}" if args.poll_ms else ""),
        {
            "setup": {
                "cron": CRON,
                "schedules": args.schedules,
                "seconds": args.seconds,
                "settings": "Settings defaults, Lambda composition, SystemClock, worker.run(deadline)",
                "sqs": "moto, drained by a consumer thread (its own client, no injected latency)",
                "skipped": "instants of the window some schedule never received (by schedule_id, scheduled_for)",
                "goal_p99_ms": GOAL_P99_MS,
            },
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
