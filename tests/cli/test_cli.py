"""The ``hexeract`` command line (docs/contracts.md#command-line), driven in-process against the session moto server."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timedelta

import pytest

from hexeract_scheduler.cli import commands
from hexeract_scheduler.cli.parse import parse_when
from hexeract_scheduler.domain.clock import UTC, SystemClock
from hexeract_scheduler.domain.model import LeasedOccurrence, ScheduledMessage
from hexeract_scheduler.domain.occurrence import OccurrenceId
from hexeract_scheduler.errors import InvalidInput
from hexeract_scheduler.store.dynamo import DynamoScheduleStore

from ..conftest import T0, Queue, dead_port, unique
from ..support.limits import memory_headroom
from .conftest import Hexeract

JSON_KEYS = [
    "schedule_id",
    "status",
    "scheduled_for",
    "attempts",
    "max_attempts",
    "trigger",
    "target",
    "event_type",
    "last_error",
    "leased_until",
    "dead_lettered_at",
]
UNKNOWN = "01900000-0000-7000-8000-000000000000"
# A command-line argument that is not UTF-8 reaches Python as surrogate escapes (PEP 383).
NOT_UTF8_ARG = b'{"a": "\xff"}'.decode("utf-8", "surrogateescape")


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def fails(result, code: int = 1) -> str:
    """Exit ``code`` with nothing on stdout; for 1, exactly one ``error:`` line on stderr."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    if code == 1:
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return result.stderr


def add(hexeract: Hexeract, *args: str) -> str:
    out = ok(hexeract("scheduler", "add", *args))
    return str(uuid.UUID(out.strip()))  # prints only the id


def inspect_json(hexeract: Hexeract, sid: str) -> dict:
    items = json.loads(ok(hexeract("scheduler", "inspect", sid, "--format", "json")))
    assert isinstance(items, list) and len(items) == 1
    return items[0]


def dead_letter(hexeract: Hexeract, store: DynamoScheduleStore, queue: Queue) -> str:
    """A schedule whose queue does not exist, dead-lettered by one worker cycle."""
    missing = queue.url.rsplit("/", 1)[0] + "/" + unique("missing")
    sid = add(hexeract, "--at", "now", "--target", f"sqs:{missing}", "--max-attempts", "1")
    summary = json.loads(ok(hexeract("scheduler", "worker", "--once")))
    assert summary["dead_lettered"] == 1, summary
    return sid


# -- table create ------------------------------------------------------------------------------


def test_table_create_is_idempotent_and_reports_shards(hexeract):
    name = unique("cli-table")
    assert ok(hexeract("scheduler", "table", "create", "--shards", "2", table=name)).strip() == (
        f"created table {name} with 2 shards"
    )
    out = ok(hexeract("scheduler", "table", "create", "--shards", "8", table=name))
    assert out.startswith(f"table {name} exists with 2 shards")
    fails(hexeract("scheduler", "table", "create", "--shards", "0", table=name), code=2)


# -- add / list / inspect ------------------------------------------------------------------------


