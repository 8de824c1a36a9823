"""Due-index shard numbers: the limit, and the ``all`` / ``N-M`` / ``N,M,...`` syntax that selects some.

A selection comes from people (``hexeract scheduler worker --shards``, the ``DISPATCHER_SHARDS``
variable), so it is checked against the limit before anything is built from it: ``0-3000000000``
is refused at once instead of materialising three billion shard numbers.
"""

from __future__ import annotations

from .errors import ConfigError

# The most due-index shards a table may have (its shard numbers are 0 to MAX_SHARDS - 1).
MAX_SHARDS = 256

_SYNTAX = "expected all, N-M or N,M,..."


def parse_shards(text: str | None, *, limit: int = MAX_SHARDS) -> tuple[int, ...] | None:
    """``None``, empty, ``"all"`` or ``"*"`` → None (every shard); ``"0-3"`` → (0, 1, 2, 3);
    ``"0,2,5"`` → (0, 2, 5); mixes such as ``"0-1,4"``. Sorted, without duplicates.

    Raises :class:`ConfigError` naming ``text`` for a malformed selection, a range whose end is
    before its start, or a shard number ``>= limit``; every number is checked before any range is
    expanded.
    """
    if text is None or text.strip() in ("", "all", "*"):
        return None
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        lo_text, sep, hi_text = part.strip().partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if sep else lo
        except ValueError:
            raise ConfigError(f"invalid shard range {text!r}: {_SYNTAX}") from None
        if lo < 0 or hi < 0:
            raise ConfigError(f"invalid shard range {text!r}: {_SYNTAX}")
        if hi < lo:
            raise ConfigError(f"invalid shard range {text!r}: {lo}-{hi} ends before it starts")
        if hi >= limit:
            raise ConfigError(
                f"invalid shard range {text!r}: shard {hi} is out of range (shard numbers are 0 to {limit - 1})"
            )
        ranges.append((lo, hi))
    return tuple(sorted({shard for lo, hi in ranges for shard in range(lo, hi + 1)}))


def format_shards(shards: tuple[int, ...]) -> str:
    """``0-3`` for a run of shards, else ``0,2,5``."""
    if shards and list(shards) == list(range(shards[0], shards[-1] + 1)):
        return f"{shards[0]}-{shards[-1]}" if len(shards) > 1 else str(shards[0])
    return ",".join(map(str, shards))
