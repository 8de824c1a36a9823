"""Fills the generated regions of the docs from the data they describe.

    python tools/render_docs.py          # rewrite every region of README.md and docs/*.md
    python tools/render_docs.py --check  # exit 1 naming each region out of date, unknown or unclosed

A region is the lines between two markers, each alone on its line::

    <!-- BEGIN bench:throughput -->
    (whatever the renderer returned: never edited by hand)
    <!-- END bench:throughput -->

Its name picks a function in ``RENDERERS`` that returns Markdown; the text between the markers is
replaced by it. Markers inside fenced code blocks are text, not regions. The ``bench:*`` renderers
read ``bench/results/*.json`` as ``make bench`` wrote them and never run a benchmark; each says
which file and run (``conditions.when``) its figures come from. Other families register the same
way, e.g. ``@renderer("config:table")`` on a function that renders the settings.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

Renderer = Callable[[], str]
RENDERERS: dict[str, Renderer] = {}

MARKER = re.compile(r"^<!--\s*(?P<kind>BEGIN|END)\s+(?P<name>[\w:.-]+)\s*-->$")
LOOKS_LIKE_MARKER = re.compile(r"^<!--\s*(BEGIN|END)\b")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})")


def renderer(name: str) -> Callable[[Renderer], Renderer]:
    """Registers a function as the renderer of the regions called ``name``."""

    def register(fn: Renderer) -> Renderer:
        if name in RENDERERS:
            raise ValueError(f"two renderers for {name}")
        RENDERERS[name] = fn
        return fn

    return register


# --- Regions ---------------------------------------------------------------------------------


class RegionError(ValueError):
    """A marker out of place: malformed, an END with no BEGIN, a region inside another, unclosed."""


@dataclass(frozen=True)
class Region:
    name: str
    begin: int  # index of the BEGIN line
    end: int  # index of the END line


def regions(lines: list[str]) -> list[Region]:
    """The regions of a document's lines, in order."""
    found: list[Region] = []
    opened: tuple[str, int] | None = None
    fence: str | None = None
    for i, line in enumerate(lines):
        text = line.strip()
        if fence is not None:  # inside a fenced block: only its closing fence counts
            if set(text) == {fence[0]} and len(text) >= len(fence):
                fence = None
            continue
        if opening := FENCE.match(line):
            fence = opening["fence"]
            continue
        marker = MARKER.match(text)
        if marker is None:
            if LOOKS_LIKE_MARKER.match(text):
                raise RegionError(f"line {i + 1}: malformed marker {text!r}")
            continue
        name = marker["name"]
        if marker["kind"] == "BEGIN":
            if opened is not None:
                raise RegionError(f"line {i + 1}: {name} begins inside {opened[0]} (line {opened[1] + 1})")
            opened = (name, i)
        elif opened is None or opened[0] != name:
            raise RegionError(f"line {i + 1}: END {name} closes no open region")
        else:
            found.append(Region(name, opened[1], i))
            opened = None
    if opened is not None:
        raise RegionError(f"line {opened[1] + 1}: {opened[0]} is never closed (no <!-- END {opened[0]} -->)")
    return found


def body(markdown: str) -> list[str]:
    """The lines a region holds: the renderer's Markdown between blank lines (so that a table or
    a list is never glued to a marker)."""
    return ["\n", *(line + "\n" for line in markdown.strip("\n").split("\n")), "\n"]


