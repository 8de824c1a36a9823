"""The one check of an integer a user or a setting gives: an int (never a bool), within bounds."""

from __future__ import annotations

from .errors import InvalidInput


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
        raise error(f"{name} must be an integer {bounds}, got {value!r}")
    assert isinstance(value, int)
    return value
