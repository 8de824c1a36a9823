"""Domain policy that stores apply: where a resumed schedule goes.

Kept beside the domain (hexeract keeps it in its control module) so that every store applies the
same rule to the instant it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .model import Trigger


@dataclass(frozen=True, slots=True)
class Resumed:
    """Where a paused schedule resumes: due at ``due`` (None: no future instant, so the schedule
    is finished: ``delivered``), with a fresh attempt budget and no last error if ``fresh``."""

    due: datetime | None
    fresh: bool = False


def resumed_instant(trigger: Trigger, scheduled_for: datetime, now: datetime) -> Resumed:
    """A one-shot keeps its instant (due at once if it passed). A cron schedule whose stored
    instant passed while it was paused realigns to its first instant strictly after ``now``: the
    missed occurrence is not caught up, and the new one starts with a fresh budget."""
    if not trigger.is_recurring or scheduled_for >= now:
        return Resumed(scheduled_for)
    return Resumed(trigger.next_after(now), fresh=True)