def test_add_list_inspect_json_and_text(hexeract, queue):
    later = add(hexeract, "--at", "+1h", "--target", queue.target, "--event-type", "reminder", "--payload", '{"a": 1}')
    cron = add(
        hexeract, "--cron", "0 9 * * *", "--timezone", "Europe/Paris", "--target", queue.target, "--max-attempts", "3"
    )
    soon = add(hexeract, "--at", "+5m", "--target", queue.target)

    items = json.loads(ok(hexeract("scheduler", "list", "--format", "json")))
    ids = [i["schedule_id"] for i in items]
    # Soonest first (the cron's 09:00 Paris may come before or after +5m, by the wall clock).
    assert ids.index(soon) < ids.index(later)
    assert [i["scheduled_for"] for i in items] == sorted(i["scheduled_for"] for i in items)
    assert {i["schedule_id"] for i in items} == {soon, later, cron}
    for item in items:
        assert list(item) == JSON_KEYS
        assert item["status"] == "pending" and item["attempts"] == 0 and item["last_error"] is None
        assert item["target"] == queue.target and item["leased_until"] is None and item["dead_lettered_at"] is None
        assert item["scheduled_for"].endswith("Z")
    by_id = {i["schedule_id"]: i for i in items}
    assert by_id[later]["trigger"] == "delay"
    assert by_id[cron]["trigger"] == "cron:0 9 * * * tz=Europe/Paris"
    assert by_id[cron]["max_attempts"] == 3

    assert len(json.loads(ok(hexeract("scheduler", "list", "--format", "json", "--limit", "1")))) == 1

    text = ok(hexeract("scheduler", "list"))
    lines = text.splitlines()
    header = lines[0]
    for column in ("SCHEDULE ID", "STATUS", "SCHEDULED FOR", "ATTEMPTS", "TRIGGER", "LAST ERROR"):
        assert column in header
    assert len(lines) == 4
    assert [line.split()[0] for line in lines[1:]] == ids  # the text lists in the JSON's order
    assert "0/5" in lines[1 + ids.index(soon)]
    assert "cron:0 9 * * * tz=Europe/Paris" in text and "0/3" in text
    # aligned: every row has its status where the header's STATUS column starts
    col = header.index("STATUS")
    assert all(line[col:].startswith("pending") for line in lines[1:])

    info = ok(hexeract("scheduler", "inspect", later))
    assert f"schedule id:   {later}" in info
    assert f"target:        {queue.target}" in info
    assert "event type:    reminder" in info
    assert "attempts:      0/5" in info
    assert "status:        pending" in info
    assert '"a"' not in info  # never the payload

    one = inspect_json(hexeract, later)
    assert list(one) == JSON_KEYS and one["schedule_id"] == later
    assert (one["target"], one["event_type"]) == (queue.target, "reminder")


def text_keys(details: str) -> dict[str, str]:
    """``inspect``'s ``key: value`` lines, keyed as the JSON names the same fields (``attempts:
    n/max`` is two of them)."""
    out: dict[str, str] = {}
    for line in details.splitlines():
        label, value = line.split(":", 1)
        key = label.strip().replace(" ", "_").replace("-", "_")
        if key == "attempts":
            out["attempts"], out["max_attempts"] = value.strip().split("/")
        else:
            out[key] = value.strip()
    return out


def test_inspect_json_carries_every_field_the_text_shows(hexeract, store, queue):
    """Pending, leased (claimed, not acked) and dead-lettered: the JSON object has every field the
    text shows, and the only fields the text leaves out are those the schedule has no value for."""
    pending = add(hexeract, "--at", "+1h", "--target", queue.target, "--event-type", "reminder")
    leased = add(hexeract, "--at", "now", "--target", queue.target)
    now = SystemClock().now()
    claimed = store.claim(uuid.UUID(leased), now + timedelta(seconds=1), timedelta(minutes=5))
    assert isinstance(claimed, LeasedOccurrence), claimed
    dead = dead_letter(hexeract, store, queue)
    for sid in (pending, leased, dead):
        text = text_keys(ok(hexeract("scheduler", "inspect", sid)))
        data = inspect_json(hexeract, sid)
        assert set(text) <= set(data), set(text) - set(data)
        assert {k for k in set(data) - set(text) if data[k] is not None} == set(), sid
        assert text["target"] == data["target"] and text["event_type"] == data["event_type"]
    assert "leased_until" in text_keys(ok(hexeract("scheduler", "inspect", leased)))
    assert "dead_lettered_at" in text_keys(ok(hexeract("scheduler", "inspect", dead)))
    assert inspect_json(hexeract, pending)["event_type"] == "reminder"


def test_listing_limits_and_empty_listings(hexeract):
    assert ok(hexeract("scheduler", "list")).strip() == "no pending or paused schedules"
    assert ok(hexeract("scheduler", "dead-letter", "list")).strip() == "no dead-lettered schedules"
    assert json.loads(ok(hexeract("scheduler", "list", "--format", "json"))) == []
    assert json.loads(ok(hexeract("scheduler", "dead-letter", "list", "--format", "json"))) == []
    fails(hexeract("scheduler", "list", "--limit", "0"), code=2)
    fails(hexeract("scheduler", "dead-letter", "list", "--limit", "-3"), code=2)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00.000Z"),
        ("2030-01-01T00:00:00.250Z", "2030-01-01T00:00:00.250Z"),
        ("2030-01-01T09:30:00+02:00", "2030-01-01T07:30:00.000Z"),
        ("2030-06-01 12:00:00-05:00", "2030-06-01T17:00:00.000Z"),
    ],
)
def test_add_accepts_absolute_instants(hexeract, queue, when, expected):
    sid = add(hexeract, "--at", when, "--target", queue.target)
    assert inspect_json(hexeract, sid)["scheduled_for"] == expected


