"""Settling a claimed occurrence: the one fenced ack its dispatch outcome calls for."""

from __future__ import annotations

import enum
import logging
import random
from datetime import datetime
from typing import Any

from hexeract_scheduler.domain.clock import rfc3339
from hexeract_scheduler.domain.model import LeasedOccurrence
from hexeract_scheduler.engine.config import SchedulerWorkerConfig, retry_delay
from hexeract_scheduler.errors import HexeractError
from hexeract_scheduler.sinks.batch import Outcome
from hexeract_scheduler.store.contract import ScheduleStore

log = logging.getLogger("hexeract_scheduler")


class Settled(enum.Enum):
    """How one claimed occurrence was settled."""

    DELIVERED = "delivered"  # sent; a one-shot is done
    RESCHEDULED = "rescheduled"  # sent; a cron moved on to its next occurrence
    RETRIED = "retried"  # failed with budget left
    DEAD_LETTERED = "dead_lettered"  # failed on the last attempt
    ACK_FAILED = "ack_failed"  # the ack itself failed or went unanswered: the lease will expire


def settle(
    store: ScheduleStore,
    occ: LeasedOccurrence,
    outcome: Outcome,
    now: datetime,
    config: SchedulerWorkerConfig,
    rng: random.Random,
) -> tuple[Settled, bool]:
    """Ack one occurrence with the write its outcome calls for, fenced on its lease; returns how, and
    whether the write applied (False: the lease was lost, another worker owns the occurrence now)."""
    try:
        if outcome is None:
            nxt = occ.trigger.next_after(max(now, occ.scheduled_for))
            if nxt is None:
                return Settled.DELIVERED, store.mark_delivered(occ)
            applied = store.reschedule(occ, nxt)
            if applied:
                log.info("rescheduled: next occurrence at %s", rfc3339(nxt), extra=occurrence_keys(occ))
            return Settled.RESCHEDULED, applied
        if occ.is_exhausted:
            attempts = "1 attempt" if occ.attempt == 1 else f"{occ.attempt} attempts"
            log.warning("dead-lettered after %s: %s", attempts, outcome, extra=occurrence_keys(occ))
            return Settled.DEAD_LETTERED, store.mark_dead_lettered(occ, outcome, now)
        delay = retry_delay(occ.attempt, config, rng)
        log.info(
            "attempt %d failed, retry in %.3fs: %s",
            occ.attempt,
            delay.total_seconds(),
            outcome,
            extra=occurrence_keys(occ),
        )
        return Settled.RETRIED, store.mark_failed(occ, outcome, now + delay)
    except HexeractError as exc:
        # The ack did not land: the lease will expire and the occurrence is claimed again
        # (counted against its budget). Nothing is lost; report it as a lost fence.
        log.error(
            "ack failed, the lease will expire and the occurrence be re-claimed: %s", exc, extra=occurrence_keys(occ)
        )
        return Settled.ACK_FAILED, False


def occurrence_keys(occ: LeasedOccurrence) -> dict[str, Any]:
    return {"schedule_id": str(occ.schedule_id), "occurrence_id": str(occ.occurrence_id), "attempt": occ.attempt}
