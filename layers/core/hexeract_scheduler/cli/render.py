"""Text and JSON renderings of schedules for the ``hexeract`` command line.

JSON is the documented contract (docs/contracts.md#command-line): an array of
``ScheduleSnapshot.to_json()`` objects.
Text is for people: an aligned table, or ``key: value`` lines for one schedule. The payload is
never shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hexeract_scheduler.domain.clock import rfc3339
from hexeract_scheduler.domain.model import ScheduleSnapshot
from hexeract_scheduler.errors import one_line

LAST_ERROR_CHARS = 40
EMPTY = "-"


def shorten(text: str | None, width: int = LAST_ERROR_CHARS) -> str:
    """One line, at most ``width`` characters, an ellipsis where it was cut."""
    return one_line(text, width) if text else EMPTY


def to_json(snapshots: Sequence[ScheduleSnapshot]) -> str:
    return json.dumps([s.to_json() for s in snapshots], indent=2)


def table(snapshots: Sequence[ScheduleSnapshot], *, dead_letter: bool = False) -> str:
    """An aligned table, one schedule a row; a short line when there is nothing to show."""
    if not snapshots:
        return "no dead-lettered schedules" if dead_letter else "no pending or paused schedules"
    headers = ["SCHEDULE ID", "STATUS", "SCHEDULED FOR", "ATTEMPTS", "TRIGGER"]
    if dead_letter:
        headers.append("DEAD-LETTERED AT")
    headers.append("LAST ERROR")
    rows = []
    for s in snapshots:
        row = [
            str(s.schedule_id),
            s.status.label,
            rfc3339(s.scheduled_for),
            f"{s.attempts}/{s.max_attempts}",
            s.trigger,
        ]
        if dead_letter:
            row.append(rfc3339(s.dead_lettered_at) if s.dead_lettered_at else EMPTY)
        row.append(shorten(s.last_error))
        rows.append(row)
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [headers, *rows]]
    return "\n".join(lines)


def skipped_note(skipped: Sequence[tuple[str, str]]) -> str | None:
    """One line naming the unreadable items a listing left out (for stderr), or None."""
    if not skipped:
        return None
    shown = "; ".join(f"{key!r}: {reason}" for key, reason in skipped[:5])
    more = f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""
    return f"warning: skipped {len(skipped)} unreadable item(s): {shown}{more}"


def details(s: ScheduleSnapshot) -> str:
    """``key: value`` lines for ``inspect`` (everything stored but the payload)."""
    pairs = [
        ("schedule id", str(s.schedule_id)),
        ("status", s.status.label),
        ("scheduled for", rfc3339(s.scheduled_for)),
        ("attempts", f"{s.attempts}/{s.max_attempts}"),
        ("trigger", s.trigger),
        ("target", s.target),
        ("event type", s.event_type),
        ("last error", s.last_error or EMPTY),
    ]
    if s.leased_until is not None:
        pairs.append(("leased until", rfc3339(s.leased_until)))
    if s.dead_lettered_at is not None:
        pairs.append(("dead-lettered at", rfc3339(s.dead_lettered_at)))
    width = max(len(k) for k, _ in pairs) + 1
    return "\n".join(f"{(k + ':').ljust(width)} {v}" for k, v in pairs)