@pytest.mark.parametrize(
    ("when", "delta"),
    [("now", 0), ("NOW", 0), ("+30s", 30), ("+1h30m", 5400), ("+500ms", 0.5), ("+2d", 172800), ("+1m 5s", 65)],
)
def test_parse_when_relative(when, delta):
    now = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    assert parse_when(when, now) == now + timedelta(seconds=delta)


@pytest.mark.parametrize("when", ["+30", "+5y", "-5m", "30s", "2030-01-01", "2030-01-01T00:00:00", ""])
def test_parse_when_rejects(when):
    with pytest.raises(InvalidInput):
        parse_when(when, datetime(2026, 12, 2, tzinfo=UTC))


def test_add_payload_from_file_is_delivered_byte_for_byte(hexeract, queue, tmp_path):
    body = '{"remind":  "dentist",\n "at": [1, 2]}'
    path = tmp_path / "payload.json"
    path.write_text(body)
    sid = add(hexeract, "--at", "now", "--target", queue.target, "--payload", f"@{path}", "--event-type", "reminder")
    summary = json.loads(ok(hexeract("scheduler", "worker", "--once")))
    assert summary["dispatched"] == 1, summary
    (msg,) = queue.receive_all()
    assert msg["Body"] == body
    attrs = {k: v["StringValue"] for k, v in msg["MessageAttributes"].items()}
    assert attrs["schedule_id"] == sid and attrs["event_type"] == "reminder" and attrs["attempt"] == "1"
    assert inspect_json(hexeract, sid)["status"] == "delivered"
    assert ok(hexeract("scheduler", "list")).strip() == "no pending or paused schedules"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "not a cron"], "invalid cron"),
        (["--cron", "61 * * * *"], "invalid cron"),
        (["--cron", "0 9 * * *", "--timezone", "Mars/Olympus_Mons"], "unknown time zone"),
        (["--at", "now", "--target", "sqs:not-a-queue"], "invalid target"),
        (["--at", "now", "--target", "kafka:topic"], "invalid target"),
        (["--at", "now", "--payload", "{nope"], "not valid JSON"),
        (["--at", "now", "--payload", "@/nonexistent/payload.json"], "cannot read payload file"),
        (["--at", "2030-01-01T00:00:00"], "no UTC offset"),
        (["--at", "tomorrow"], "invalid --at"),
        (["--at", "now", "--max-attempts", "0"], "max_attempts"),
        (["--at", "now", "--event-type", ""], "event type"),
        # JSON has no NaN or infinities, though Python's json module reads them.
        (["--at", "now", "--payload", "NaN"], "--payload is not valid JSON: NaN is not a JSON value"),
        (["--at", "now", "--payload", "Infinity"], "--payload is not valid JSON: Infinity is not a JSON value"),
        (["--at", "now", "--payload", '{"a": [1, -Infinity]}'], "not valid JSON: -Infinity is not a JSON value"),
        (["--at", "now", "--payload", NOT_UTF8_ARG], "--payload is not UTF-8 text: byte 0xff at position 7"),
        # Past datetime's range: timedelta overflows, then the sum, then the conversion to UTC.
        (["--at", "+99999999999d"], "invalid --at '+99999999999d': too far in the future"),
        (["--at", "+3000000d"], "invalid --at '+3000000d': too far in the future"),
        (["--at", "+" + "9" * 5000 + "s"], "too far in the future"),
        (["--at", "0001-01-01T00:00:00+14:00"], "invalid --at '0001-01-01T00:00:00+14:00': not an instant between"),
        (["--at", "9999-12-31T23:00:00-14:00"], "invalid --at '9999-12-31T23:00:00-14:00': not an instant between"),
    ],
)
def test_add_rejects_invalid_values_with_exit_1(hexeract, queue, args, message):
    if "--target" not in args:
        args = [*args, "--target", queue.target]
    err = fails(hexeract("scheduler", "add", *args))
    assert message in err
    assert "unexpected" not in err
    assert ok(hexeract("scheduler", "list")).strip() == "no pending or paused schedules"  # nothing written


