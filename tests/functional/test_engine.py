"""The delivery contract end to end: store + worker + SQS sink over HTTP against moto."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

import pytest

from hexeract_scheduler import NotReplayable, OccurrenceId, ScheduledMessage, ScheduleNotFound, ScheduleStatus
from hexeract_scheduler.domain.clock import UTC, from_ms
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED

from ..conftest import T0, make_queue, make_worker

S = timedelta(seconds=1)


def missing_queue_target(endpoint_url: str) -> str:
    return f"sqs:{endpoint_url}/123456789012/does-not-exist-{uuid.uuid4().hex[:8]}"


def occurrence_ids(messages) -> list[str]:
    return [m["MessageAttributes"]["occurrence_id"]["StringValue"] for m in messages]


# -- one-shot ---------------------------------------------------------------------------------


def test_one_shot_is_dispatched_once_when_due_and_not_before(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, after=2 * S, now=clock.now(), payload='{"remind": "stand up"}')
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)

    clock.advance(1.999)
    assert worker.run_once().claimed == 0
    assert queue.receive_all() == []

    clock.advance(0.001)
    summary = worker.run_once()
    assert (summary.claimed, summary.dispatched) == (1, 1)
    [message] = queue.receive_all()
    assert message["Body"] == '{"remind": "stand up"}'
    assert occurrence_ids([message]) == [str(OccurrenceId.derive(msg.schedule_id, T0 + 2 * S))]

    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DELIVERED and snap.attempts == 1
    clock.advance(600)
    assert worker.run_once().claimed == 0
    assert queue.receive_all() == []


# -- cron -------------------------------------------------------------------------------------


def test_six_field_cron_fires_reschedules_and_resets_attempts(store, clients, clock, queue):
    msg = ScheduledMessage.cron(queue.target, "*/2 * * * * *")
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    assert store.inspect(msg.schedule_id).scheduled_for == T0 + 2 * S

    seen = []
    for _ in range(3):
        clock.advance(2)
        assert worker.run_once().dispatched == 1
        snap = store.inspect(msg.schedule_id)
        assert snap.status is ScheduleStatus.PENDING and snap.attempts == 0
        assert snap.scheduled_for == clock.now() + 2 * S
        seen += queue.receive_all()
    stamps = [m["MessageAttributes"]["scheduled_for"]["StringValue"] for m in seen]
    assert stamps == ["2026-12-02T10:00:02.000Z", "2026-12-02T10:00:04.000Z", "2026-12-02T10:00:06.000Z"]
    assert len(set(occurrence_ids(seen))) == 3


def test_misfire_after_an_outage_fires_once_then_realigns(store, clients, clock, queue):
    msg = ScheduledMessage.cron(queue.target, "*/2 * * * * *")
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    clock.advance(20.5)  # ten ticks missed
    summary = worker.run_once()
    assert summary.dispatched == 1
    assert worker.run_once().claimed == 0  # no burst
    assert len(queue.receive_all()) == 1
    assert store.inspect(msg.schedule_id).scheduled_for == T0 + 22 * S  # first tick strictly after now
    clock.advance(1.5)
    assert worker.run_once().dispatched == 1


def test_time_zone_cron_across_the_fall_back(store, clients, clock, queue):
    clock.set(datetime(2026, 10, 31, 12, tzinfo=UTC))
    msg = ScheduledMessage.cron(queue.target, "30 1 * * *", timezone="America/New_York")
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    fired = []
    for _ in range(3):
        due = store.inspect(msg.schedule_id).scheduled_for
        clock.set(due)
        assert worker.run_once().dispatched == 1
        fired.append(due)
    # 01:30 EDT, then 01:30 EST the next day: the repeated 01:30 of Nov 1 does not fire again.
    assert fired == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        datetime(2026, 11, 2, 6, 30, tzinfo=UTC),
        datetime(2026, 11, 3, 6, 30, tzinfo=UTC),
    ]


def test_time_zone_cron_across_the_spring_forward(store, clients, clock, queue):
    clock.set(datetime(2026, 3, 7, 12, tzinfo=UTC))
    msg = ScheduledMessage.cron(queue.target, "30 2 * * *", timezone="America/New_York")
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    due = store.inspect(msg.schedule_id).scheduled_for
    assert due == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)  # 02:30 on Mar 8 does not exist: skipped
    clock.set(due)
    assert worker.run_once().dispatched == 1


# -- retry, dead letter, replay ----------------------------------------------------------------


def test_failed_attempts_back_off_then_dead_letter_with_the_error(store, clients, clock, endpoint):
    msg = ScheduledMessage.delay(missing_queue_target(endpoint.url), at=clock.now(), max_attempts=3)
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock, retry_base_delay=S, retry_max_delay=60 * S)

    s = worker.run_once()
    assert (s.claimed, s.retried) == (1, 1)
    snap = store.inspect(msg.schedule_id)
    assert snap.attempts == 1  # counted at claim, not touched by the failure
    assert snap.status is ScheduleStatus.PENDING
    assert "QueueDoesNotExist" in snap.last_error or "does not exist" in snap.last_error.lower()
    assert snap.leased_until == T0 + 2 * S  # base * 2**attempts

    clock.advance(1.999)
    assert worker.run_once().claimed == 0  # backing off
    clock.advance(0.001)
    assert worker.run_once().retried == 1
    assert store.inspect(msg.schedule_id).leased_until == clock.now() + 4 * S

    clock.advance(4)
    s = worker.run_once()
    assert (s.claimed, s.dead_lettered) == (1, 1)
    snap = store.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.DEAD_LETTERED and snap.attempts == 3
    assert snap.dead_lettered_at == clock.now() and snap.last_error
    clock.advance(3600)
    assert worker.run_once().claimed == 0  # never claimed again until replayed


def test_dead_letter_listing_is_newest_first_with_a_limit(store, clients, clock, endpoint):
    worker = make_worker(store, clients, clock)
    ids = []
    for _ in range(3):
        msg = ScheduledMessage.delay(missing_queue_target(endpoint.url), at=clock.now(), max_attempts=1)
        store.insert(msg, clock.now())
        assert worker.run_once().dead_lettered == 1
        ids.append(msg.schedule_id)
        clock.advance(10)
    listed = store.list_dead_letter(limit=2)
    assert [s.schedule_id for s in listed] == [ids[2], ids[1]]
    assert [s.schedule_id for s in store.list_dead_letter()] == ids[::-1]
    row = listed[0].to_json()
    assert row["status"] == "dead-lettered" and row["trigger"] == "delay"
    assert set(row) == {
        "schedule_id", "status", "scheduled_for", "attempts", "max_attempts", "trigger", "target", "event_type",
        "last_error", "leased_until", "dead_lettered_at",
    }  # fmt: skip
    assert row["dead_lettered_at"].endswith("Z")


def test_replay_delivers_the_same_occurrence_on_the_next_cycle(store, clients, clock, endpoint):
    queue = make_queue(clients)
    broken = missing_queue_target(endpoint.url)
    msg = ScheduledMessage.delay(broken, at=clock.now(), max_attempts=1)
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock)
    assert worker.run_once().dead_lettered == 1

    # The operator fixes the target (creates the queue the URL names), then replays.
    clients.sqs().create_queue(QueueName=broken.rsplit("/", 1)[1])
    clock.advance(60)
    store.replay(msg.schedule_id, clock.now())
    snap = store.inspect(msg.schedule_id)
    assert (snap.status, snap.attempts, snap.last_error) == (ScheduleStatus.PENDING, 0, None)
    assert store.list_dead_letter() == []
    assert worker.run_once().dispatched == 1
    assert store.inspect(msg.schedule_id).status is ScheduleStatus.DELIVERED
    del queue


def test_replay_of_a_schedule_that_is_not_dead_lettered_changes_nothing(store, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now() + 60 * S)
    store.insert(msg, clock.now())
    before = store.inspect(msg.schedule_id)
    with pytest.raises(NotReplayable, match="pending"):
        store.replay(msg.schedule_id, clock.now())
    assert store.inspect(msg.schedule_id) == before
    with pytest.raises(ScheduleNotFound):
        store.replay(uuid.uuid4(), clock.now())


# -- crashes and fencing ----------------------------------------------------------------------


def test_a_crash_between_claim_and_ack_loses_nothing(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(msg, clock.now())
    lease = timedelta(seconds=30)
    crashed = store.claim_due(clock.now(), lease, 10).leased  # worker A claims, then dies
    assert len(crashed) == 1

    worker_b = make_worker(store, clients, clock, lease=lease, dispatch_timeout=S)
    clock.advance(29.999)
    assert worker_b.run_once().claimed == 0  # A's lease still holds
    clock.advance(0.001)
    s = worker_b.run_once()
    assert (s.claimed, s.dispatched) == (1, 1)
    [message] = queue.receive_all()
    assert occurrence_ids([message]) == [str(crashed[0].occurrence_id)]
    assert message["MessageAttributes"]["attempt"] == {"DataType": "Number", "StringValue": "2"}
    assert store.inspect(msg.schedule_id).attempts == 2  # the crashed claim counted


def test_a_crash_on_the_last_attempt_is_swept_to_dead_letter(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now(), max_attempts=1)
    store.insert(msg, clock.now())
    assert len(store.claim_due(clock.now(), timedelta(seconds=30), 10).leased) == 1  # then crash
    worker = make_worker(store, clients, clock, lease=30 * S, dispatch_timeout=S)
    clock.advance(30)
    s = worker.run_once()
    assert (s.claimed, s.swept, s.dispatched) == (0, 1, 0)
    snap = store.inspect(msg.schedule_id)
    assert snap.status is ScheduleStatus.DEAD_LETTERED and snap.last_error == CRASH_EXHAUSTED
    assert queue.receive_all() == []


def test_a_zombie_ack_after_its_lease_was_reclaimed_changes_nothing(store, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now(), max_attempts=5)
    store.insert(msg, clock.now())
    [zombie] = store.claim_due(clock.now(), timedelta(seconds=10), 10).leased
    clock.advance(10)
    [owner] = store.claim_due(clock.now(), timedelta(seconds=10), 10).leased
    assert owner.occurrence_id == zombie.occurrence_id and owner.lease_token != zombie.lease_token
    before = store.inspect(msg.schedule_id)

    assert store.mark_delivered(zombie) is False
    assert store.mark_failed(zombie, "late failure", clock.now()) is False
    assert store.mark_dead_lettered(zombie, "late", clock.now()) is False
    assert store.reschedule(zombie, clock.now()) is False
    assert store.inspect(msg.schedule_id) == before

    assert store.mark_delivered(owner) is True
    assert store.inspect(msg.schedule_id).status is ScheduleStatus.DELIVERED


def test_an_occurrence_whose_lease_expired_before_dispatch_is_not_sent(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now())
    store.insert(msg, clock.now())
    worker = make_worker(store, clients, clock, lease=10 * S, dispatch_timeout=S)
    claim_due = store.claim_due

    def slow_claim(*args, **kwargs):
        batch = claim_due(*args, **kwargs)
        clock.advance(11)  # the claim took longer than the lease (a long GC pause, say)
        return batch

    store.claim_due = slow_claim  # type: ignore[method-assign]
    s = worker.run_once()
    assert (s.claimed, s.skipped, s.dispatched) == (1, 1, 0)
    assert queue.receive_all() == []
    del store.claim_due
    s = worker.run_once()  # claimable again: its lease expired
    assert s.dispatched == 1


# -- lifecycle --------------------------------------------------------------------------------


def test_pause_resume_cancel(store, clients, clock, queue):
    worker = make_worker(store, clients, clock)
    one_shot = ScheduledMessage.delay(queue.target, at=clock.now() + 5 * S)
    cron = ScheduledMessage.cron(queue.target, "*/10 * * * * *")
    for m in (one_shot, cron):
        store.insert(m, clock.now())
        assert store.pause(m.schedule_id) is True
        assert store.pause(m.schedule_id) is False  # already paused: no-op
    clock.advance(60)
    assert worker.run_once().claimed == 0  # paused schedules are never claimed
    assert {s.status for s in store.list_pending()} == {ScheduleStatus.PAUSED}

    assert store.resume(one_shot.schedule_id, clock.now()) is True
    assert store.inspect(one_shot.schedule_id).scheduled_for == T0 + 5 * S  # instant unchanged
    assert store.resume(cron.schedule_id, clock.now()) is True
    assert store.inspect(cron.schedule_id).scheduled_for == T0 + 70 * S  # strictly future, no catch-up
    assert store.resume(cron.schedule_id, clock.now()) is False  # not paused: no-op

    s = worker.run_once()
    assert s.dispatched == 1  # the one-shot, now overdue; the cron waits for its next tick
    assert store.cancel(one_shot.schedule_id) is False  # delivered: never clobbered
    assert store.inspect(one_shot.schedule_id).status is ScheduleStatus.DELIVERED
    assert store.cancel(cron.schedule_id) is True
    assert store.inspect(cron.schedule_id).status is ScheduleStatus.CANCELLED
    clock.advance(60)
    assert worker.run_once().claimed == 0
    assert store.list_pending() == []


def test_unknown_ids(store, clock):
    unknown = uuid.uuid4()
    for op in (store.pause, store.cancel):
        with pytest.raises(ScheduleNotFound):
            op(unknown)
    with pytest.raises(ScheduleNotFound):
        store.resume(unknown, clock.now())
    assert store.inspect(unknown) is None


def test_list_pending_is_soonest_first_with_a_limit(store, clock, queue):
    msgs = [ScheduledMessage.delay(queue.target, at=clock.now() + n * S) for n in (30, 10, 20, 40)]
    for m in msgs:
        store.insert(m, clock.now())
    store.pause(msgs[3].schedule_id)
    listed = store.list_pending(limit=3)
    assert [s.scheduled_for for s in listed] == [T0 + 10 * S, T0 + 20 * S, T0 + 30 * S]
    assert [s.status for s in store.list_pending()][-1] is ScheduleStatus.PAUSED


def test_create_table_is_idempotent_and_keeps_its_shard_count(store):
    assert store.create_table(shards=16) == (False, 4)


# -- the message contract ---------------------------------------------------------------------


def test_message_contract_on_a_standard_queue(store, clients, clock, queue):
    payload = '{"emoji": "⏰", "n": 1}  '  # byte-for-byte, trailing spaces included
    msg = ScheduledMessage.delay(queue.target, at=clock.now(), payload=payload, event_type="reminder.due")
    store.insert(msg, clock.now())
    make_worker(store, clients, clock).run_once()
    [m] = queue.receive_all()
    assert m["Body"].encode() == payload.encode()
    attrs = m["MessageAttributes"]
    assert {k: (v["DataType"], v["StringValue"]) for k, v in attrs.items()} == {
        "occurrence_id": ("String", str(OccurrenceId.derive(msg.schedule_id, T0))),
        "schedule_id": ("String", str(msg.schedule_id)),
        "event_type": ("String", "reminder.due"),
        "scheduled_for": ("String", "2026-12-02T10:00:00.000Z"),
        "attempt": ("Number", "1"),
    }


def test_fifo_queue_dedup_id_is_the_occurrence_id_and_group_defaults_to_the_schedule(store, clients, clock):
    fifo = make_queue(clients, fifo=True)
    plain = ScheduledMessage.delay(f"sqs:{fifo.arn}", at=clock.now())  # by ARN: resolved with GetQueueUrl
    grouped = ScheduledMessage.delay(f"sqs:{fifo.url}?group=tenant-7", at=clock.now())
    for m in (plain, grouped):
        store.insert(m, clock.now())
    assert make_worker(store, clients, clock).run_once().dispatched == 2
    resp = clients.sqs().receive_message(
        QueueUrl=fifo.url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    )
    by_schedule = {m["MessageAttributes"]["schedule_id"]["StringValue"]: m for m in resp["Messages"]}
    for m, group in ((plain, str(plain.schedule_id)), (grouped, "tenant-7")):
        got = by_schedule[str(m.schedule_id)]
        assert got["Attributes"]["MessageDeduplicationId"] == str(OccurrenceId.derive(m.schedule_id, T0))
        assert got["Attributes"]["MessageGroupId"] == group


@pytest.mark.parametrize("fifo", [False, True])
def test_sns_topics_carry_the_same_contract(store, clients, clock, fifo):
    sns = clients.sns()
    suffix = ".fifo" if fifo else ""
    topic = sns.create_topic(
        Name=f"topic-{uuid.uuid4().hex[:8]}{suffix}", Attributes={"FifoTopic": "true"} if fifo else {}
    )["TopicArn"]
    inbox = make_queue(clients, fifo=fifo)
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox.arn, Attributes={"RawMessageDelivery": "true"})
    msg = ScheduledMessage.delay(f"sns:{topic}", at=clock.now(), payload='{"via": "sns"}')
    store.insert(msg, clock.now())
    assert make_worker(store, clients, clock).run_once().dispatched == 1
    [m] = inbox.receive_all()
    assert m["Body"] == '{"via": "sns"}'
    assert m["MessageAttributes"]["occurrence_id"]["StringValue"] == str(OccurrenceId.derive(msg.schedule_id, T0))
    assert m["MessageAttributes"]["attempt"]["DataType"] == "Number"


def test_large_payloads_are_split_into_batches_under_256_kib(store, clients, clock, queue):
    body = json.dumps({"blob": "x" * 100_000})
    msgs = [ScheduledMessage.delay(queue.target, at=clock.now(), payload=body) for _ in range(5)]
    for m in msgs:
        store.insert(m, clock.now())
    s = make_worker(store, clients, clock).run_once()
    assert (s.dispatched, s.retried) == (5, 0)
    assert {m["Body"] for m in queue.receive_all()} == {body}


def test_stored_instants_round_trip(store, clock, queue):
    msg = ScheduledMessage.delay(queue.target, at=clock.now() + timedelta(milliseconds=1))
    snap = store.insert(msg, clock.now())
    assert snap.scheduled_for == from_ms(1_796_205_600_001)


def test_listing_orders_by_next_attempt_and_keeps_paused_out_of_reach(store, clients, clock, endpoint):
    backing_off = ScheduledMessage.delay(missing_queue_target(endpoint.url), at=clock.now(), max_attempts=5)
    later = ScheduledMessage.delay(missing_queue_target(endpoint.url), at=clock.now() + 3 * S)
    paused = ScheduledMessage.delay(missing_queue_target(endpoint.url), at=clock.now() + 1 * S)
    for m in (backing_off, later, paused):
        store.insert(m, clock.now())
    store.pause(paused.schedule_id)
    worker = make_worker(store, clients, clock, retry_base_delay=5 * S, retry_max_delay=60 * S)
    assert worker.run_once().retried == 1  # backing_off now waits 10 s
    listed = store.list_pending()
    assert [s.schedule_id for s in listed] == [paused.schedule_id, later.schedule_id, backing_off.schedule_id]
    assert [s.next_attempt for s in listed] == [T0 + 1 * S, T0 + 3 * S, T0 + 10 * S]
    clock.advance(3600)
    assert store.find_due(clock.now(), 10) and paused.schedule_id not in {
        e.schedule_id for e in store.find_due(clock.now(), 10)
    }
