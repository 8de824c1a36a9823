"""The ``worker`` command's loop: logging to stderr, --for, Ctrl-C (exit 130), and a bounded stop."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from hexeract_scheduler.engine.summary import CycleSummary
from hexeract_scheduler.engine.worker import SchedulerWorker

STOP_GRACE_SECONDS = 3.0
STARTUP_TIMEOUT_SECONDS = 20.0


# The ids the core's log records carry (``extra=``), appended to each line in this order.
LOG_CONTEXT = ("schedule_id", "occurrence_id", "attempt", "item_key")


class ContextFormatter(logging.Formatter):
    """``time LEVEL message schedule_id=... occurrence_id=... attempt=N``: the ids a JSON log
    (Powertools, in Lambda) carries as fields, on the one line a person reads."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        context = " ".join(f"{key}={record.__dict__[key]}" for key in LOG_CONTEXT if key in record.__dict__)
        return f"{line} {context}" if context else line


@contextmanager
def worker_logging(verbose: bool) -> Iterator[None]:
    """The worker's log lines on stderr while the command runs: failures, dead letters and
    warnings; with ``verbose``, every claim, send, retry and reschedule too (DEBUG)."""
    logger = logging.getLogger("hexeract_scheduler")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ContextFormatter("%(asctime)s %(levelname)s %(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def run_until_stopped(w: SchedulerWorker, seconds: float | None) -> tuple[CycleSummary, bool]:
    """Run until ``seconds`` pass, Ctrl-C or SIGTERM: each finishes the current cycle (no AWS call
    awaited past the stop grace), then stops cleanly. Returns the summary, and whether Ctrl-C
    stopped it (the command then exits 130)."""
    # A stopping worker awaits no AWS call more than STOP_GRACE_SECONDS: a hung request must not
    # keep it running past --for (or past Ctrl-C).
    stop = functools.partial(w.stop, grace=STOP_GRACE_SECONDS)
    timer = threading.Timer(seconds, stop) if seconds is not None else None
    with stop_on_interrupt(stop) as signals:
        # A missing table fails here, not in the loop; a hung endpoint within the time asked for.
        startup = STARTUP_TIMEOUT_SECONDS if seconds is None else min(seconds, STARTUP_TIMEOUT_SECONDS)
        what = w.ready(timeout=startup)
        until = f"for {seconds:g}s" if seconds is not None else "until Ctrl-C"
        click.echo(f"worker polling {what} {until}", err=True)
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            if seconds is None:
                summary = w.run()
            else:
                summary = w.run(hard_deadline=w.clock.monotonic() + seconds + STOP_GRACE_SECONDS)
        finally:
            if timer is not None:
                timer.cancel()
    return summary, signal.SIGINT in signals


@contextmanager
def stop_on_interrupt(stop: Callable[[], None]) -> Iterator[list[int]]:
    """First Ctrl-C (or SIGTERM) asks the loop to stop; a second Ctrl-C interrupts at once. Yields
    the signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        click.echo("stopping after this cycle (Ctrl-C again to abort)", err=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop()

    old_int = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