def test_add_refuses_a_payload_file_that_is_not_utf8(hexeract, queue, tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes('{"name": "Zoë"}'.encode("latin-1"))
    err = fails(hexeract("scheduler", "add", "--at", "now", "--target", queue.target, "--payload", f"@{path}"))
    assert err == "error: --payload is not UTF-8 text: byte 0xeb at position 12 (SQS and SNS message bodies are text)\n"
    assert ok(hexeract("scheduler", "list")).strip() == "no pending or paused schedules"  # nothing written
    # A UTF-8 byte order mark is still read past, as before; the bytes are kept as given.
    path.write_bytes(b'\xef\xbb\xbf{"name": "Zo\xc3\xab"}')
    add(hexeract, "--at", "+1h", "--target", queue.target, "--payload", f"@{path}")


@pytest.mark.parametrize(
    "args",
    [
        ["--at", "now", "--cron", "* * * * *"],  # both
        [],  # neither
        ["--at", "now", "--timezone", "Europe/Paris"],  # zone without cron
        ["--at", "now", "--max-attempts", "many"],
    ],
)
def test_add_usage_errors_exit_2(hexeract, queue, args):
    err = fails(hexeract("scheduler", "add", *args, "--target", queue.target), code=2)
    assert "Usage:" in err
    fails(hexeract("scheduler", "add", "--at", "now"), code=2)  # --target is required


# -- lifecycle ----------------------------------------------------------------------------------


def test_pause_resume_cancel(hexeract, queue):
    sid = add(hexeract, "--at", "+1h", "--target", queue.target)
    assert ok(hexeract("scheduler", "pause", sid)).strip() == f"paused {sid}"
    assert inspect_json(hexeract, sid)["status"] == "paused"
    assert ok(hexeract("scheduler", "pause", sid)).strip() == f"{sid} is paused: nothing to pause"
    assert [i["status"] for i in json.loads(ok(hexeract("scheduler", "list", "--format", "json")))] == ["paused"]
    assert ok(hexeract("scheduler", "resume", sid)).startswith(f"resumed {sid}: next due at ")
    assert ok(hexeract("scheduler", "resume", sid)).strip() == f"{sid} is pending: nothing to resume"
    assert ok(hexeract("scheduler", "cancel", sid)).strip() == f"cancelled {sid}"
    assert ok(hexeract("scheduler", "cancel", sid)).strip() == f"{sid} is cancelled: nothing to cancel"
    assert inspect_json(hexeract, sid)["status"] == "cancelled"
    fails(hexeract("scheduler", "dead-letter", "replay", sid))


def test_resume_of_cron_realigns(hexeract, store, queue):
    now = SystemClock().now()
    msg = ScheduledMessage.cron(queue.target, "*/1 * * * * *")
    store.insert(msg, now - timedelta(seconds=30))  # its first instant is long past
    sid = str(msg.schedule_id)
    ok(hexeract("scheduler", "pause", sid))
    out = ok(hexeract("scheduler", "resume", sid))
    due = inspect_json(hexeract, sid)["scheduled_for"]
    assert due in out
    assert datetime.fromisoformat(due) > now


@pytest.mark.parametrize(
    "command",
    [
        ["pause"],
        ["resume"],
        ["cancel"],
        ["inspect"],
        ["inspect", "--format", "json"],
        ["dead-letter", "replay"],
    ],
)
def test_unknown_and_malformed_ids_exit_1(hexeract, command):
    head, *rest = command
    cmd = [head] if head != "dead-letter" else ["dead-letter", "replay"]
    rest = [] if head == "dead-letter" else rest
    err = fails(hexeract("scheduler", *cmd, UNKNOWN, *rest))
    assert err.strip() == f"error: schedule {UNKNOWN} not found"
    err = fails(hexeract("scheduler", *cmd, "not-a-uuid", *rest))
    assert "malformed schedule id 'not-a-uuid'" in err


# -- worker and dead letters ---------------------------------------------------------------------


def test_dead_letter_list_and_replay(hexeract, store, queue):
    sid = dead_letter(hexeract, store, queue)

    items = json.loads(ok(hexeract("scheduler", "dead-letter", "list", "--format", "json")))
    assert [i["schedule_id"] for i in items] == [sid]
    (item,) = items
    assert list(item) == JSON_KEYS
    assert item["status"] == "dead-lettered"
    assert item["attempts"] == 1 and item["max_attempts"] == 1
    assert "does not exist" in item["last_error"]
    assert item["dead_lettered_at"].endswith("Z")

    text = ok(hexeract("scheduler", "dead-letter", "list"))
    header, row = text.splitlines()
    assert "DEAD-LETTERED AT" in header and "LAST ERROR" in header
    assert row.startswith(sid) and "dead-lettered" in row and "1/1" in row
    last_error = row[header.index("LAST ERROR") :]
    assert len(last_error) == 40 and last_error.endswith("…")

    info = ok(hexeract("scheduler", "inspect", sid))
    assert "dead-lettered at:" in info and "last error:" in info

    assert ok(hexeract("scheduler", "dead-letter", "replay", sid)).strip() == f"replayed {sid}: due now"
    replayed = inspect_json(hexeract, sid)
    assert replayed["status"] == "pending" and replayed["attempts"] == 0 and replayed["last_error"] is None
    assert json.loads(ok(hexeract("scheduler", "dead-letter", "list", "--format", "json"))) == []

    # Replay of a schedule that is not dead-lettered: exit 1, nothing changed.
    err = fails(hexeract("scheduler", "dead-letter", "replay", sid))
    assert "is pending, not dead-lettered" in err
    assert inspect_json(hexeract, sid) == replayed


def test_worker_once_and_for(hexeract, queue):
    add(hexeract, "--at", "now", "--target", queue.target)
    first = json.loads(ok(hexeract("scheduler", "worker", "--once")))
    assert set(first) >= {"claimed", "dispatched", "retried", "dead_lettered", "swept"}
    assert first["dispatched"] == 1
    add(hexeract, "--at", "+300ms", "--target", queue.target)
    started = time.monotonic()
    out = ok(hexeract("scheduler", "worker", "--for", "0.8"))
    assert 0.7 < time.monotonic() - started < 5
    assert len(out.splitlines()) == 1
    assert json.loads(out)["dispatched"] == 1
    assert len(queue.receive_all()) == 2
    fails(hexeract("scheduler", "worker", "--once", "--for", "1"), code=2)
    fails(hexeract("scheduler", "worker", "--for", "0"), code=2)
    err = fails(hexeract("scheduler", "worker", "--once", "--shards", "9"))
    assert "shards [9] do not exist" in err


def test_worker_verbose_log_lines_carry_the_schedule_and_occurrence_ids(hexeract, queue):
    """`worker -v`: every claim, send, failure, dead letter and reschedule is one stderr line naming
    the schedule and the occurrence (the id consumers dedupe on) it is about."""
    missing = "sqs:" + queue.url.rsplit("/", 1)[0] + "/" + unique("missing")
    sids = {
        "sent": add(hexeract, "--at", "now", "--target", queue.target),
        "cron": add(hexeract, "--cron", "* * * * * *", "--target", queue.target),
        "retried": add(hexeract, "--at", "now", "--target", missing, "--max-attempts", "2"),
        "dead": add(hexeract, "--at", "now", "--target", missing, "--max-attempts", "1"),
    }
    due = {name: parse_when(inspect_json(hexeract, sid)["scheduled_for"], T0) for name, sid in sids.items()}
    occurrences = {name: OccurrenceId.derive(uuid.UUID(sids[name]), at) for name, at in due.items()}
    time.sleep(max((max(due.values()) - SystemClock().now()).total_seconds(), 0) + 0.05)  # the cron's second

    result = hexeract("scheduler", "worker", "--once", "-v")
    assert json.loads(ok(result))["claimed"] == 4
    expected = {
        "sent": ["claimed: attempt 1 of 5", "sent"],
        "cron": ["claimed: attempt 1 of 5", "sent", "rescheduled: next occurrence at "],
        "retried": ["claimed: attempt 1 of 2", "attempt 1 failed, retry in "],
        "dead": ["claimed: attempt 1 of 1", "dead-lettered after 1 attempt: "],
    }
    lines = result.stderr.splitlines()
    for name, events in expected.items():
        ids = f"schedule_id={sids[name]} occurrence_id={occurrences[name]} attempt=1"
        about = [line for line in lines if f"schedule_id={sids[name]} " in line]
        assert all(line.endswith(ids) for line in about), about
        for event in events:
            assert any(f" {event}" in line for line in about), (name, event, about)
    assert "DEBUG claimed" in result.stderr and "WARNING dead-lettered" in result.stderr

    quiet = hexeract("scheduler", "worker", "--once")  # without -v: no per-occurrence lines
    assert "claimed" not in quiet.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--for", "nan"], "Invalid value for '--for': expected a number of seconds > 0 and <= 31622400, got nan"),
        (["--for", "inf"], "Invalid value for '--for': expected a number of seconds > 0 and <= 31622400, got inf"),
        (["--for", "-inf"], "got -inf"),
        (["--for", "-1"], "got -1.0"),
        (["--for", "0"], "got 0.0"),
        (["--for", "1e300"], "got 1e+300"),
        (["--for", "31622401"], "got 31622401.0"),
        (
            ["--shards", "0-3000000000"],
            "Invalid value for '--shards': invalid shard range '0-3000000000': shard 3000000000 is out of range "
            "(shard numbers are 0 to 255)",
        ),
        (["--shards", "0,256"], "invalid shard range '0,256': shard 256 is out of range (shard numbers are 0 to 255)"),
        (["--shards", "3-1"], "Invalid value for '--shards': invalid shard range '3-1': 3-1 ends before it starts"),
        (["--shards", "x"], "Invalid value for '--shards': invalid shard range 'x': expected all, N-M or N,M,..."),
    ],
)
def test_worker_refuses_a_bad_duration_or_shard_range_as_a_usage_error(hexeract, monkeypatch, args, message):
    def must_not_start(*args, **kwargs):
        raise AssertionError("the worker started")  # --for nan stopped at once, --for inf never

    monkeypatch.setattr(commands, "build_dispatcher", must_not_start)
    with memory_headroom():  # --shards 0-3000000000 built three billion shard numbers first
        err = fails(hexeract("scheduler", "worker", *args, table="hexeract-never-created"), code=2)
    assert message in " ".join(err.split())
    assert "unexpected" not in err


