"""hexeract's worker settings, with its defaults and its validation, and the retry delay."""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from datetime import timedelta

from hexeract_scheduler.domain.checks import check_int
from hexeract_scheduler.errors import ConfigError


@dataclass(frozen=True)
class SchedulerWorkerConfig:
    """hexeract's worker settings (docs/contracts.md#hexeract-semantics).

    Invariant: ``lease >= batch_size * dispatch_timeout``. A claimed batch is settled (sent and
    acked) while its lease holds; if the lease could expire mid-batch, another worker would claim
    the same occurrences and deliver them a second time while this one still works on them.
    """

    poll_interval: timedelta = timedelta(milliseconds=100)
    batch_size: int = 10
    lease: timedelta = timedelta(seconds=300)
    retry_base_delay: timedelta = timedelta(seconds=1)
    retry_max_delay: timedelta = timedelta(seconds=300)
    jitter: bool = True
    min_cycle_delay: timedelta = timedelta(milliseconds=5)
    dispatch_timeout: timedelta = timedelta(seconds=30)
    # Not in hexeract: threads for concurrent sends and acks. (Which shards a worker reads is its
    # store's configuration.)
    concurrency: int = 16
    # Not in hexeract: claimed batches being sent and acked while the next claim runs (``run``);
    # None: four times the batches that ``concurrency`` threads serve at once (a claim waits for half
    # the lanes, so each look at the due index serves several batches).
    batches_in_flight: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                if value < timedelta(0):
                    raise ConfigError(f"{f.name} must not be negative, got {value}", f.name)
                if value == timedelta(0) and f.name != "min_cycle_delay":
                    raise ConfigError(f"{f.name} must be non-zero", f.name)
        check_int(self.batch_size, "batch_size", 1, error=ConfigError)
        check_int(self.concurrency, "concurrency", 1, error=ConfigError)
        if self.batches_in_flight is not None:
            check_int(self.batches_in_flight, "batches_in_flight", 1, error=ConfigError)
        if self.retry_max_delay < self.retry_base_delay:
            raise ConfigError(
                f"retry_max_delay ({self.retry_max_delay}) must be >= retry_base_delay ({self.retry_base_delay})",
                "retry_max_delay",
                "retry_base_delay",
            )
        try:
            batch_time = self.dispatch_timeout * self.batch_size
        except OverflowError:
            raise ConfigError(
                f"batch_size ({self.batch_size}) x dispatch_timeout ({self.dispatch_timeout}) is too large a duration; "
                f"the lease must cover a whole batch",
                "batch_size",
                "dispatch_timeout",
            ) from None
        if self.lease < batch_time:
            raise ConfigError(
                f"lease ({self.lease}) must cover a whole batch: >= batch_size ({self.batch_size}) x "
                f"dispatch_timeout ({self.dispatch_timeout}) = {batch_time}",
                "lease",
                "batch_size",
                "dispatch_timeout",
            )

    @property
    def pipeline_depth(self) -> int:
        """How many claimed batches ``run`` keeps in flight at most."""
        if self.batches_in_flight is not None:
            return self.batches_in_flight
        return max(2, 4 * -(-self.concurrency // self.batch_size))


def retry_delay(attempts: int, config: SchedulerWorkerConfig, rng: random.Random | None = None) -> timedelta:
    """``min(retry_base_delay * 2**attempts, retry_max_delay)``, then full jitter: uniform in
    ``[0, capped]`` when ``jitter`` is on (spreads a burst of failures instead of re-aligning it)."""
    base = config.retry_base_delay.total_seconds()
    cap = config.retry_max_delay.total_seconds()
    capped = cap if attempts >= 64 else min(base * 2**attempts, cap)
    if config.jitter:
        capped = (rng or random).uniform(0.0, capped)
    return timedelta(seconds=capped)
