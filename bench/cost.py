"""Cost per delivered occurrence: DynamoDB capacity units computed from item sizes (no AWS needed).

The items are the ones ``hexeract_scheduler.store.dynamo`` writes (``codec.item_of``: the schedule's
item, and its payload's own item when the payload is stored apart), and every later step mirrors
the store's update expressions (claim, mark_delivered, reschedule, mark_failed,
mark_dead_lettered), with DynamoDB's documented accounting:

* item size = Σ (attribute name bytes + value bytes); a string is its UTF-8 length, binary its
  length, a number 1 byte + 1 per two significant digits;
* a write costs ⌈size / 1 KB⌉ WRU, and an UpdateItem is charged on the larger of the item before
  and after; a failed conditional write is still charged (⌈existing size / 1 KB⌉, at least 1);
* each GSI write costs ⌈entry / 1 KB⌉ WRU, entry = table key + index keys + projected attributes
  + 100 bytes (the due index projects ``leased_until``, the dead-letter index keys only): entering
  the index = 1 put, leaving = 1 delete, changing an index key = delete + put = 2, changing only a
  projected attribute = 1 (the entry is updated in place); a write that changes neither costs the
  index nothing;
* a Query on a GSI is eventually consistent: 0.5 RRU per 4 KB returned, at least 0.5 per Query;
* the claim path reads the payloads stored apart with one eventually consistent BatchGetItem per
  batch, charged per item: 0.5 RRU per 4 KB of each item (a payload item written a moment ago
  and not yet seen is read again, consistently: rare, not counted).

Prices assumed (on-demand, us-east-1, 2025): $0.625 per million WRU, $0.125 per million RRU;
EventBridge Scheduler $1.00 per million invocations (beyond the 14 million free each month);
SQS standard $0.40 per million requests, each 64 KB of a request billed as one request.

tests/functional/test_write_units.py checks these figures against the items a real run writes.

    .venv/bin/python -m bench.cost
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.model import ScheduledMessage
from hexeract_scheduler.store.dynamo import table_definition
from hexeract_scheduler.store.dynamo.codec import NewItems, item_of, item_size

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
TOKEN = "f" * 32
LEASE_MS = 300_000
SIZES = (100, 4 * KB, 64 * KB)
KINDS = ("one-shot", "recurring", "retried once", "dead-lettered (5 attempts)")

Item = dict[str, Any]  # wire form: {"name": {"S": "..."}}


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, str]
    projected: tuple[str, ...]


def indexes(definition: dict[str, Any] | None = None) -> tuple[Index, ...]:
    """The GSIs of ``table_definition``: keys and projected non-key attributes."""
    out = []
    for g in (definition or table_definition())["GlobalSecondaryIndexes"]:
        keys = tuple(k["AttributeName"] for k in g["KeySchema"])
        out.append(Index(g["IndexName"], (keys[0], keys[1]), tuple(g["Projection"].get("NonKeyAttributes", ()))))
    return tuple(out)


def entry(item: Item, index: Index) -> Item | None:
    """The index entry an item has (table key, index keys, projected attributes), if any."""
    if not all(k in item for k in index.keys):
        return None
    names = ("schedule_id", *index.keys, *index.projected)
    return {k: item[k] for k in names if k in item}


def index_wru(before: Item, after: Item, index: Index) -> tuple[int, str]:
    """What one write costs in one index: put, delete, key change, in-place change, or nothing."""

    def units(e: Item) -> int:
        return math.ceil((item_size(e) + 100) / KB)

    old, new = entry(before, index), entry(after, index)
    if old is None and new is None:
        return 0, ""
    if old is None:
        assert new is not None
        return units(new), f"{index.name} put"
    if new is None:
        return units(old), f"{index.name} delete"
    if any(old[k] != new[k] for k in index.keys):
        return units(old) + units(new), f"{index.name} key change (delete+put)"
    if old != new:
        return units(new), f"{index.name} in-place update ({', '.join(index.projected)})"
    return 0, ""


@dataclass
class Step:
    name: str
    wru_table: int
    wru_index: int
    detail: str
    rru: float = 0.0

    @property
    def wru(self) -> int:
        return self.wru_table + self.wru_index


def write(before: Item, after: Item, name: str) -> Step:
    """One PutItem (``before`` empty) or UpdateItem, and what it costs."""
    table = math.ceil(max(item_size(before), item_size(after)) / KB)
    costs = [index_wru(before, after, i) for i in indexes()]
    notes = [d for _, d in costs if d]
    return Step(name, table, sum(w for w, _ in costs), ", ".join(notes) or "no index write")


def update(item: Item, name: str, set_: Item, remove: tuple[str, ...] = ()) -> tuple[Item, Step]:
    new = {k: v for k, v in item.items() if k not in remove} | set_
    return new, write(item, new, name)


def n(v: int) -> dict[str, str]:
    return {"N": str(v)}


def s(v: str) -> dict[str, str]:
    return {"S": v}


def new_items(payload: int, cron: bool) -> NewItems:
    """What ``insert`` writes for a schedule with a payload of this many bytes."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    target, body = f"sqs:{QUEUE_URL}", "x" * payload
    if cron:
        message = ScheduledMessage.cron(target, "*/5 * * * *", payload=body)
    else:
        message = ScheduledMessage.delay(target, at=now + timedelta(minutes=1), payload=body)
    return item_of(message, message.trigger.first_due(now), "3", now)


