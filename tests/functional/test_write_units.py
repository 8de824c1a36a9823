"""bench/cost.py's write units against a real run, on both DynamoDB backends.

Every DynamoDB write of a lifecycle (insert, then a worker's cycles) is recorded below the client,
with the item read consistently just before and just after it. Each write is then charged by
DynamoDB's documented rules, from the real items and the indexes ``table_definition`` declares:
⌈larger of the item before and after / 1 KB⌉ for the table; for each index, an entry entering
(put) or leaving (delete) ⌈entry / 1 KB⌉, a key change both, a change of a projected attribute
only one (in place), anything else nothing. The totals must equal bench/cost.py's figures for the
same scenario, and the dispatch path must cost the same whatever the payload's size.

(Emulators report no index write units — moto reports none, dynalite the table's only — so the
charge is computed, not read from ``ConsumedCapacity``.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient

from bench import cost
from hexeract_scheduler import ScheduledMessage, ScheduleStatus
from hexeract_scheduler.store.dynamo import table_definition
from hexeract_scheduler.store.dynamo.codec import item_size

from ..conftest import Queue, make_worker

S = timedelta(seconds=1)
KB = 1024
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
UNSUPPORTED = ("BatchWriteItem", "TransactWriteItems")  # not charged here: the store must not send them


@dataclass
class Write:
    phase: str
    operation: str
    before: dict[str, Any]
    after: dict[str, Any]
    failed: bool

    def wru(self) -> tuple[int, int]:
        """(table, indexes) write units, by DynamoDB's rules."""
        if self.failed:  # a refused conditional write is charged on the item as it stands
            return max(1, math.ceil(item_size(self.before) / KB)), 0
        table = max(1, math.ceil(max(item_size(self.before), item_size(self.after)) / KB))
        return table, sum(_index_wru(self.before, self.after, g) for g in table_definition()["GlobalSecondaryIndexes"])


def _index_wru(before: dict[str, Any], after: dict[str, Any], gsi: dict[str, Any]) -> int:
    keys = [k["AttributeName"] for k in gsi["KeySchema"]]
    projected = gsi["Projection"].get("NonKeyAttributes", [])

    def entry(item: dict[str, Any]) -> dict[str, Any] | None:
        if not all(k in item for k in keys):
            return None
        return {k: item[k] for k in ["schedule_id", *keys, *projected] if k in item}

    def units(e: dict[str, Any]) -> int:
        return math.ceil((item_size(e) + 100) / KB)

    old, new = entry(before), entry(after)
    if old is None or new is None:
        return units(old or new) if (old or new) else 0
    if any(old[k] != new[k] for k in keys):
        return units(old) + units(new)
    return units(new) if old != new else 0


