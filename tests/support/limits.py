"""A memory guard for tests of inputs that must be refused before anything is allocated for them."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _mapped_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextmanager
def memory_headroom(megabytes: int = 1024) -> Iterator[None]:
    """While the block runs, this process may map at most ``megabytes`` more (Linux): code that
    would allocate gigabytes (a shard range of three billion numbers) fails with ``MemoryError``
    instead of exhausting the machine. Elsewhere, no limit."""
    if not sys.platform.startswith("linux"):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + megabytes * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
