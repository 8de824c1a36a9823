"""The store contract (``hexeract_scheduler.store.contract``) and the worker's behaviour on it, checked the
same way on every store: claim, lease, fence, sweep, lifecycle, listings, replay; delivery, cron,
retry and backoff, dead-letter, lease expiry, misfire."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from hexeract_scheduler import OccurrenceId, ScheduledMessage, ScheduleStatus
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.errors import InvalidInput, NotReplayable, ScheduleNotFound
from hexeract_scheduler.store.contract import CRASH_EXHAUSTED, ScheduleAdmin, ScheduleStore

from ..conftest import T0
from .conftest import TARGET, worker_on

S = timedelta(seconds=1)
LEASE = 30 * S


def one_shot(clock, after: timedelta = timedelta(0), **kw) -> ScheduledMessage:
    return ScheduledMessage.delay(TARGET, at=clock.now() + after, **kw)


def test_it_is_both_contracts(any_store):
    assert isinstance(any_store, ScheduleStore) and isinstance(any_store, ScheduleAdmin)
    assert any_store.ready()


# -- claims, leases, fences --------------------------------------------------------------------


def test_a_claim_leases_once_counts_an_attempt_and_waits_for_its_instant(any_store, clock):
    msg = one_shot(clock, 2 * S)
    any_store.insert(msg, clock.now())
    assert any_store.claim_due(clock.now(), LEASE, 10).leased == []
    clock.advance(2)
    [occ] = any_store.claim_due(clock.now(), LEASE, 10).leased
    assert (occ.schedule_id, occ.attempt, occ.scheduled_for) == (msg.schedule_id, 1, T0 + 2 * S)
    assert occ.leased_until == clock.now() + LEASE
    assert any_store.claim_due(clock.now(), LEASE, 10).leased == []  # leased: nobody else gets it
    snap = any_store.inspect(msg.schedule_id)
    assert (snap.status, snap.attempts, snap.leased_until) == (ScheduleStatus.PENDING, 1, clock.now() + LEASE)


def test_racing_claims_lease_each_occurrence_once(any_store, clock):
    for _ in range(30):
        any_store.insert(one_shot(clock), clock.now())
    with ThreadPoolExecutor(6) as pool:
        batches = list(pool.map(lambda _: any_store.claim_due(clock.now(), LEASE, 10), range(6)))
    ids = [o.schedule_id for b in batches for o in b.leased]
    assert len(ids) == len(set(ids))  # never twice
    assert len(ids) + sum(b.lost for b in batches) >= 30  # and each due entry was tried


def test_an_expired_lease_is_claimed_again_and_fences_the_old_ack(any_store, clock):
    msg = one_shot(clock)
    any_store.insert(msg, clock.now())
    [old] = any_store.claim_due(clock.now(), LEASE, 10).leased
    clock.advance(LEASE.total_seconds())
    [new] = any_store.claim_due(clock.now(), LEASE, 10).leased
    assert new.attempt == 2 and new.lease_token != old.lease_token
    assert any_store.mark_delivered(old) is False  # the zombie's ack changes nothing
    assert any_store.mark_failed(old, "late", clock.now()) is False
    assert any_store.inspect(msg.schedule_id).status is ScheduleStatus.PENDING
    assert any_store.mark_delivered(new) is True
    assert any_store.inspect(msg.schedule_id).status is ScheduleStatus.DELIVERED


def test_a_spent_budget_with_no_lease_in_force_is_swept(any_store, clock):
    msg = one_shot(clock, max_attempts=1)
    any_store.insert(msg, clock.now())
    assert len(any_store.claim_due(clock.now(), LEASE, 10).leased) == 1  # then the worker "crashes"
    clock.advance(LEASE.total_seconds())
    batch = any_store.claim_due(clock.now(), LEASE, 10)
    assert (batch.leased, batch.swept) == ([], [msg.schedule_id])
    snap = any_store.inspect(msg.schedule_id)
    assert (snap.status, snap.last_error) == (ScheduleStatus.DEAD_LETTERED, CRASH_EXHAUSTED)


def test_acks_record_what_the_contract_says(any_store, clock):
    failing, once, cron = one_shot(clock, max_attempts=3), one_shot(clock), ScheduledMessage.cron(TARGET, "* * * * * *")
    for m in (failing, once, cron):
        any_store.insert(m, clock.now())
    clock.advance(1)
    occs: dict[uuid.UUID, LeasedOccurrence] = {
        o.schedule_id: o for o in any_store.claim_due(clock.now(), LEASE, 10).leased
    }
    assert any_store.mark_failed(occs[failing.schedule_id], "boom", clock.now() + 5 * S)
    snap = any_store.inspect(failing.schedule_id)
    assert (snap.attempts, snap.last_error, snap.next_attempt) == (1, "boom", clock.now() + 5 * S)
    assert any_store.mark_delivered(occs[once.schedule_id])
    assert any_store.reschedule(occs[cron.schedule_id], clock.now() + S)
    snap = any_store.inspect(cron.schedule_id)
    assert (snap.status, snap.attempts, snap.scheduled_for) == (ScheduleStatus.PENDING, 0, clock.now() + S)
    clock.advance(5)
    [again] = [o for o in any_store.claim_due(clock.now(), LEASE, 10).leased if o.schedule_id == failing.schedule_id]
    assert any_store.mark_dead_lettered(again, "boom again", clock.now())
    snap = any_store.inspect(failing.schedule_id)
    assert (snap.status, snap.last_error, snap.dead_lettered_at) == (
        ScheduleStatus.DEAD_LETTERED,
        "boom again",
        clock.now(),
    )


# -- lifecycle, listings, replay ---------------------------------------------------------------


def test_lifecycle(any_store, clock):
    msg = one_shot(clock, 60 * S)
    any_store.insert(msg, clock.now())
    with pytest.raises(InvalidInput, match="already exists"):
        any_store.insert(msg, clock.now())
    assert any_store.pause(msg.schedule_id) and not any_store.pause(msg.schedule_id)
    clock.advance(120)
    assert any_store.claim_due(clock.now(), LEASE, 10).leased == []  # paused: out of reach
    assert any_store.resume(msg.schedule_id, clock.now()) and not any_store.resume(msg.schedule_id, clock.now())
    assert any_store.inspect(msg.schedule_id).scheduled_for == T0 + 60 * S  # a one-shot keeps its instant
    assert any_store.cancel(msg.schedule_id) and not any_store.cancel(msg.schedule_id)
    assert any_store.inspect(msg.schedule_id).status is ScheduleStatus.CANCELLED
    assert any_store.claim_due(clock.now(), LEASE, 10).leased == []
    unknown = uuid.uuid4()
    assert any_store.inspect(unknown) is None
    for op in (any_store.pause, any_store.cancel, lambda i: any_store.resume(i, clock.now())):
        with pytest.raises(ScheduleNotFound):
            op(unknown)


def test_resume_realigns_a_cron_whose_instant_passed(any_store, clock):
    msg = ScheduledMessage.cron(TARGET, "*/10 * * * * *")
    any_store.insert(msg, clock.now())
    any_store.pause(msg.schedule_id)
    clock.advance(35)
    any_store.resume(msg.schedule_id, clock.now())
    assert any_store.inspect(msg.schedule_id).scheduled_for == T0 + 40 * S  # no catch-up


def test_listings_and_replay(any_store, clock):
    later, soon, paused = one_shot(clock, 30 * S), one_shot(clock, 10 * S), one_shot(clock, 20 * S)
    dead = [one_shot(clock, max_attempts=1) for _ in range(3)]
    for m in (later, soon, paused, *dead):
        any_store.insert(m, clock.now())
    any_store.pause(paused.schedule_id)
    for i, occ in enumerate(
        sorted(any_store.claim_due(clock.now(), LEASE, 10).leased, key=lambda o: str(o.schedule_id))
    ):
        clock.advance(1)
        any_store.mark_dead_lettered(occ, f"failed {i}", clock.now())
    assert [s.schedule_id for s in any_store.list_pending()] == [
        soon.schedule_id,
        paused.schedule_id,
        later.schedule_id,
    ]
    assert len(any_store.list_pending(limit=2)) == 2
    newest_first = [s.last_error for s in any_store.list_dead_letter()]
    assert newest_first == ["failed 2", "failed 1", "failed 0"]
    victim = any_store.list_dead_letter(limit=1)[0].schedule_id
    any_store.replay(victim, clock.now())
    snap = any_store.inspect(victim)
    assert (snap.status, snap.attempts, snap.last_error) == (ScheduleStatus.PENDING, 0, None)
    assert [o.schedule_id for o in any_store.claim_due(clock.now(), LEASE, 10).leased] == [victim]
    with pytest.raises(NotReplayable):
        any_store.replay(soon.schedule_id, clock.now())
    with pytest.raises(InvalidInput, match="limit"):
        any_store.list_pending(0)


# -- the worker on every store -----------------------------------------------------------------


def test_the_worker_delivers_retries_backs_off_and_dead_letters(any_store, clock, sink):
    ok, broken = (
        one_shot(clock),
        ScheduledMessage.delay("sqs:arn:aws:sqs:us-east-1:123456789012:down", at=clock.now(), max_attempts=2),
    )
    sink.failing.add(str(broken.target))
    any_store.insert(ok, clock.now())
    any_store.insert(broken, clock.now())
    worker = worker_on(any_store, sink, clock, retry_base_delay=S, retry_max_delay=60 * S)
    s = worker.run_once()
    assert (s.dispatched, s.retried) == (1, 1)
    assert [o.occurrence_id for o in sink.sent] == [OccurrenceId.derive(ok.schedule_id, T0)]
    assert any_store.inspect(broken.schedule_id).next_attempt == T0 + 2 * S  # base x 2^1, no jitter
    clock.advance(1.999)
    assert worker.run_once().claimed == 0  # backing off
    clock.advance(0.001)
    assert worker.run_once().dead_lettered == 1
    snap = any_store.inspect(broken.schedule_id)
    assert snap.status is ScheduleStatus.DEAD_LETTERED and "is down" in snap.last_error


def test_the_worker_fires_a_cron_every_instant_and_misfires_once(any_store, clock, sink):
    msg = ScheduledMessage.cron(TARGET, "* * * * * *")
    any_store.insert(msg, clock.now())
    worker = worker_on(any_store, sink, clock)
    for _ in range(5):
        clock.advance(1)
        assert worker.run_once().rescheduled == 1
    clock.advance(3600)  # an outage: one catch-up, not 3,600
    assert worker.run_once().dispatched == 1
    assert worker.run_once().dispatched == 0
    stamps = [o.scheduled_for for o in sink.sent]
    assert stamps == [T0 + i * S for i in range(1, 6)] + [T0 + 6 * S]
    assert any_store.inspect(msg.schedule_id).scheduled_for == clock.now() + S


def test_a_worker_that_dies_after_sending_loses_nothing(any_store, clock, sink):
    msg = one_shot(clock)
    any_store.insert(msg, clock.now())
    [occ] = any_store.claim_due(clock.now(), LEASE, 10).leased  # a worker claims, sends, dies
    worker = worker_on(any_store, sink, clock, lease=LEASE, dispatch_timeout=S)
    assert worker.run_once().claimed == 0
    clock.advance(LEASE.total_seconds())
    assert worker.run_once().dispatched == 1
    assert sink.sent[0].occurrence_id == occ.occurrence_id and sink.sent[0].attempt == 2
