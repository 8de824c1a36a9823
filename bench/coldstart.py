"""Cold start: import time of the Lambda handler modules vs a bare ``import boto3``.

Each import runs in a fresh interpreter (``python -c``, timed inside the child with
``perf_counter`` around the import only); the median of several runs is reported. The handler
modules ``functions.dispatcher.app`` / ``functions.dead_letter.app`` are measured when they exist,
the library modules always.

    .venv/bin/python -m bench.coldstart [--runs 9]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
from pathlib import Path

from .common import write_result

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = [
    ("python (no import)", "pass"),
    ("boto3", "import boto3"),
    (
        "boto3 + 3 clients",
        "import boto3; s = boto3.session.Session(region_name='us-east-1'); "
        "[s.client(x, aws_access_key_id='a', aws_secret_access_key='b') for x in ('dynamodb', 'sqs', 'sns')]",
    ),
    ("hexeract_scheduler", "import hexeract_scheduler"),
    ("hexeract_scheduler.engine.worker", "import hexeract_scheduler.engine.worker"),
    ("functions.dispatcher.app", "import functions.dispatcher.app"),
    ("functions.dead_letter.app", "import functions.dead_letter.app"),
]


def time_once(stmt: str) -> float:
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "AWS_DEFAULT_REGION": "us-east-1",
        "TABLE_NAME": "hexeract-schedules",
        "PYTHONDONTWRITEBYTECODE": "0",
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=9)
    args = p.parse_args()
    rows = []
    for name, stmt in CANDIDATES:
        module = stmt.removeprefix("import ").split(";")[0] if stmt.startswith("import ") else None
        if module and module.startswith("functions.") and not (ROOT / (module.replace(".", "/") + ".py")).exists():
            print(f"{name:<28} skipped: module not present yet")
            continue
        if module and not module.startswith("functions.") and importlib.util.find_spec(module.split(".")[0]) is None:
            continue
        try:
            time_once(stmt)  # warm the bytecode cache and the page cache: Lambda's layers are compiled too
            samples = sorted(time_once(stmt) * 1000 for _ in range(args.runs))
        except subprocess.CalledProcessError as exc:
            print(f"{name:<28} failed: {exc.stderr.strip().splitlines()[-1:]}")
            continue
        med = statistics.median(samples)
        rows.append(
            {
                "import": name,
                "statement": stmt,
                "median_ms": round(med, 1),
                "min_ms": round(samples[0], 1),
                "max_ms": round(samples[-1], 1),
                "runs": args.runs,
            }
        )
        print(f"{name:<28} median {med:7.1f} ms  (min {samples[0]:.1f}, max {samples[-1]:.1f}, {args.runs} runs)")
    write_result("coldstart", {"method": "fresh interpreter per run, perf_counter around the import", "rows": rows})


if __name__ == "__main__":
    main()
