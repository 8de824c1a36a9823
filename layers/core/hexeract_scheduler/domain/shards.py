"""Due-index shard numbers: the limit, and the ``all`` / ``N-M`` / ``N,M,...`` syntax that selects some.

A selection comes from people (``hexeract scheduler worker --shards``, the ``DISPATCHER_SHARDS``
variable), so it is checked against the limit before anything is built from it: ``0-3000000000``
is refused at once instead of materialising three billion shard numbers.
"""

from __future__ import annotations

from hexeract_scheduler.errors import ConfigError

# The most due-index shards a table may have (its shard numbers are 0 to MAX_SHARDS - 1).
MAX_SHARDS = 256
# The most dispatchers template.yaml deploys, one per DispatcherShardRanges entry (its slots are
# written by tools/dispatcher_slots.py from this number).
MAX_DISPATCHER_RANGES = 8

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


def parse_shard_ranges(text: str) -> tuple[tuple[int, ...] | None, ...]:
    """The dispatchers' ranges (``DISPATCHER_SHARD_RANGES``, template parameter
    ``DispatcherShardRanges``): ``all``, or comma-separated entries ``N-M`` or ``N``, one per
    dispatcher → each entry's shards (None for ``all``), in order.

    Only the syntax is checked here (an empty entry, at most ``MAX_DISPATCHER_RANGES`` entries,
    shard numbers below ``MAX_SHARDS``); :func:`check_partition` checks them against a table.
    """
    entries = [part.strip() for part in text.split(",")]
    if len(entries) > MAX_DISPATCHER_RANGES:
        raise ConfigError(
            f"{len(entries)} ranges in {text!r}: the template deploys at most {MAX_DISPATCHER_RANGES} dispatchers, "
            f"the shards of the others would be read by none"
        )
    ranges: list[tuple[int, ...] | None] = []
    for k, entry in enumerate(entries, 1):
        if not entry:
            raise ConfigError(f"entry {k} of {text!r} is empty: expected all, N-M or N")
        if entry != "all" and not entry.replace("-", "").replace(" ", "").isdigit():
            raise ConfigError(f"entry {k} of {text!r} is {entry!r}: expected all, N-M or N")
        ranges.append(parse_shards(entry))
    return tuple(ranges)


def check_partition(ranges: tuple[tuple[int, ...] | None, ...], shard_count: int) -> None:
    """Raise :class:`ConfigError` unless ``ranges`` (from :func:`parse_shard_ranges`) split shards
    ``0`` to ``shard_count - 1`` between them: every shard in exactly one range. ``all`` stands alone."""
    if any(r is None for r in ranges):
        if len(ranges) > 1:
            raise ConfigError("all is the range of a single dispatcher: list ranges such as 0-1,2-3 to split shards")
        return
    owner: dict[int, int] = {}
    for k, shards in enumerate(ranges, 1):
        assert shards is not None
        beyond = [s for s in shards if s >= shard_count]
        if beyond:
            raise ConfigError(
                f"range {k} ({format_shards(shards)}) has shards beyond SHARD_COUNT={shard_count} "
                f"(0-{shard_count - 1}): {format_shards(tuple(beyond))}"
            )
        for shard in shards:
            if shard in owner:
                raise ConfigError(f"ranges {owner[shard]} and {k} overlap on shard {shard}: one dispatcher per shard")
            owner[shard] = k
    missing = tuple(s for s in range(shard_count) if s not in owner)
    if missing:
        raise ConfigError(
            f"no range covers shard(s) {format_shards(missing)} of SHARD_COUNT={shard_count}: "
            f"their schedules would never be delivered"
        )
