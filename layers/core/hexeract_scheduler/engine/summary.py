"""What a worker did: the counters of a cycle or a run, from one list that the summary, its JSON
form (the dispatcher's and ``worker``'s output) and the published metrics all follow."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_LAG_SAMPLES = 10_000


@dataclass(frozen=True, slots=True)
class Counter:
    name: str  # the CycleSummary field and the summary's JSON key
    metric: str  # the CloudWatch metric
    doc: str


COUNTERS: tuple[Counter, ...] = (
    Counter("claimed", "Claimed", "occurrences claimed"),
    Counter("dispatched", "Dispatched", "sent and acknowledged"),
    Counter("rescheduled", "Rescheduled", "the part of dispatched that moved a cron schedule on"),
    Counter("retried", "Retried", "failed attempts with budget left, retry scheduled"),
    Counter("dead_lettered", "DeadLettered", "failed on the last attempt"),
    Counter("swept", "Swept", "dead-lettered because crashed workers used up the budget"),
    Counter("lease_lost", "LeaseLost", "acks refused by the fence (another worker owns the occurrence now)"),
    Counter("skipped", "Skipped", "claimed, but the lease had expired before dispatch: not sent"),
    Counter("failed_cycles", "FailedCycles", "cycles that failed on an error other than a transient one"),
    Counter("quarantined", "Quarantined", "unreadable items dead-lettered with the reason"),
    Counter("unreadable", "Unreadable", "unreadable items no write could take, left in place"),
)
# Counted, summed, never reported.
INTERNAL = ("lost_claims", "cycles")


@dataclass
class CycleSummary:
    """Counts for one poll cycle (or, summed, for a whole run): see ``COUNTERS``. ``lag_ms`` holds
    dispatch lags (sent - scheduled), ``next_due_ms`` the soonest instant seen in the look-ahead,
    ``more_due`` that more was due than was claimed."""

    claimed: int = 0
    dispatched: int = 0
    rescheduled: int = 0
    retried: int = 0
    dead_lettered: int = 0
    swept: int = 0
    lease_lost: int = 0
    skipped: int = 0
    failed_cycles: int = 0
    quarantined: int = 0
    unreadable: int = 0
    lost_claims: int = 0
    cycles: int = 0
    lag_ms: list[int] = field(default_factory=list)
    next_due_ms: int | None = None
    more_due: bool = False

    def add(self, other: CycleSummary) -> None:
        for name in (*(c.name for c in COUNTERS), *INTERNAL):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = MAX_LAG_SAMPLES - len(self.lag_ms)
        if room > 0:
            self.lag_ms.extend(other.lag_ms[:room])

    def as_dict(self) -> dict[str, int]:
        """The reported summary (docs/contracts.md#lambda-functions), in ``COUNTERS`` order."""
        return {c.name: getattr(self, c.name) for c in COUNTERS}