# -- usage errors and failures -------------------------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["inspect", UNKNOWN], ["dead-letter", "list"]])
def test_bad_format_exits_2(hexeract, command):
    err = fails(hexeract("scheduler", *command, "--format", "yaml"), code=2)
    assert "'yaml' is not one of 'text', 'json'" in err


def test_replay_rejects_format(hexeract):
    err = fails(hexeract("scheduler", "dead-letter", "replay", UNKNOWN, "--format", "json"), code=2)
    assert "No such option: --format" in err or "No such option '--format'" in err


@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["list"], "listing schedules in table hexeract-schedules"),
        (["inspect", UNKNOWN], f"inspecting schedule {UNKNOWN} in table hexeract-schedules"),
        (["pause", UNKNOWN], f"pausing schedule {UNKNOWN} in table hexeract-schedules"),
        (["add", "--at", "now", "--target", "sqs:arn:aws:sqs:us-east-1:123456789012:q"], "adding schedule "),
        (["dead-letter", "list"], "listing dead-lettered schedules in table hexeract-schedules"),
        (["dead-letter", "replay", UNKNOWN], f"replaying schedule {UNKNOWN} in table hexeract-schedules"),
        (["worker", "--once"], "opening table hexeract-schedules"),
        (["table", "create"], "creating table hexeract-schedules"),
    ],
)
def test_unreachable_endpoint_fails_fast_naming_the_command_and_the_endpoint(hexeract, command, what):
    """Nothing listens at the port: one line that names what was asked and where, exit 1."""
    url = f"http://127.0.0.1:{dead_port()}"
    started = time.monotonic()
    err = fails(hexeract("scheduler", *command, conn=url, table=None))
    assert err.startswith(f"error: {what}"), err
    assert f"cannot reach the endpoint {url}" in err and "shard count" not in err
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("command", [["list"], ["inspect", UNKNOWN], ["dead-letter", "replay", UNKNOWN], ["worker"]])
def test_missing_table_on_a_local_endpoint_advises_table_create(hexeract, backend, command):
    name = unique("absent")
    err = fails(hexeract("scheduler", *command, table=name))
    assert err.strip() == (
        f"error: table {name} does not exist at {backend.aws_url}: create it with `hexeract scheduler table create`, "
        "or name another with --table NAME"
    )


