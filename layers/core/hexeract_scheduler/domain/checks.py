"""The checks of values a user or a setting gives: an integer (never a bool) within bounds, text SQS accepts."""

from __future__ import annotations

import re

from hexeract_scheduler.errors import ConfigError, InvalidInput

# Characters outside what SQS accepts in a message body or attribute (SNS accepts a superset, and a
# topic may fan out to queues): one expression for the model and for the sinks.
SQS_INVALID_CHARS = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def is_int_in(value: object, minimum: int, maximum: int | None = None) -> bool:
    """``value`` is an ``int`` (``True`` is not a number here) from ``minimum`` to ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return minimum <= value and (maximum is None or value <= maximum)


def check_int(
    value: object,
    name: str,
    minimum: int,
    maximum: int | None = None,
    *,
    error: type[InvalidInput] = InvalidInput,
) -> int:
    """``value`` if ``is_int_in(value, minimum, maximum)``, else ``error`` naming it."""
    if not is_int_in(value, minimum, maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        message = f"{name} must be an integer {bounds}, got {value!r}"
        raise ConfigError(message, name) if issubclass(error, ConfigError) else error(message)
    assert isinstance(value, int)
    return value
