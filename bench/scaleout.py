"""Scale-out: k dispatcher OS processes over disjoint shard ranges of one table.

For each k (default 1, 2, 4): a fresh table (``--shards``, default 4, Settings defaults otherwise)
gets ``--n`` due one-shots to one SNS topic; then

1. the ceiling: k processes of ``concurrency`` (16) threads each doing conditional UpdateItems on
   that table, all at once (the client side split as the dispatchers' is);
2. k dispatcher processes, each composed as the Lambda composes it with
   ``Settings(dispatcher_shards=...)``: process i reads shards i, i+k, ... Each reports the
   messages its sinks accepted; once they add up to ``--n`` every process is told to stop, and
   total occ/s = occurrences acked / (last return - first start).

DynamoDB is dynalite by default (one Node.js process: its own ceiling bounds k), SQS/SNS moto,
every request ``--latency-ms`` (10) late through ``bench.latencyproxy``. On a 2-core machine the
k processes, dynalite, moto and the proxy share the cores: read the ceiling next to the figure.

    .venv/bin/python -m bench.scaleout [--k 1,2,4] [--n 1000] [--latency-ms 10] [--backend dynalite]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from datetime import datetime
from typing import IO, Any

from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.service.settings import Settings

from .common import (
    ROOT,
    ApiCounter,
    CpuMeter,
    Endpoints,
    ceiling,
    composed_worker,
    create_store,
    create_topic,
    format_cores,
    format_per_occurrence,
    insert_all,
    one_shots,
    pending_left,
    print_conditions,
    unique,
    write_result,
)

# -- a child process ---------------------------------------------------------------------------------


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def child(args: argparse.Namespace) -> None:
    """One process: say {"ready"}, wait for "go" on stdin, work, say {"result": ...}."""
    conn = Connection(endpoint_url=args.aws, service_endpoints=(("dynamodb", args.dynamodb),))
    if args.child == "ceiling":
        _say(ready=True)
        sys.stdin.readline()
        cpu0 = time.process_time()
        got = ceiling(conn, args.table, threads=args.threads, seconds=args.seconds, offset=args.index * 1000)
        _say(result={**got, "cpu": time.process_time() - cpu0})
        return
    shards = tuple(int(x) for x in args.read_shards.split(","))
    settings = Settings(table_name=args.table, shard_count=args.shard_count, dispatcher_shards=shards)
    counter = ApiCounter()
    with composed_worker(settings, counter.clients(conn)) as worker:
        worker.ready()
        _say(ready=True)
        sys.stdin.readline()  # go

        def listen() -> None:
            sys.stdin.readline()  # stop (or the parent is gone)
            worker.stop()

        def progress() -> None:
            last = -1
            while not stopped.wait(0.05):
                if counter.sent != last:
                    last = counter.sent
                    _say(sent=last)

        stopped = threading.Event()
        threading.Thread(target=listen, daemon=True).start()
        threading.Thread(target=progress, daemon=True).start()
        counter.start()
        start, cpu0 = time.time(), time.process_time()
        summary = worker.run(deadline=time.monotonic() + args.seconds)
        end, cpu = time.time(), time.process_time() - cpu0
        stopped.set()
    _say(
        result={
            "shards": list(shards),
            "start": start,
            "end": end,
            "cpu": cpu,
            "dispatched": summary.dispatched,
            "lost_claims": summary.lost_claims,
            "summary": summary.as_dict(),
            "calls": dict(counter.calls),
            "errors": dict(counter.errors),
        }
    )


# -- the parent --------------------------------------------------------------------------------------


class Child:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.scaleout", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.sent = 0
        self.result: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        out: IO[str] = self.proc.stdout  # type: ignore[assignment]
        for line in out:
            msg = json.loads(line)
            if msg.get("ready"):
                self._ready.set()
            if "sent" in msg:
                self.sent = msg["sent"]
            if "result" in msg:
                self.result = msg["result"]
        self._ready.set()

    def wait_ready(self, timeout: float = 60) -> None:
        if not self._ready.wait(timeout) or self.proc.poll() is not None:
            raise RuntimeError(f"a benchmark process did not start (status {self.proc.poll()})")

    def tell(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 120) -> dict[str, Any]:
        self._thread.join(timeout)
        self.proc.wait(10)
        if self.result is None:
            raise RuntimeError(f"a benchmark process ended without a result (status {self.proc.returncode})")
        return self.result


def _common(conn: Connection, table: str) -> list[str]:
    return ["--aws", conn.endpoint_url or "", "--dynamodb", conn.endpoint_for("dynamodb") or "", "--table", table]


def run_k(endpoints: Endpoints, args: argparse.Namespace, k: int, seed: int) -> dict[str, Any]:
    conn = endpoints.connection(args.backend, args.latency_ms)
    direct = ClientFactory(endpoints.connection(args.backend))
    settings = Settings(table_name=unique(f"so{k}-{args.backend}"), shard_count=args.shards)
    admin = create_store(direct, settings)
    target = create_topic(direct, settings.table_name)
    insert_all(admin, one_shots(target, args.n, due=datetime.now(UTC), seed=seed))
    threads = settings.concurrency

    ceilings = [
        Child(
            [
                *("--child", "ceiling", *_common(conn, settings.table_name)),
                *("--threads", str(threads), "--seconds", str(args.ceiling_seconds), "--index", str(i)),
            ]
        )
        for i in range(k)
    ]
    for c in ceilings:
        c.wait_ready()
    meter = CpuMeter(endpoints.pids(args.backend, args.latency_ms)).start()
    for c in ceilings:
        c.tell("go")
    got = [c.finish() for c in ceilings]
    ceiling_cores = meter.stop()
    ceiling_cores["client"] = round(sum(g["cpu"] for g in got) / max(g["seconds"] for g in got), 2)
    ceil = sum(g["per_second"] for g in got)

    workers = [
        Child(
            [
                *("--child", "dispatch", *_common(conn, settings.table_name)),
                *("--shard-count", str(args.shards), "--read-shards", ",".join(map(str, range(i, args.shards, k)))),
                *("--seconds", str(60 + args.n * 0.2)),
            ]
        )
        for i in range(k)
    ]
    for w in workers:
        w.wait_ready()
    meter.start()
    for w in workers:
        w.tell("go")
    limit = time.monotonic() + 60 + args.n * 0.2
    while sum(w.sent for w in workers) < args.n and time.monotonic() < limit:
        if all(w.proc.poll() is not None for w in workers):
            break
        time.sleep(0.02)
    for w in workers:
        if w.proc.poll() is None:
            w.tell("stop")
    results = [w.finish() for w in workers]
    run_cores = meter.stop()
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    run_cores["client"] = round(sum(r["cpu"] for r in results) / elapsed, 2)
    dispatched = sum(r["dispatched"] for r in results)
    calls: dict[str, int] = {}
    for r in results:
        for op, c in r["calls"].items():
            calls[op] = calls.get(op, 0) + c
    rate = dispatched / elapsed
    per = {op: round(c / max(dispatched, 1), 3) for op, c in sorted(calls.items())}
    per["total"] = round(sum(calls.values()) / max(dispatched, 1), 3)
    return {
        "k": k,
        "shards_per_process": [r["shards"] for r in results],
        "ceiling_updates_per_second": round(ceil, 1),
        "ceiling_threads": threads * k,
        "ceiling_cores_busy": ceiling_cores,
        "occurrences_per_second_allowed": round(ceil / 2, 1),
        "dispatched": dispatched,
        "seconds": round(elapsed, 3),
        "per_second": round(rate, 1),
        "ratio_to_allowed": round(rate / (ceil / 2), 3) if ceil else None,
        "per_process": [r["dispatched"] for r in results],
        "cores_busy": run_cores,
        "lost_claims": sum(r["lost_claims"] for r in results),
        "pending_left": pending_left(admin),
        "requests_per_occurrence": per,
        "errors": [r["errors"] for r in results if r["errors"]],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", default="1,2,4", help="numbers of dispatcher processes, comma-separated")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--latency-ms", type=float, default=10.0)
    p.add_argument("--backend", choices=("dynalite", "moto"), default="dynalite")
    p.add_argument("--shards", type=int, default=4, help="the table's shard count (>= the largest k)")
    p.add_argument("--ceiling-seconds", type=float, default=3.0)
    # child mode (internal)
    p.add_argument("--child", choices=("ceiling", "dispatch"), help=argparse.SUPPRESS)
    for name in ("--aws", "--dynamodb", "--table", "--read-shards"):
        p.add_argument(name, help=argparse.SUPPRESS)
    for name in ("--threads", "--index", "--shard-count"):
        p.add_argument(name, type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    ks = [int(x) for x in args.k.split(",")]
    if max(ks) > args.shards:
        p.error(f"k={max(ks)} processes need at least as many shards (--shards)")
    print_conditions()
    print(
        f"{args.n} due one-shots per k, DynamoDB on {args.backend}, +{args.latency_ms:g} ms per request, "
        f"{args.shards} shards, Settings defaults per process"
    )
    rows = []
    t0 = time.perf_counter()
    with Endpoints([args.backend]) as endpoints:
        for k in ks:
            row = run_k(endpoints, args, k, seed=100 + k)
            rows.append(row)
            print(
                f"k={k}: {row['per_second']:.1f} occ/s ({row['dispatched']} in {row['seconds']:.2f} s; per process "
                f"{row['per_process']}; {row['pending_left']} left) | ceiling {row['ceiling_updates_per_second']:.0f} "
                f"UpdateItem/s from {row['ceiling_threads']} threads in {k} processes -> "
                f"{row['occurrences_per_second_allowed']:.0f} occ/s allowed | ratio {row['ratio_to_allowed']:.2f} | "
                f"calls/occurrence {format_per_occurrence(row['requests_per_occurrence'])}"
            )
            print(
                f"    cores busy during the ceiling: {format_cores(row['ceiling_cores_busy'])}; "
                f"during the run: {format_cores(row['cores_busy'])} (client: the k processes together)",
                flush=True,
            )
    base = rows[0]["per_second"] if rows else 0
    for row in rows:
        row["speedup_vs_first"] = round(row["per_second"] / base, 2) if base else None
    print(f"speed-up vs k={ks[0]}: " + ", ".join(f"k={r['k']} x{r['speedup_vs_first']}" for r in rows))
    print(f"total {time.perf_counter() - t0:.0f} s")
    write_result(
        "scaleout",
        {
            "setup": {
                "dynamodb": args.backend,
                "latency_ms": args.latency_ms,
                "occurrences": args.n,
                "shards": args.shards,
                "processes": "k dispatcher OS processes, Settings(dispatcher_shards=i::k), Lambda composition",
                "ceiling": "k processes x Settings.concurrency threads of conditional UpdateItems, same table/proxy",
            },
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