def render(text: str, renderers: Mapping[str, Renderer] = RENDERERS) -> str:
    """``text`` with every region filled by its renderer; ``RegionError`` on a misplaced marker or
    an unknown name."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    last = 0
    for region in regions(lines):
        if region.name not in renderers:
            raise RegionError(f"line {region.begin + 1}: no renderer for {region.name}")
        out += lines[last : region.begin + 1] + body(renderers[region.name]())
        last = region.end
    return "".join(out + lines[last:])


def problems(text: str, renderers: Mapping[str, Renderer] = RENDERERS) -> list[str]:
    """What ``--check`` says of one document: each region that is unknown or out of date, or the
    first misplaced marker."""
    lines = text.splitlines(keepends=True)
    try:
        found = regions(lines)
    except RegionError as e:
        return [str(e)]
    said = []
    for r in found:
        where = f"line {r.begin + 1}: {r.name}"
        if r.name not in renderers:
            said.append(f"{where}: no renderer for this name (known: {', '.join(sorted(renderers))})")
        elif lines[r.begin + 1 : r.end] != body(renderers[r.name]()):
            said.append(f"{where} is out of date")
    return said


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is not up to date")
    args = parser.parse_args(argv)
    failed = False
    for path in documents():
        name, text = path.relative_to(ROOT), path.read_text()
        if args.check:
            for problem in problems(text):
                print(f"{name}: {problem}", file=sys.stderr)
                failed = True
            continue
        try:
            new = render(text)
        except RegionError as e:
            print(f"{name}: {e}", file=sys.stderr)
            failed = True
            continue
        if new != text:
            path.write_text(new)
            print(f"rewrote {name}")
    if failed and args.check:
        print("run: python tools/render_docs.py", file=sys.stderr)
    return 1 if failed else 0


# --- Formatting ------------------------------------------------------------------------------


def num(x: float, digits: int = 0) -> str:
    """``1,000``, ``168.6``: thousands separated, ``digits`` decimals."""
    return f"{x:,.{digits}f}"


def short(x: float) -> str:
    """At most two decimals, no trailing zeros: ``2``, ``0.13``, ``2.23``."""
    return f"{round(x, 2):g}"


def cents(x: float) -> Decimal:
    """To the cent, halves rounded up as written (3.775 -> 3.78, where binary 3.7749... gives 3.77)."""
    return Decimal(str(x)).quantize(Decimal("0.01"), ROUND_HALF_UP)


def usd(x: float) -> str:
    return f"${cents(x):,}"


def price(per_unit: float) -> str:
    """A unit price as dollars per million: ``$0.625``, ``$1.00``."""
    text = f"{per_unit * 1e6:.3f}"
    return "$" + (text[:-1] if text.endswith("0") else text)


def size(n: int) -> str:
    return f"{n // 1024} KB" if n >= 1024 and n % 1024 == 0 else f"{n:,} B"


def latency(ms: float) -> str:
    return f"+{ms:g} ms"


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


# --- bench:* ---------------------------------------------------------------------------------

# The headline runs: DynamoDB on dynalite with a network round trip injected in front of it.
HEADLINE: dict[str, Any] = {"backend": "dynalite", "latency_ms": 10.0}


def results(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    return data


def source(name: str, data: dict[str, Any]) -> str:
    return f"`bench/results/{name}.json`, run {data['conditions']['when']}"


def sourced(name: str, data: dict[str, Any]) -> str:
    return f"*From {source(name, data)}.*"


def pick(runs: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    for run in runs:
        if all(run.get(k) == v for k, v in match.items()):
            return run
    raise LookupError(f"no run with {match}")


def requests(per: dict[str, float]) -> str:
    """``2.23 (UpdateItem 2, Query 0.13, PublishBatch 0.1)``"""
    parts = sorted(((k, v) for k, v in per.items() if k != "total"), key=lambda kv: -kv[1])
    return f"{short(per['total'])} (" + ", ".join(f"{k} {short(v)}" for k, v in parts) + ")"


def cores(busy: dict[str, float], *names: str) -> str:
    """``0.75 / 0.39``: the cores ``names`` kept busy (client first, then the DynamoDB backend)."""
    return " / ".join(f"{busy.get(name, 0):.2f}" for name in names)


def cost_row(cost: dict[str, Any], scenario: str = "one-shot", payload: int = 100) -> dict[str, Any]:
    return pick(cost["rows"], scenario=scenario, payload_bytes=payload)


VERSIONS = {"python": "Python", "boto3": "boto3", "moto": "moto", "dynalite": "dynalite", "node": "Node"}


@renderer("bench:conditions")
def bench_conditions() -> str:
    rows, versions = [], set()
    for path in sorted(RESULTS.glob("*.json")):
        c = results(path.stem)["conditions"]
        load = " / ".join(f"{x:g}" for x in c["load_average_1_5_15"])
        rows.append([f"`{path.name}`", c["when"], str(c["cpus"]), load])
        versions.add(", ".join(f"{label} {c[key]}" for key, label in VERSIONS.items()))
    header = ["results", "run (UTC)", "CPUs", "load average at its start (1 / 5 / 15 min)"]
    versions_line = "Versions: " + "; ".join(sorted(versions)) + "."
    return "\n\n".join([table(header, rows), versions_line, "*From the `conditions` of each `bench/results/*.json`.*"])


@renderer("bench:throughput")
def bench_throughput() -> str:
    data = results("throughput")
    runs, goals = data["runs"], data["setup"]["goals"]
    threads = sorted({str(r["ceiling"]["threads"]) for r in runs})
    rows = []
    for r in runs:
        c, d, per = r["ceiling"], r["dispatcher"], r["requests"]["per_occurrence"]
        rows.append(
            [
                r["backend"],
                latency(r["latency_ms"]),
                f"{num(c['updates_per_second'])} ({num(c['before_run'])} / {num(c['after_run'])})",
                f"{num(c['occurrences_per_second_allowed'])} occ/s",
                f"{num(d['per_second'], 1)} occ/s ({num(d['dispatched'])} in {d['seconds']:.2f} s)",
                f"{d['ratio_to_allowed']:.2f}",
                f"{short(per['total'])} (Query {short(per['Query'])})",
                cores(d["cores_busy"], "client", r["backend"]),
            ]
        )
    header = [
        "DynamoDB",
        "latency",
        f"ceiling: UpdateItem/s, {', '.join(threads)} threads (before / after)",
        "allowed (ceiling / 2)",
        "dispatcher",
        "ratio",
        "AWS requests / occurrence",
        "cores busy: client / DynamoDB",
    ]
    ratio_met = sum(r["dispatcher"]["ratio_to_allowed"] >= goals["ratio_to_allowed"] for r in runs)
    calls_met = sum(r["requests"]["per_occurrence"]["total"] <= goals["requests_per_occurrence"] for r in runs)
    lost = sum(r["dispatcher"]["lost_claims"] for r in runs)
    pending = sum(r["dispatcher"]["pending_left"] for r in runs)
    return "\n\n".join(
        [
            table(header, rows),
            f"Goal ratio ≥ {goals['ratio_to_allowed']:g}: met in {ratio_met} of {len(runs)} runs. "
            f"Goal ≤ {goals['requests_per_occurrence']:g} AWS requests per occurrence: met in {calls_met} "
            f"of {len(runs)}. Lost claim races: {lost}; occurrences left pending: {pending}.",
            sourced("throughput", data),
        ]
    )


@renderer("bench:scaleout")
def bench_scaleout() -> str:
    data = results("scaleout")
    setup = data["setup"]
    rows = []
    for r in data["runs"]:
        per = r["requests_per_occurrence"]
        rows.append(
            [
                str(r["k"]),
                " ".join("{" + ",".join(map(str, s)) + "}" for s in r["shards_per_process"]),
                f"{num(r['ceiling_updates_per_second'])} ({r['ceiling_threads']} threads)",
                f"{num(r['occurrences_per_second_allowed'])} occ/s",
                f"{num(r['per_second'], 1)} occ/s",
                f"{r['ratio_to_allowed']:.2f}",
                f"× {r['speedup_vs_first']:.2f}",
                f"{short(per['total'])} (Query {short(per['Query'])})",
                cores(r["ceiling_cores_busy"], "client", setup["dynamodb"]),
                cores(r["cores_busy"], "client", setup["dynamodb"]),
            ]
        )
    header = [
        "k",
        "shards of each process",
        "ceiling: UpdateItem/s",
        "allowed",
        "dispatchers together",
        "ratio",
        "speed-up",
        "AWS requests / occurrence",
        "cores busy, ceiling: client / DynamoDB",
        "cores busy, dispatchers: client / DynamoDB",
    ]
    lost = sum(r["lost_claims"] for r in data["runs"])
    pending = sum(r["pending_left"] for r in data["runs"])
    conditions = (
        f"DynamoDB on {setup['dynamodb']} at {latency(setup['latency_ms'])}, {num(setup['occurrences'])} due "
        f"one-shots over {setup['shards']} shards. Lost claim races: {lost}; left pending: {pending}."
    )
    return "\n\n".join([table(header, rows), conditions, sourced("scaleout", data)])


@renderer("bench:lag")
def bench_lag() -> str:
    data = results("lag")
    goal = data["setup"]["goal_p99_ms"]
    rows = []
    for r in data["runs"]:
        w = r["window"]
        rows.append(
            [
                r["backend"],
                latency(r["latency_ms"]),
                f"{num(r['deliveries'])} ({r['per_second']:.1f}/s)",
                *(f"{num(r[k])} ms" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")),
                f"{w['seconds']} s: {num(r['received_in_window'])} of {num(r['expected_in_window'])}",
                f"{num(w['lag_p50_ms'])} / {num(w['lag_p99_ms'])} ms",
                str(r["skipped_instants"]),
                str(r["duplicates"]),
            ]
        )
    header = [
        "DynamoDB",
        "latency",
        "deliveries",
        "p50",
        "p95",
        "p99",
        "max",
        "window: instants received",
        "window p50 / p99 by SentTimestamp",
        "skipped",
        "duplicates",
    ]
    met = sum(r["p99_ms"] <= goal for r in data["runs"])
    s = data["setup"]
    conditions = (
        f"{s['schedules']} schedules `{s['cron']}` for {s['seconds']:g} s each run, poll interval "
        f"{', '.join(sorted({num(r['poll_interval_ms']) + ' ms' for r in data['runs']}))}. "
        f"Goal p99 ≤ {num(goal)} ms: met in {met} of {len(data['runs'])} runs."
    )
    return "\n\n".join([table(header, rows), conditions, sourced("lag", data)])


@renderer("bench:cost")
def bench_cost() -> str:
    data = results("cost")
    p, a = data["prices_usd"], data["assumptions"]
    sizes = sorted({r["payload_bytes"] for r in data["rows"]})
    scenarios = list(dict.fromkeys(r["scenario"] for r in data["rows"]))
    rows = []
    for scenario in scenarios:
        cells = [scenario]
        for payload in sizes:
            r = cost_row(data, scenario, payload)
            wru = r["create_wru"] + r["dispatch_wru"]
            cells.append(f"{usd(r['dynamodb_usd_per_million'])} ({wru} WRU, {short(r['rru'])} RRU)")
        rows.append(cells)
    header = ["DynamoDB $ per million (WRU, RRU per occurrence)", *(f"payload {size(b)}" for b in sizes)]
    prices = (
        f"Prices (on-demand, us-east-1): {price(p['wru'])} per million WRU, {price(p['rru'])} per million RRU; "
        f"EventBridge Scheduler: {price(p['eventbridge_invocation'])} per million invocations. Assumed: "
        f"{a['shards']} shards, batches of {a['batch_size']}, {short(a['queries_per_claim'])} Query per claim "
        "(one per shard per batch: a backlog). A recurring schedule's insert is spread over its occurrences "
        "and not counted."
    )
    return "\n\n".join([table(header, rows), prices, sourced("cost", data)])


@renderer("bench:cost-steps")
def bench_cost_steps() -> str:
    data = results("cost")
    lines = []
    for scenario, payload in (("one-shot", 100), ("recurring", 100), ("one-shot", 64 * 1024)):
        r = cost_row(data, scenario, payload)
        steps = []
        for s in r["steps"]:
            # "due-index-v2 in-place update (leased_until)" -> "in-place update: leased_until"
            index = re.sub(r" \((.*)\)$", r": \1", s["index"].split(" ", 1)[1]) if s["wru_index"] else "no index"
            notes = [index] + ([f"reads {short(s['rru'])} RRU"] if s["rru"] else [])
            if s["step"].startswith("insert") and not r["create_wru"]:
                notes.append("once per schedule")
            steps.append(f"{s['step']} {s['wru_table']} + {s['wru_index']} ({', '.join(notes)})")
        queries = r["rru"] - sum(s["rru"] for s in r["steps"])
        lines.append(f"- **{scenario}, {size(payload)}**: " + "; ".join(steps) + f"; Queries {short(queries)} RRU.")
    return "\n".join(["WRU per step, table + index:", "", *lines, "", sourced("cost", data)])


@renderer("bench:cost-idle")
def bench_cost_idle() -> str:
    data = results("cost")
    a, failed = data["assumptions"], data["failed_conditional_write_wru"]
    lost = ", ".join(f"{failed[k]} WRU at {size(int(k))}" for k in sorted(failed, key=int))
    return (
        f"One dispatcher polling its {a['shards']} shards every {a['poll_interval_s'] * 1000:g} ms with nothing "
        f"due reads {num(data['idle_polling_rru_per_month'] / 1e6, 1)} million RRU a month: "
        f"{usd(data['idle_polling_usd_per_month'])} a month in empty Queries. A lost claim race (a failed "
        f"conditional write) costs {lost}. {sourced('cost', data)}"
    )


@renderer("bench:cost-per-million")
def bench_cost_per_million() -> str:
    data = results("cost")
    single, recurring = cost_row(data), cost_row(data, "recurring")
    return (
        f"DynamoDB on demand costs {usd(single['dynamodb_usd_per_million'])} per million small "
        f"({size(single['payload_bytes'])}) one-shots and {usd(recurring['dynamodb_usd_per_million'])} per "
        f"million recurring occurrences ({source('cost', data)})."
    )


@renderer("bench:cpu")
def bench_cpu() -> str:
    data = results("cpu")
    floor = data["boto3_floor"]
    workers = sorted(
        (v for k, v in data.items() if k.startswith("worker_concurrency_")), key=lambda w: w["concurrency"]
    )
    occurrences = workers[0]["occurrences"]

    def ms(us: float) -> str:
        return f"{us / 1000:.2f} ms"

    def rounds(entry: dict[str, Any]) -> str:
        return ", ".join(ms(x) for x in entry["all_cpu_us_per_occurrence"])

    rows = [
        [
            f"bare boto3: the same {num(floor['requests'])} requests replayed, "
            f"{num(floor['cpu_us_per_request'])} µs each",
            ms(floor["cpu_us_per_occurrence"]),
            rounds(floor),
            "× 1.00",
            short(floor["requests"] / occurrences),
        ]
    ]
    for w in workers:
        rows.append(
            [
                f"SchedulerWorker, concurrency {w['concurrency']}",
                ms(w["cpu_us_per_occurrence"]),
                rounds(w),
                f"× {w['cpu_us_per_occurrence'] / floor['cpu_us_per_occurrence']:.2f}",
                short(w["requests_per_occurrence"]["total"]),
            ]
        )
    header = ["", "client CPU per occurrence", "each round", "vs bare boto3", "AWS requests / occurrence"]
    note = f"{num(occurrences)} due one-shots per drain; {floor['refused']} replayed requests refused."
    return "\n\n".join([table(header, rows), note, sourced("cpu", data)])


@renderer("bench:coldstart")
def bench_coldstart() -> str:
    data = results("coldstart")
    rows = [
        [
            f"`{r['import']}`" if " " not in r["import"] else r["import"],
            *(f"{r[k]:.0f} ms" for k in ("median_ms", "min_ms", "max_ms")),
        ]
        for r in data["rows"]
        if r["statement"] != "pass"  # the bare interpreter: nothing is timed
    ]
    runs = sorted({r["runs"] for r in data["rows"]})
    text = [table(["import", "median", "min", "max"], rows), f"Runs per row: {', '.join(map(str, runs))}."]
    by_name = {r["import"]: r["median_ms"] for r in data["rows"]}
    handlers = [v for k, v in by_name.items() if k.startswith("functions.")]
    if handlers and "boto3 + 3 clients" in by_name:
        extra = sorted(v - by_name["boto3 + 3 clients"] for v in handlers)
        text[1] += (
            f" The handlers' imports take {extra[0]:.0f} to {extra[-1]:.0f} ms (medians) more than boto3 with "
            "its three clients."
        )
    return "\n\n".join([*text, sourced("coldstart", data)])


@renderer("bench:summary")
def bench_summary() -> str:
    tp, cost, lag, cpu = (results(n) for n in ("throughput", "cost", "lag", "cpu"))
    run = pick(tp["runs"], **HEADLINE)
    d, c = run["dispatcher"], run["ceiling"]
    small = cost_row(cost)
    lagged = pick(lag["runs"], **HEADLINE)
    c16 = max((v for k, v in cpu.items() if k.startswith("worker_concurrency_")), key=lambda w: w["concurrency"])
    floor = cpu["boto3_floor"]["cpu_us_per_occurrence"]
    where = f"DynamoDB on {HEADLINE['backend']} at {latency(HEADLINE['latency_ms'])} per request"
    return "\n".join(
        [
            f"- **Throughput**: one dispatcher delivers {num(d['per_second'], 1)} occurrences/s, "
            f"{d['ratio_to_allowed']:.2f} of the {num(c['occurrences_per_second_allowed'])} occurrences/s the "
            f"endpoint's ceiling allows ({where}; {source('throughput', tp)}).",
            f"- **AWS requests per delivered one-shot**: {requests(run['requests']['per_occurrence'])}, same run.",
            f"- **DynamoDB per small ({size(small['payload_bytes'])}) one-shot**: "
            f"{small['create_wru'] + small['dispatch_wru']} write units, {usd(small['dynamodb_usd_per_million'])} "
            f"per million ({source('cost', cost)}).",
            f"- **Dispatch lag**: p50 {num(lagged['p50_ms'])} ms, p99 {num(lagged['p99_ms'])} ms, "
            f"{lagged['schedules']} schedules firing every second ({where}; {source('lag', lag)}).",
            f"- **Client CPU per occurrence**: {c16['cpu_us_per_occurrence'] / 1000:.2f} ms at concurrency "
            f"{c16['concurrency']}, {c16['cpu_us_per_occurrence'] / floor:.2f} × the {floor / 1000:.2f} ms of bare "
            f"boto3 sending the same requests ({source('cpu', cpu)}).",
        ]
    )


# --- config:* --------------------------------------------------------------------------------


@renderer("config:table")
def config_table() -> str:
    """docs/configuration.md's table: one row per ``Settings`` variable, in the order of
    ``VARIABLES``, with the default ``Settings.from_env`` gives when the variable is unset."""
    from dataclasses import fields

    from hexeract_scheduler.service.settings import VARIABLES, Settings, Variable

    defaults = {f.name: f.default for f in fields(Settings)}
    unset = {
        "table_name": "required",
        "dispatcher_shards": "`all`",
        "dispatcher_shard_ranges": "empty (no check)",
        "dispatch_period_minutes": "none (no check)",
    }

    def default(var: Variable) -> str:
        value = defaults[var.field]
        if var.field in unset:
            return unset[var.field]
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"

    rows = ["| variable | parameter | default | accepted | meaning |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| `{v.env}` | {v.parameter} | {default(v)} | {v.accepted} | {v.meaning} |" for v in VARIABLES]
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
