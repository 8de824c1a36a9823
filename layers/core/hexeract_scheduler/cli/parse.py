"""What a person types on the command line, parsed or refused with one line that names it:
``--at`` instants, ``--payload`` bodies, ``--for`` durations and ``--shards`` selections."""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.shards import parse_shards
from hexeract_scheduler.errors import ConfigError, InvalidInput

# worker --for: at most a leap year (omit it to run until stopped).
MAX_FOR_SECONDS = 366 * 86400

_RELATIVE = re.compile(r"^\+((?:\d+(?:ms|s|m|h|d))+)$")
_RELATIVE_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(text: str, now: datetime) -> datetime:
    """``now``, a delay from now (``+30s``, ``+5m``, ``+1h30m``, ``+2d``; units ms s m h d), or an
    RFC 3339 / ISO 8601 instant with a UTC offset or ``Z`` (a naive time is refused: it is
    ambiguous)."""
    value = text.strip()
    if value.lower() == "now":
        return now
    rel = _RELATIVE.match(value.replace(" ", ""))
    if rel:
        try:
            seconds = sum(int(n) * _UNITS[u] for n, u in _RELATIVE_PART.findall(rel.group(1)))
            return now + timedelta(seconds=seconds)
        except (OverflowError, ValueError):  # past datetime's year 9999, or too many digits for int()
            raise InvalidInput(f"invalid --at {text!r}: too far in the future (the latest is year 9999)") from None
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"invalid --at {text!r}: expected an RFC 3339 instant with an offset (2026-12-02T10:00:00Z), "
            "now, or a delay such as +30s, +5m, +1h30m"
        ) from None
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise InvalidInput(f"invalid --at {text!r}: no UTC offset; add Z or +HH:MM (e.g. {value}Z)")
    try:
        return instant.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is in year 0 in UTC
        raise InvalidInput(f"invalid --at {text!r}: not an instant between years 1 and 9999 in UTC") from None


def read_payload(value: str) -> bytes:
    """``--payload``: inline JSON, ``@FILE`` (the file's bytes) or ``@-`` (standard input). The
    bytes must be JSON; they are delivered as given, never re-serialised."""
    if value.startswith("@"):
        name = value[1:]
        if name == "-":
            data = sys.stdin.buffer.read()
        else:
            try:
                data = Path(name).read_bytes()
            except OSError as exc:
                raise InvalidInput(f"cannot read payload file {name!r}: {exc.strerror or exc}") from None
    else:
        try:
            # An argument that is not UTF-8 reaches Python with its bytes as surrogate escapes.
            data = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise InvalidInput("--payload is not UTF-8 text: it holds a lone surrogate") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"--payload is not UTF-8 text: byte {data[exc.start]:#04x} at position {exc.start} (SQS and SNS "
            "message bodies are text)"
        ) from None
    try:
        json.loads(text.removeprefix("\ufeff"), parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidInput(f"--payload is not valid JSON: {exc}") from None
    return data


def _no_constant(name: str) -> Any:
    """``json.loads`` accepts NaN, Infinity and -Infinity; JSON (RFC 8259) has no such values."""
    raise ValueError(f"{name} is not a JSON value (JSON has no NaN or infinite numbers)")


def check_for_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """``--for``: a finite number of seconds > 0 (NaN would stop at once, inf never)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_FOR_SECONDS):
        raise click.BadParameter(f"expected a number of seconds > 0 and <= {MAX_FOR_SECONDS}, got {value!r}")
    return value


def check_shards(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """``--shards``: checked against the most shards a table may have before anything is built."""
    try:
        return parse_shards(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None
