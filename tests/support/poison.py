"""Poison items: ways an item written by hand, a bug or a migration can be unreadable.

Each corruption maps a healthy item (as ``insert`` writes it, payload inline) to a bad one, with
the reason the worker must record when it quarantines it. (An item due under a lease in force is
not among them: a claim leaves ``due_at`` where it is, so that is an item in flight, claimed again
once its lease ends; tests/functional/test_poison.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Item = dict[str, Any]


def _drop(*names: str) -> Callable[[Item], Item]:
    return lambda item: {k: v for k, v in item.items() if k not in names}


def _set(**attrs: Any) -> Callable[[Item], Item]:
    return lambda item: {**item, **attrs}


def _payload_apart_but_missing(item: Item) -> Item:
    """The payload stored apart (as ``insert`` does for a large one), its item never written."""
    ref = {"S": f"{item['schedule_id']['S']}#payload"}
    return {**{k: v for k, v in item.items() if k != "payload"}, "payload_ref": ref}


CORRUPTIONS: dict[str, tuple[Callable[[Item], Item], str]] = {
    "schedule_id not a UUID": (_set(schedule_id={"S": "not-a-uuid"}), "schedule_id is not a UUID"),
    "missing attempts": (_drop("attempts"), "missing attempts"),
    "missing max_attempts": (_drop("max_attempts"), "missing max_attempts"),
    "attempts not a number": (_set(attempts={"S": "one"}), "attempts is not of type N"),
    "missing payload": (_drop("payload"), "missing payload"),
    "string payload": (_set(payload={"S": "{}"}), "payload is not of type B"),
    "payload item missing": (_payload_apart_but_missing, "payload item missing"),
    "payload_ref not a string": (_set(payload_ref={"N": "1"}), "payload_ref is not of type S"),
    "missing scheduled_for": (_drop("scheduled_for"), "missing scheduled_for"),
    "missing event_type": (_drop("event_type"), "missing event_type"),
    "missing trigger_kind": (_drop("trigger_kind"), "missing trigger_kind"),
    "unknown status": (_set(status={"S": "frozen"}), "unknown status 'frozen'"),
    "delivered but still due": (_set(status={"S": "delivered"}), "status delivered in a due partition"),
    "target no longer parses": (_set(target={"S": "kafka:orders"}), "stored target no longer parses"),
    "cron no longer parses": (
        _set(trigger_kind={"S": "cron"}, cron={"S": "61 * * * *"}),
        "stored cron no longer parses",
    ),
    "zone no longer parses": (
        _set(trigger_kind={"S": "cron"}, cron={"S": "* * * * *"}, tz={"S": "Mars/Olympus"}),
        "stored cron no longer parses",
    ),
}