@dataclass
class Ledger:
    phase: str = "setup"
    writes: list[Write] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    def total(self, phase: str) -> int:
        return sum(sum(w.wru()) for w in self.writes if w.phase == phase)


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """Every DynamoDB write made while the test runs, with its item before and after."""
    book = Ledger()
    real = BaseClient._make_api_call

    def read(client: BaseClient, params: dict[str, Any]) -> dict[str, Any]:
        key = params.get("Key") or {"schedule_id": params["Item"]["schedule_id"]}
        got = real(client, "GetItem", {"TableName": params["TableName"], "Key": key, "ConsistentRead": True})
        return dict(got.get("Item", {}))

    def recording(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name != "dynamodb" or operation_name not in WRITES:
            if operation_name in UNSUPPORTED:
                book.unsupported.append(operation_name)
            return real(self, operation_name, api_params)
        before = read(self, api_params)
        try:
            result = real(self, operation_name, api_params)
        except Exception:
            book.writes.append(Write(book.phase, operation_name, before, before, failed=True))
            raise
        book.writes.append(Write(book.phase, operation_name, before, read(self, api_params), failed=False))
        return result

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    yield book


def run(kind: str, payload: int, ledger: Ledger, store, clients, clock, queue: Queue, endpoint) -> None:
    """The scenario bench/cost.py prices, run for real, its writes filed in ``ledger`` by phase."""
    body = "x" * payload
    missing = f"sqs:{endpoint.url}/123456789012/missing-queue"
    if kind == "recurring":
        message = ScheduledMessage.cron(queue.target, "*/5 * * * *", payload=body)
    elif kind.startswith("dead-lettered"):
        message = ScheduledMessage.delay(missing, at=clock.now(), payload=body, max_attempts=5)
    else:
        message = ScheduledMessage.delay(queue.target, at=clock.now(), payload=body)
    ledger.phase = "insert"
    store.insert(message, clock.now())
    if kind == "recurring":
        clock.advance(300)
    worker = make_worker(store, clients, clock, retry_base_delay=S, retry_max_delay=60 * S)
    ledger.phase = "dispatch"
    attempts = 5 if kind.startswith("dead-lettered") else 1
    for _ in range(attempts):
        summary = worker.run_once()
        assert summary.claimed == 1, summary
        clock.advance(120)  # past any retry delay
    ledger.phase = "after"
    snap = store.inspect(message.schedule_id)
    want = {
        "one-shot": ScheduleStatus.DELIVERED,
        "recurring": ScheduleStatus.PENDING,
        "dead-lettered (5 attempts)": ScheduleStatus.DEAD_LETTERED,
    }[kind]
    assert snap.status is want


CASES = [
    ("one-shot", 100),
    ("one-shot", 4 * KB),
    ("one-shot", 64 * KB),
    ("recurring", 100),
    ("recurring", 64 * KB),
    ("dead-lettered (5 attempts)", 100),
    ("dead-lettered (5 attempts)", 64 * KB),
]


@pytest.mark.parametrize(("kind", "payload"), CASES, ids=[f"{k.split()[0]}-{p}B" for k, p in CASES])
def test_a_real_lifecycle_writes_what_bench_cost_computes(
    ledger: Ledger, store, clients, clock, queue, endpoint, kind: str, payload: int
):
    run(kind, payload, ledger, store, clients, clock, queue, endpoint)
    figures = cost.scenario(kind, payload)

    assert ledger.unsupported == []
    assert [w for w in ledger.writes if w.failed] == []  # one worker, no race: no refused write
    assert ledger.total("insert") == figures["insert_wru"], [w.wru() for w in ledger.writes if w.phase == "insert"]
    assert ledger.total("dispatch") == figures["dispatch_wru"], [
        (w.operation, w.wru()) for w in ledger.writes if w.phase == "dispatch"
    ]


def test_the_goal_of_issue_11_holds_and_the_dispatch_path_is_flat():
    """Per occurrence: a one-shot of 100 B costs at most 6 write units in all (insert included), a
    recurring occurrence at most 5, and the dispatch path the same from 100 B to 64 KB."""
    one_shot = cost.scenario("one-shot", 100)
    assert one_shot["create_wru"] + one_shot["dispatch_wru"] <= 6
    assert cost.scenario("recurring", 100)["dispatch_wru"] <= 5
    for kind in cost.KINDS:
        assert len({cost.scenario(kind, p)["dispatch_wru"] for p in cost.SIZES}) == 1, kind


def test_dispatch_write_units_are_the_same_for_100_bytes_and_64_kb_in_a_real_run(
    ledger: Ledger, store, clients, clock, queue, endpoint
):
    totals = []
    for payload in (100, 64 * KB):
        ledger.writes.clear()
        run("one-shot", payload, ledger, store, clients, clock, queue, endpoint)
        totals.append(ledger.total("dispatch"))
    assert totals[0] == totals[1] == cost.scenario("one-shot", 100)["dispatch_wru"]
    assert item_size(ledger.writes[-1].after) <= KB  # the last ack wrote a small item
