"""The dead-letter function's work: parse and validate its event, then list or replay.

Bad input raises a typed error (``InvalidRequest``, ``ScheduleNotFound``, ``NotReplayable``): Lambda
reports it as a FunctionError, and nothing was read or changed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hexeract_scheduler.domain.checks import is_int_in
from hexeract_scheduler.domain.clock import Clock
from hexeract_scheduler.domain.model import parse_schedule_id
from hexeract_scheduler.errors import InvalidInput
from hexeract_scheduler.store.contract import MAX_LIST_LIMIT, ScheduleAdmin

log = logging.getLogger("hexeract_scheduler")

DEFAULT_LIST_LIMIT = 50


class InvalidRequest(InvalidInput):
    """The dead-letter function's event is not a valid request; nothing was read or changed."""


@dataclass(frozen=True)
class ListDeadLetters:
    limit: int = DEFAULT_LIST_LIMIT


@dataclass(frozen=True)
class ReplayDeadLetter:
    schedule_id: uuid.UUID


DeadLetterRequest = ListDeadLetters | ReplayDeadLetter


def parse_dead_letter_request(event: Any) -> DeadLetterRequest:
    """``{"action": "list", "limit": N}`` (limit optional, 1-1000, default 50) or
    ``{"action": "replay", "schedule_id": "<uuid>"}``; anything else raises InvalidRequest."""
    if not isinstance(event, Mapping):
        raise InvalidRequest(f"expected a JSON object with an action, got {type(event).__name__}")
    action = event.get("action")
    if action == "list":
        _only(event, {"action", "limit"})
        limit = event.get("limit", DEFAULT_LIST_LIMIT)
        if not is_int_in(limit, 1, MAX_LIST_LIMIT):
            raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
        return ListDeadLetters(limit)
    if action == "replay":
        _only(event, {"action", "schedule_id"})
        raw = event.get("schedule_id")
        if not isinstance(raw, str):
            raise InvalidRequest(f"replay needs schedule_id, a UUID string, got {raw!r}")
        try:
            return ReplayDeadLetter(parse_schedule_id(raw))
        except InvalidInput as exc:
            raise InvalidRequest(str(exc)) from None
    raise InvalidRequest(f"unknown action {action!r}: expected list or replay")


def _only(event: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(str(k) for k in event if k not in allowed)
    if extra:
        raise InvalidRequest(f"unexpected field(s) for action {event['action']!r}: {', '.join(extra)}")


def handle_dead_letter(store: ScheduleAdmin, clock: Clock, event: Any) -> dict[str, Any]:
    """Serve one dead-letter request. Unknown id: ScheduleNotFound; not dead-lettered:
    NotReplayable; both change nothing."""
    request = parse_dead_letter_request(event)
    if isinstance(request, ListDeadLetters):
        listing = store.list_dead_letter(request.limit)
        response: dict[str, Any] = {"items": [s.to_json() for s in listing]}
        if listing.skipped:  # unreadable items: left out, named so an operator can fix them by hand
            response["skipped"] = [{"key": key, "reason": reason} for key, reason in listing.skipped]
        return response
    store.replay(request.schedule_id, clock.now())
    log.info("replayed a dead-lettered schedule", extra={"schedule_id": str(request.schedule_id)})
    return {"replayed": str(request.schedule_id)}
