"""Dispatch lag under steady load: cron schedules firing every second, the real clock.

``lag = time the sink accepted the message - scheduled_for`` (the worker's ``summary.lag_ms``),
for every delivery during the run. Writes a histogram PNG next to the JSON.

    .venv/bin/python -m bench.lag [--schedules 50] [--seconds 40] [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta

from hexeract_scheduler.clock import UTC, SystemClock
from hexeract_scheduler.dynamo import DynamoScheduleStore
from hexeract_scheduler.model import ScheduledMessage, Target
from hexeract_scheduler.sinks import Dispatcher
from hexeract_scheduler.worker import SchedulerWorker, SchedulerWorkerConfig

from .common import RESULTS, Purger, clients_for, inject_latency, moto_server, percentile, write_result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--schedules", type=int, default=50)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--latency-ms", type=float, default=0.0)
    args = p.parse_args()
    with moto_server() as url:
        clients = clients_for(url)
        store = DynamoScheduleStore("lag", dynamodb=clients.dynamodb())
        store.create_table(shards=4)
        q = clients.sqs().create_queue(QueueName="lag")["QueueUrl"]
        now = datetime.now(UTC)
        for _ in range(args.schedules):
            store.insert(ScheduledMessage.cron(Target.sqs(q), "* * * * * *"), now)
        inject_latency(args.latency_ms / 1000, clients.dynamodb(), clients.sqs())
        cfg = SchedulerWorkerConfig(poll_interval=timedelta(milliseconds=100), dispatch_timeout=timedelta(seconds=1))
        clock = SystemClock()
        with Purger(url, [q]), SchedulerWorker(store, Dispatcher.for_clients(clients), cfg, clock=clock) as worker:
            worker.run(cycles=1)  # warm-up: connections, shard count
            t0 = time.monotonic()
            summary = worker.run(deadline=t0 + args.seconds + cfg.dispatch_timeout.total_seconds())
            elapsed = time.monotonic() - t0
    lags = sorted(summary.lag_ms)
    stats = {
        "deliveries": len(lags),
        "per_second": round(len(lags) / elapsed, 1),
        "p50_ms": percentile(lags, 50),
        "p95_ms": percentile(lags, 95),
        "p99_ms": percentile(lags, 99),
        "max_ms": lags[-1] if lags else None,
        "retried": summary.retried,
        "lease_lost": summary.lease_lost,
    }
    print(
        f"{args.schedules} cron schedules '* * * * * *', {elapsed:.0f}s, poll 100 ms, +{args.latency_ms:g} ms/request: "
        f"{stats['deliveries']} deliveries ({stats['per_second']}/s); "
        f"lag p50 {stats['p50_ms']} ms, p95 {stats['p95_ms']} ms, "
        f"p99 {stats['p99_ms']} ms, max {stats['max_ms']} ms"
    )
    suffix = "" if not args.latency_ms else f"-{args.latency_ms:g}ms"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.hist(lags, bins=60, color="#3b6ea8")
        for name in ("p50_ms", "p95_ms", "p99_ms"):
            ax.axvline(stats[name], color="#c0392b", linestyle="--", linewidth=1)
            ax.text(stats[name], ax.get_ylim()[1] * 0.9, name[:3], rotation=90, fontsize=8, ha="right")
        ax.set_xlabel("dispatch lag (ms): sent − scheduled_for")
        ax.set_ylabel("deliveries")
        ax.set_title(f"{args.schedules} per-second crons, {elapsed:.0f}s, poll 100 ms, +{args.latency_ms:g} ms/request")
        fig.tight_layout()
        png = RESULTS / f"lag{suffix}.png"
        RESULTS.mkdir(parents=True, exist_ok=True)
        fig.savefig(png, dpi=110)
        print(f"wrote {png.relative_to(RESULTS.parent.parent)}")
    except ImportError:
        print("matplotlib not installed (pip install -e '.[bench]'): no histogram")
    write_result(
        f"lag{suffix}",
        {
            "setup": {
                "schedules": args.schedules,
                "cron": "* * * * * *",
                "seconds": round(elapsed, 1),
                "poll_interval_ms": 100,
                "latency_ms": args.latency_ms,
                "clock": "SystemClock",
                "moto": "separate process",
            },
            **stats,
            "histogram_ms": {
                str(b): sum(1 for x in lags if b <= x < b + 50) for b in range(0, (lags[-1] if lags else 0) + 50, 50)
            },
        },
    )


if __name__ == "__main__":
    main()
