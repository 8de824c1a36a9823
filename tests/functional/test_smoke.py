from __future__ import annotations

from datetime import timedelta

from hexeract_scheduler import ScheduledMessage

from ..conftest import make_worker


def test_one_shot_smoke(store, clients, clock, queue):
    msg = ScheduledMessage.delay(queue.target, after=timedelta(seconds=2), now=clock.now(), payload='{"a":1}')
    store.insert(msg, clock.now())
    w = make_worker(store, clients, clock)
    assert w.run_once().claimed == 0
    clock.advance(2)
    s = w.run_once()
    assert s.dispatched == 1, s
    msgs = queue.receive_all()
    assert len(msgs) == 1
    assert msgs[0]["Body"] == '{"a":1}'
