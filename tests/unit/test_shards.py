"""parse_shards: the ``all`` / ``N-M`` / ``N,M,...`` syntax, checked against the limit before anything is built."""

from __future__ import annotations

import pytest

from hexeract_scheduler.domain.shards import MAX_SHARDS, parse_shards
from hexeract_scheduler.errors import ConfigError

from ..support.limits import memory_headroom


@pytest.mark.parametrize(
    ("text", "shards"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("all", None),
        ("*", None),
        ("0-3", (0, 1, 2, 3)),
        ("0,2,5", (0, 2, 5)),
        ("5,1,1", (1, 5)),
        ("0-1, 4, 3-3", (0, 1, 3, 4)),
        ("0-255", tuple(range(256))),
        (" 2 - 4 ", (2, 3, 4)),
    ],
)
def test_accepted(text, shards):
    assert parse_shards(text) == shards


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "expected all, N-M or N,M,..."),
        ("3-", "expected all, N-M or N,M,..."),
        ("-1", "expected all, N-M or N,M,..."),
        ("1,,2", "expected all, N-M or N,M,..."),
        ("1-2-3", "expected all, N-M or N,M,..."),
        ("1--2", "expected all, N-M or N,M,..."),
        ("3-1", "3-1 ends before it starts"),
        ("0,5-2", "5-2 ends before it starts"),
        ("256", "shard 256 is out of range (shard numbers are 0 to 255)"),
        ("0-256", "shard 256 is out of range (shard numbers are 0 to 255)"),
        ("0-3000000000", "shard 3000000000 is out of range (shard numbers are 0 to 255)"),
        ("1,300000000", "shard 300000000 is out of range (shard numbers are 0 to 255)"),
        ("9" * 5000, "expected all, N-M or N,M,..."),  # more digits than int() reads
    ],
)
def test_refused_naming_the_text_before_anything_is_allocated(text, message):
    with memory_headroom(), pytest.raises(ConfigError) as info:
        parse_shards(text)
    assert str(info.value) == f"invalid shard range {text!r}: {message}"


def test_a_lower_limit():
    assert parse_shards("0-3", limit=4) == (0, 1, 2, 3)
    with pytest.raises(ConfigError, match=r"shard 4 is out of range \(shard numbers are 0 to 3\)"):
        parse_shards("0-4", limit=4)


def test_the_limit_is_256():
    assert MAX_SHARDS == 256
