"""Running AWS calls concurrently, under a deadline when there is one.

boto3 clients are thread-safe, so a worker's claims, sends and acks run on a thread pool. Under a
deadline a call that has not answered is abandoned, never awaited past it: the caller's deadline
wins over a hung request, and at-least-once delivery covers the abandoned call (a claim left
unanswered expires unsent; an ack left unanswered lets the lease expire).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any, Generic, TypeVar

from hexeract_scheduler.errors import RetryableError

T = TypeVar("T")

# How often a wait under a deadline looks at the time left again.
WAIT_SLICE_SECONDS = 0.25


def map_concurrently(
    executor: Executor | None,
    fn: Callable[[Any], T],
    items: Sequence[Any],
    *,
    time_left: Callable[[], float | None] | None = None,
    late: Callable[[Any], T] | None = None,
) -> list[T]:
    """``fn`` over ``items`` on the pool, results in order (inline for 0 or 1 item, no deadline).

    With ``time_left`` (seconds left, or None for no limit yet, asked again every quarter second
    so a deadline set meanwhile, e.g. by a stop, applies), an item whose call has not returned
    when no time is left gives ``late(item)`` (which may raise); its call is left to finish on its
    own: the caller's deadline wins over a hung request.
    """
    if executor is None or (time_left is None and len(items) <= 1):
        return [fn(i) for i in items]
    if time_left is None:
        return list(executor.map(fn, items))
    futures = [executor.submit(fn, i) for i in items]
    pending = set(futures)
    while pending:
        left = time_left()
        if left is not None and left <= 0:
            break
        _, pending = wait(pending, timeout=WAIT_SLICE_SECONDS if left is None else min(left, WAIT_SLICE_SECONDS))
    out: list[T] = []
    for item, future in zip(items, futures, strict=True):
        if future.done():
            out.append(future.result())
        else:
            future.cancel()
            assert late is not None, "a deadline needs a late() result"
            out.append(late(item))
    return out


def no_answer(what: str) -> Callable[[Any], Any]:
    def late(_: Any) -> Any:
        raise RetryableError(f"{what}: no answer within the time left")

    return late


class DaemonExecutor(Executor):
    """A fixed pool of daemon threads: unlike ``ThreadPoolExecutor``'s, they never hold the process
    at exit. A stopping command-line worker exits on time even while a hung request waits out its
    read timeout: that request is abandoned, which at-least-once delivery covers (its lease
    expires and the occurrence is claimed again)."""

    def __init__(self, workers: int, name: str = "hexeract") -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None]
        self._queue = queue.SimpleQueue()
        self._workers = workers
        for i in range(workers):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in range(self._workers):
            self._queue.put(None)

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            future, fn, args, kwargs = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)


class InFlight(Generic[T]):
    """Work submitted to lane threads and not yet collected (a worker's batches being sent and
    acked while its next claim runs), each with the keys it holds.

    Waits are bounded by ``time_left`` like every other wait under a deadline: past it, work still
    running is abandoned to finish on its own (each lane bounds its own calls by the same time).
    """

    def __init__(self, pool: Executor, time_left: Callable[[], float | None]) -> None:
        self._pool = pool
        self._time_left = time_left
        self._running: dict[Future[T], frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self._running)

    def keys(self) -> frozenset[str]:
        return frozenset().union(*self._running.values())

    def submit(self, keys: frozenset[str], fn: Callable[..., T], *args: Any) -> None:
        self._running[self._pool.submit(fn, *args)] = keys

    def collect(self, on_done: Callable[[T], None]) -> int:
        """Hand the results of finished work to ``on_done``; returns how many."""
        done = [f for f in self._running if f.done()]
        for future in done:
            del self._running[future]
            on_done(future.result())
        return len(done)

    def wait_one(self) -> None:
        """Wait (a slice at most) until some work finishes."""
        left = self._time_left()
        if self._running and (left is None or left > 0):
            wait(self._running, timeout=WAIT_SLICE_SECONDS, return_when=FIRST_COMPLETED)

    def drain(self, on_done: Callable[[T], None]) -> int:
        """Wait for all of it, within the time left (one more slice past it), then abandon the rest."""
        count = 0
        grace = False
        while self._running:
            count += self.collect(on_done)
            left = self._time_left()
            if left is not None and left <= 0:
                if grace:
                    break
                grace = True
            timeout = WAIT_SLICE_SECONDS if left is None or left <= 0 else min(left, WAIT_SLICE_SECONDS)
            wait(self._running, timeout=timeout, return_when=FIRST_COMPLETED)
        count += self.collect(on_done)
        self._running.clear()
        return count