@pytest.mark.parametrize("args", [["list"], ["worker", "--once"], ["table", "create"]])
def test_ctrl_c_exits_130_with_one_line_and_no_traceback(monkeypatch, args):
    """In-process: KeyboardInterrupt wherever a command is (here: while it builds its AWS clients)."""
    from click.testing import CliRunner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "clients_for", interrupted)
    result = CliRunner().invoke(commands.main, ["scheduler", *args, "--conn", "http://127.0.0.1:1"])
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", "interrupted\n")


@pytest.mark.parametrize(
    ("conn", "message"),
    [
        ("ftp://example.com", "invalid connection 'ftp://example.com': expected an endpoint URL"),
        ("aws://", "invalid connection 'aws://': expected aws://REGION"),
        ("http://[::1", "invalid connection 'http://[::1': Invalid IPv6 URL"),
        ("http://127.0.0.1:99999", "invalid connection 'http://127.0.0.1:99999': Port out of range 0-65535"),
        ("http://127.0.0.1:port", "invalid connection 'http://127.0.0.1:port': Port could not be cast"),
    ],
)
def test_invalid_conn(hexeract, conn, message):
    err = fails(hexeract("scheduler", "list", conn=conn))
    assert message in err
    assert "unexpected" not in err


def test_conn_and_table_from_environment(hexeract, endpoint, store, queue):
    sid = add(hexeract, "--at", "+1h", "--target", queue.target)
    env = {"HEXERACT_CONN": endpoint.url, "HEXERACT_TABLE": store.table_name}
    out = ok(hexeract("scheduler", "list", "--format", "json", conn=None, table=None, env=env))
    assert [i["schedule_id"] for i in json.loads(out)] == [sid]


