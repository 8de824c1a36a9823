"""Cost per delivered occurrence: DynamoDB capacity units computed from item sizes (no AWS needed).

The items and update expressions mirror ``hexeract_scheduler.dynamo`` step by step (insert, claim, mark_delivered,
reschedule, mark_failed, mark_dead_lettered), with DynamoDB's documented accounting:

* item size = Σ (attribute name bytes + value bytes); a string is its UTF-8 length, binary its
  length, a number 1 byte + 1 per two significant digits;
* a write costs ⌈size / 1 KB⌉ WRU, and an UpdateItem is charged on the larger of the item before
  and after; a failed conditional write is still charged (⌈existing size / 1 KB⌉, at least 1);
* each GSI write costs ⌈entry / 1 KB⌉ WRU, entry = table key + index keys + 100 bytes
  (all three indexes are KEYS_ONLY, so 1 WRU): entering the index = 1 put, leaving = 1 delete,
  changing an index key = delete + put = 2;
* a Query on a GSI is eventually consistent: 0.5 RRU per 4 KB returned, at least 0.5 per Query.

Prices assumed (on-demand, us-east-1, 2025): $0.625 per million WRU, $0.125 per million RRU;
EventBridge Scheduler $1.00 per million invocations (beyond the 14 million free each month);
SQS standard $0.40 per million requests, each 64 KB of a request billed as one request.

    .venv/bin/python -m bench.cost
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

WRU_USD = 0.625e-6
RRU_USD = 0.125e-6
EVENTBRIDGE_USD = 1.00e-6
SQS_USD = 0.40e-6
KB = 1024

SHARDS = 4
BATCH = 10
POLL_S = 0.1
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-reminders"
ERROR = "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."
# (name, hash key, range key) of each index (table_definition)
GSIS = (
    ("due-index", "due_shard", "due_at"),
    ("dead-letter-index", "dl_pk", "dead_lettered_at"),
)

Item = dict[str, tuple[str, Any]]


def n(v: int) -> tuple[str, Any]:
    return ("N", v)


def s(v: str) -> tuple[str, Any]:
    return ("S", v)


def value_size(kind: str, v: Any) -> int:
    if kind == "S":
        return len(v.encode())
    if kind == "B":
        return len(v)
    digits = str(abs(int(v))).strip("0") or "0"
    return 1 + math.ceil(len(digits) / 2)


def item_size(item: Item) -> int:
    return sum(len(k.encode()) + value_size(*v) for k, v in item.items())


def index_entry_size(item: Item, hk: str, rk: str) -> int:
    return sum(len(k) + value_size(*item[k]) for k in ("schedule_id", hk, rk)) + 100


@dataclass
class Step:
    name: str
    wru_table: int
    wru_index: int
    detail: str

    @property
    def wru(self) -> int:
        return self.wru_table + self.wru_index


def apply(item: Item, name: str, set_: Item, remove: tuple[str, ...] = ()) -> tuple[Item, Step]:
    """One UpdateItem (or PutItem when ``item`` is empty): the new item and what it costs."""
    new = {k: v for k, v in item.items() if k not in remove}
    new.update(set_)
    table = math.ceil(max(item_size(item), item_size(new)) / KB)
    idx = 0
    notes = []
    for gsi, hk, rk in GSIS:
        before = hk in item and rk in item
        after = hk in new and rk in new
        if before and after and (item[hk], item[rk]) != (new[hk], new[rk]):
            w = 2 * math.ceil(index_entry_size(new, hk, rk) / KB)
            notes.append(f"{gsi} key change (delete+put)")
        elif before != after:
            w = math.ceil(index_entry_size(new if after else item, hk, rk) / KB)
            notes.append(f"{gsi} {'put' if after else 'delete'}")
        else:
            w = 0
        idx += w
    return new, Step(name, table, idx, ", ".join(notes) or "no index write")


def new_item(payload: int, cron: bool) -> Item:
    now = 1_767_225_600_000
    item: Item = {
        "schedule_id": s(str(uuid.uuid4())),
        "status": s("pending"),
        "trigger_kind": s("cron" if cron else "delay"),
        "target": s(f"sqs:{QUEUE_URL}"),
        "event_type": s("scheduled"),
        "payload": ("B", b"x" * payload),
        "scheduled_for": n(now + 60_000),
        "due_shard": s("3"),
        "due_at": n(now + 60_000),
        "attempts": n(0),
        "max_attempts": n(5),
        "created_at": n(now),
    }
    if cron:
        item["cron"] = s("*/5 * * * *")
    return item


LEAVE = ("due_shard", "due_at", "leased_until", "lease_token")


def claim(item: Item, attempt: int, t: int) -> tuple[Item, Step]:
    return apply(
        item,
        "claim (UpdateItem)",
        {"attempts": n(attempt), "leased_until": n(t + 300_000), "due_at": n(t + 300_000), "lease_token": s("f" * 32)},
    )


def mark_failed(item: Item, retry_at: int) -> tuple[Item, Step]:
    return apply(
        item,
        "mark_failed",
        {"last_error": s(ERROR), "leased_until": n(retry_at), "due_at": n(retry_at)},
        ("lease_token",),
    )


def scenario(kind: str, payload: int) -> dict[str, Any]:
    t = 1_767_225_660_123
    item, put = apply({}, "insert (PutItem)", new_item(payload, kind == "recurring"))
    steps: list[Step] = []
    if kind == "retried once":
        item, st = claim(item, 1, t)
        steps.append(st)
        item, st = mark_failed(item, t + 2_000)
        steps.append(st)
        t += 2_000
    if kind == "dead-lettered (5 attempts)":
        for a in range(1, 5):
            item, st = claim(item, a, t)
            steps.append(st)
            item, st = mark_failed(item, t + 9)
            steps.append(st)
        item, st = claim(item, 5, t)
        steps.append(st)
        item, st = apply(
            item,
            "mark_dead_lettered",
            {"status": s("dead_lettered"), "last_error": s(ERROR), "dead_lettered_at": n(t), "dl_pk": s("dead")},
            LEAVE,
        )
        steps.append(st)
    else:
        item, st = claim(item, 2 if kind == "retried once" else 1, t)
        steps.append(st)
        if kind == "recurring":
            item, st = apply(
                item,
                "reschedule",
                {"scheduled_for": n(t + 600_000), "due_at": n(t + 600_000), "attempts": n(0)},
                ("leased_until", "lease_token", "last_error"),
            )
        else:
            item, st = apply(item, "mark_delivered", {"status": s("delivered")}, (*LEAVE, "last_error"))
        steps.append(st)
    claims = sum(1 for st in steps if st.name.startswith("claim"))
    # Backlog mode: each cycle queries every shard once and claims up to BATCH occurrences.
    queries = claims * SHARDS / BATCH
    rru = queries * 0.5
    dispatch_wru = sum(st.wru for st in steps)
    create_wru = put.wru if kind != "recurring" else 0
    dynamo_usd = (dispatch_wru + create_wru) * WRU_USD + rru * RRU_USD
    chunks = max(1, math.ceil((payload + 300) / (64 * KB)))
    sqs_requests = claims * (chunks if payload + 300 > 256 * KB / BATCH else 1 / BATCH)
    return {
        "scenario": kind,
        "payload_bytes": payload,
        "item_bytes": item_size(new_item(payload, kind == "recurring")),
        "create_wru": create_wru,
        "dispatch_wru": dispatch_wru,
        "rru": rru,
        "steps": [
            {"step": st.name, "wru_table": st.wru_table, "wru_index": st.wru_index, "index": st.detail} for st in steps
        ],
        "dynamodb_usd_per_million": round(dynamo_usd * 1e6, 3),
        "vs_eventbridge": round(dynamo_usd / EVENTBRIDGE_USD, 2),
        "sqs_requests_per_occurrence": round(sqs_requests, 3),
        "eventbridge_sqs_requests_per_occurrence": chunks,
    }


def failed_conditional_wru(payload: int) -> int:
    return max(1, math.ceil(item_size(new_item(payload, False)) / KB))


def main() -> None:
    from .common import write_result

    rows = [
        scenario(kind, p)
        for kind in ("one-shot", "recurring", "retried once", "dead-lettered (5 attempts)")
        for p in (100, 4 * KB, 64 * KB)
    ]
    print("DynamoDB cost per occurrence (on-demand: $0.625/M WRU, $0.125/M RRU; EventBridge Scheduler $1.00/M)")
    print(f"{'scenario':<28}{'payload':>8}{'item B':>8}{'create':>8}{'dispatch':>9}{'RRU':>6}{'$/M occ':>9}{'x EB':>7}")
    for r in rows:
        print(
            f"{r['scenario']:<28}{r['payload_bytes']:>8}{r['item_bytes']:>8}{r['create_wru']:>8}{r['dispatch_wru']:>9}"
            f"{r['rru']:>6.2f}{r['dynamodb_usd_per_million']:>9.2f}{r['vs_eventbridge']:>7.2f}"
        )
    small = rows[0]
    print("one-shot, 100 B, step by step:")
    for st in small["steps"]:
        print(f"    {st['step']:<22} table {st['wru_table']} WRU + index {st['wru_index']} WRU ({st['index']})")
    idle_rru_month = SHARDS / POLL_S * 0.5 * 86_400 * 30
    print(
        f"fixed cost of polling (one dispatcher, {SHARDS} shards every {POLL_S * 1000:.0f} ms, "
        "empty Queries at 0.5 RRU): "
        f"{idle_rru_month / 1e6:.1f} M RRU/month = ${idle_rru_month * RRU_USD:.2f}/month"
    )
    print(
        f"a lost claim race (failed conditional write) costs {failed_conditional_wru(100)} WRU at 100 B, "
        f"{failed_conditional_wru(64 * KB)} WRU at 64 KB"
    )
    write_result(
        "cost",
        {
            "prices_usd": {
                "wru": WRU_USD,
                "rru": RRU_USD,
                "eventbridge_invocation": EVENTBRIDGE_USD,
                "sqs_request": SQS_USD,
            },
            "assumptions": {
                "shards": SHARDS,
                "batch_size": BATCH,
                "queries_per_claim": SHARDS / BATCH,
                "poll_interval_s": POLL_S,
                "target": QUEUE_URL,
                "error_text_bytes": len(ERROR),
            },
            "rows": rows,
            "idle_polling_rru_per_month": idle_rru_month,
            "idle_polling_usd_per_month": round(idle_rru_month * RRU_USD, 2),
            "failed_conditional_write_wru": {
                "100": failed_conditional_wru(100),
                "65536": failed_conditional_wru(64 * KB),
            },
        },
    )


if __name__ == "__main__":
    main()