LEAVE = ("due_shard", "due_at", "leased_until", "lease_token")


def claim(item: Item, t: int, payload_item: Item | None) -> tuple[Item, Step]:
    """CLAIM, plus the claim path's read of a payload stored apart."""
    attempt = int(item["attempts"]["N"]) + 1
    item, st = update(
        item, "claim (UpdateItem)", {"attempts": n(attempt), "leased_until": n(t + LEASE_MS), "lease_token": s(TOKEN)}
    )
    if payload_item is not None:
        st.rru = 0.5 * math.ceil(item_size(payload_item) / (4 * KB))
    return item, st


def mark_failed(item: Item, retry_at: int) -> tuple[Item, Step]:
    set_ = {"last_error": s(ERROR), "leased_until": n(retry_at), "due_at": n(retry_at)}
    return update(item, "mark_failed", set_, ("lease_token",))


def scenario(kind: str, payload: int) -> dict[str, Any]:
    t = 1_767_225_660_123
    new = new_items(payload, kind == "recurring")
    create: list[Step] = []
    if new.payload is not None:
        create.append(write({}, new.payload, "insert: payload item (PutItem)"))
    item = new.schedule
    create.append(write({}, item, "insert (PutItem)"))
    steps: list[Step] = []
    attempts = 5 if kind.startswith("dead-lettered") else 2 if kind == "retried once" else 1
    for a in range(1, attempts + 1):
        item, st = claim(item, t, new.payload)
        steps.append(st)
        if a < attempts:
            item, st = mark_failed(item, t + 2_000)
            steps.append(st)
            t += 2_000
    if kind.startswith("dead-lettered"):
        set_ = {"status": s("dead_lettered"), "last_error": s(ERROR), "dead_lettered_at": n(t), "dl_pk": s("dead")}
        item, st = update(item, "mark_dead_lettered", set_, LEAVE)
    elif kind == "recurring":
        set_ = {"scheduled_for": n(t + 600_000), "due_at": n(t + 600_000), "attempts": n(0)}
        item, st = update(item, "reschedule", set_, ("leased_until", "lease_token", "last_error"))
    else:
        item, st = update(item, "mark_delivered", {"status": s("delivered")}, LEAVE)
    steps.append(st)
    claims = sum(1 for st in steps if st.name.startswith("claim"))
    # Backlog mode: each cycle queries every shard once and claims up to BATCH occurrences.
    queries = claims * SHARDS / BATCH
    rru = queries * 0.5 + sum(st.rru for st in steps)
    dispatch_wru = sum(st.wru for st in steps)
    insert_wru = sum(st.wru for st in create)
    create_wru = insert_wru if kind != "recurring" else 0  # a recurring schedule's insert serves every occurrence
    dynamo_usd = (dispatch_wru + create_wru) * WRU_USD + rru * RRU_USD
    chunks = max(1, math.ceil((payload + 300) / (64 * KB)))
    sqs_requests = claims * (chunks if payload + 300 > 256 * KB / BATCH else 1 / BATCH)
    return {
        "scenario": kind,
        "payload_bytes": payload,
        "item_bytes": item_size(new.schedule),
        "payload_item_bytes": item_size(new.payload) if new.payload is not None else 0,
        "insert_wru": insert_wru,
        "create_wru": create_wru,
        "dispatch_wru": dispatch_wru,
        "rru": rru,
        "steps": [
            {"step": st.name, "wru_table": st.wru_table, "wru_index": st.wru_index, "index": st.detail, "rru": st.rru}
            for st in [*create, *steps]
        ],
        "dynamodb_usd_per_million": round(dynamo_usd * 1e6, 3),
        "vs_eventbridge": round(dynamo_usd / EVENTBRIDGE_USD, 2),
        "sqs_requests_per_occurrence": round(sqs_requests, 3),
        "eventbridge_sqs_requests_per_occurrence": chunks,
    }


def failed_conditional_wru(payload: int) -> int:
    return max(1, math.ceil(item_size(new_items(payload, False).schedule) / KB))


def main() -> None:
    from .common import write_result

    rows = [scenario(kind, p) for kind in KINDS for p in SIZES]
    print("DynamoDB cost per occurrence (on-demand: $0.625/M WRU, $0.125/M RRU; EventBridge Scheduler $1.00/M)")
    print(
        f"{'scenario':<28}{'payload':>8}{'item B':>8}{'apart B':>8}{'insert':>8}{'create':>8}{'dispatch':>9}"
        f"{'RRU':>6}{'$/M occ':>9}{'x EB':>7}"
    )
    for r in rows:
        print(
            f"{r['scenario']:<28}{r['payload_bytes']:>8}{r['item_bytes']:>8}{r['payload_item_bytes']:>8}"
            f"{r['insert_wru']:>8}{r['create_wru']:>8}{r['dispatch_wru']:>9}{r['rru']:>6.2f}"
            f"{r['dynamodb_usd_per_million']:>9.2f}{r['vs_eventbridge']:>7.2f}"
        )
    print("(create: the insert's WRU charged to each occurrence; a recurring schedule's insert serves them all)")
    for r in (rows[0], rows[2]):
        print(f"{r['scenario']}, {r['payload_bytes']} B, step by step:")
        for st in r["steps"]:
            read = f", read {st['rru']} RRU" if st["rru"] else ""
            units = f"table {st['wru_table']} WRU + index {st['wru_index']} WRU"
            print(f"    {st['step']:<32} {units} ({st['index']}{read})")
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