def test_every_command_has_help_and_the_shared_options():
    from click.testing import CliRunner

    from hexeract_scheduler.cli.commands import main

    leaves = [
        ["table", "create"],
        ["add"],
        ["list"],
        ["inspect"],
        ["pause"],
        ["resume"],
        ["cancel"],
        ["worker"],
        ["dead-letter", "list"],
        ["dead-letter", "replay"],
    ]
    for leaf in leaves:
        result = CliRunner().invoke(main, ["scheduler", *leaf, "--help"])
        assert result.exit_code == 0, leaf
        assert "--conn" in result.stdout and "--table" in result.stdout and "HEXERACT_CONN" in result.stdout, leaf
        assert "--stack" in result.stdout and "HEXERACT_STACK" in result.stdout, leaf
        has_format = leaf in (["list"], ["inspect"], ["dead-letter", "list"])
        assert ("--format" in result.stdout) == has_format, leaf
        assert ("--limit" in result.stdout) == (leaf in (["list"], ["dead-letter", "list"])), leaf
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0
    assert CliRunner().invoke(main, ["scheduler", "frobnicate"]).exit_code == 2


def test_listings_show_what_they_can_and_report_unreadable_items(hexeract, store, queue):
    """An item written by hand with a key that is not a UUID: `list` and `dead-letter list` still
    list every readable schedule (exit 0) and name the item they skipped on stderr."""
    good = add(hexeract, "--at", "+1h", "--target", queue.target)
    item = store.client.get_item(TableName=store.table_name, Key={"schedule_id": {"S": good}})["Item"]
    store.client.put_item(TableName=store.table_name, Item={**item, "schedule_id": {"S": "hand-written"}})
    dead = {k: v for k, v in item.items() if k not in ("due_shard", "due_at")}
    dead |= {"schedule_id": {"S": "dead-by-hand"}, "status": {"S": "dead_lettered"}, "dl_pk": {"S": "dead"}}
    store.client.put_item(TableName=store.table_name, Item={**dead, "dead_lettered_at": {"N": "1"}})

    result = hexeract("scheduler", "list", "--format", "json")
    assert [i["schedule_id"] for i in json.loads(ok(result))] == [good]
    assert result.stderr == (
        "warning: skipped 1 unreadable item(s): 'hand-written': unreadable item: schedule_id is not a UUID\n"
    )
    result = hexeract("scheduler", "dead-letter", "list")
    assert ok(result).strip() == "no dead-lettered schedules"
    assert "'dead-by-hand'" in result.stderr
