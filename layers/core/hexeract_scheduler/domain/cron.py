"""Cron evaluation: croniter for the calendar, zoneinfo for wall-clock time.

Accepted forms, as hexeract: 5 fields, 6 fields with a leading seconds field, or one of the macros
``@hourly @daily @weekly @monthly @yearly``. Expressions are evaluated in UTC unless the schedule
names an IANA zone, in which case they follow wall-clock time there the way EventBridge Scheduler
documents it for daylight saving changes: a local time that does not exist (spring forward) is
skipped, and a local time that happens twice (fall back) fires once, on its first occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.errors import InvalidCron

MACROS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly")
# Wall-clock candidates skipped in a row before giving up: a per-second cron crossing a one-hour
# fall-back repeat needs 3,600; nothing legitimate needs more than a day of seconds.
_MAX_SKIPS = 86_400


@lru_cache(maxsize=256)
def load_zone(name: str) -> ZoneInfo:
    try:
        if not name or name != name.strip() or name.startswith("/") or ".." in name:
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidCron(f"unknown time zone {name!r} (expected an IANA name such as Europe/Paris)")


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A validated cron expression, optionally in a time zone."""

    expression: str
    timezone: str | None = None

    def __post_init__(self) -> None:
        expr = " ".join(self.expression.split())
        object.__setattr__(self, "expression", expr)
        fields = expr.split(" ")
        if expr.startswith("@"):
            if expr not in MACROS:
                raise InvalidCron(f"invalid cron {expr!r}: unknown macro (use one of {', '.join(MACROS)})")
        elif len(fields) not in (5, 6):
            raise InvalidCron(
                f"invalid cron {expr!r}: expected 5 fields, or 6 with a leading seconds field, got {len(fields)}"
            )
        if not croniter.is_valid(expr, second_at_beginning=True):
            raise InvalidCron(f"invalid cron {expr!r}")
        if self.timezone is not None:
            load_zone(self.timezone)
        # An expression that can never match (30 February) is refused now, not at first dispatch.
        if self.next_after(datetime(2000, 1, 1, tzinfo=UTC)) is None:
            raise InvalidCron(f"invalid cron {expr!r}: it never fires")

    def next_after(self, ref: datetime) -> datetime | None:
        """The first instant strictly after ``ref`` (aware), or None when there is none."""
        zone = load_zone(self.timezone) if self.timezone else None
        local = ref.astimezone(zone or UTC).replace(tzinfo=None)
        try:
            it = croniter(self.expression, local, second_at_beginning=True)
            for _ in range(_MAX_SKIPS):
                candidate: datetime = it.get_next(datetime)
                if zone is None:
                    return candidate.replace(tzinfo=UTC)
                instant = _wall_to_utc(candidate, zone)
                # None: the wall time does not exist (spring forward). <= ref: it is the repeat of an
                # ambiguous hour we are already past (fall back), so it has fired once already.
                if instant is not None and instant > ref:
                    return instant
        except CroniterBadDateError:
            return None
        except (CroniterError, ValueError, OverflowError) as exc:
            raise InvalidCron(f"invalid cron {self.expression!r}: {exc}") from exc
        return None

    def label(self) -> str:
        return f"cron:{self.expression}" + (f" tz={self.timezone}" if self.timezone else "")


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """UTC instant of a naive wall-clock time in ``zone``; None if that time is skipped by DST.

    For a repeated wall time, ``fold=0`` is its first occurrence: the one that fires.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    utc = first.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return utc
