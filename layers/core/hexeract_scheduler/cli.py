"""The ``hexeract`` command line (docs/contracts.md#command-line; the full reference is docs/cli.md).

::

    hexeract scheduler table create [--shards N]
    hexeract scheduler add (--at WHEN | --cron EXPR [--timezone TZ]) --target TARGET
                           [--payload JSON | --payload @FILE] [--event-type T] [--max-attempts N]
    hexeract scheduler list | inspect ID | pause ID | resume ID | cancel ID
    hexeract scheduler worker [--once | --for SECONDS]
    hexeract scheduler dead-letter list | replay ID

Every ``scheduler`` subcommand takes ``--conn`` (env ``HEXERACT_CONN``) and ``--table`` (env
``HEXERACT_TABLE``). Exit status: 0 success, 2 usage error (click's), 1 any other failure, reported
as one ``error: ...`` line on stderr. Errors are mapped to messages in one place:
:meth:`HexeractGroup.invoke`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
from botocore.exceptions import BotoCoreError, ClientError

from . import cli_format
from .aws import ClientFactory, Connection, translate
from .clock import UTC, Clock, SystemClock, rfc3339
from .errors import ConfigError, HexeractError, InvalidInput, TableMissing
from .model import ScheduledMessage, parse_schedule_id
from .shards import parse_shards
from .sinks import Dispatcher
from .store import DEFAULT_SHARDS, DEFAULT_TABLE, MAX_LIST_LIMIT, MAX_SHARDS, DynamoScheduleStore, Listing
from .worker import CycleSummary, DaemonExecutor, SchedulerWorker, SchedulerWorkerConfig

F = TypeVar("F", bound=Callable[..., Any])

# The CLI fails fast on an endpoint that does not answer: a person is waiting.
CLI_CONNECT_TIMEOUT = 3.0
CLI_READ_TIMEOUT = 30.0
CLI_RETRIES = 1
STOP_GRACE_SECONDS = 3.0
# The worker's clients: a request not answered within this is retried (the loop backs off).
WORKER_READ_TIMEOUT = 10.0
STARTUP_TIMEOUT_SECONDS = 20.0
WORKER_RETRIES = 3
# worker --for: at most a leap year (omit it to run until stopped).
MAX_FOR_SECONDS = 366 * 86400
_TABLE_KEY = "hexeract.table"

_clock: Clock = SystemClock()


# -- errors: one place ----------------------------------------------------------------------


class CliError(click.ClickException):
    """A failure that is not a usage error: one ``error: ...`` line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


def one_line(text: str) -> str:
    return " ".join(str(text).split()) or "unknown error"


class HexeractGroup(click.Group):
    """The root group: turns every error a command raises into :class:`CliError` (exit 1).

    Usage errors (``click.UsageError``, exit 2), ``--help`` and Ctrl-C pass through to click.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, KeyboardInterrupt, EOFError):
            raise
        except TableMissing as exc:
            table = ctx.meta.get(_TABLE_KEY)
            if table is None:
                raise CliError(one_line(str(exc))) from None
            raise CliError(f"table {table} does not exist: run `hexeract scheduler table create`") from None
        except HexeractError as exc:
            raise CliError(one_line(str(exc))) from None
        except (ClientError, BotoCoreError) as exc:
            raise CliError(one_line(str(translate(exc, "AWS request")))) from None
        except OSError as exc:
            raise CliError(one_line(str(exc))) from None
        except Exception as exc:  # a bug still gets one line, not a traceback
            raise CliError(one_line(f"unexpected {type(exc).__name__}: {exc}")) from None


# -- shared options -------------------------------------------------------------------------


def store_options(fn: F) -> F:
    """``--conn`` and ``--table``, on every leaf command of ``scheduler``."""
    fn = click.option(
        "--table",
        envvar="HEXERACT_TABLE",
        default=DEFAULT_TABLE,
        show_default=True,
        show_envvar=True,
        help="Name of the schedules table.",
    )(fn)
    fn = click.option(
        "--conn",
        envvar="HEXERACT_CONN",
        default=None,
        metavar="URL|aws|aws://REGION",
        show_envvar=True,
        help="A local endpoint URL for DynamoDB, SQS and SNS (http://127.0.0.1:5000), or real AWS "
        "(aws, aws://REGION; default credential chain). Default: aws.",
    )(fn)
    return fn


def format_option(fn: F) -> F:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="text for people, json for scripts (an array of schedule objects).",
    )(fn)


def limit_option(fn: F) -> F:
    return click.option(
        "--limit",
        type=click.IntRange(min=1, max=MAX_LIST_LIMIT),
        default=50,
        show_default=True,
        help="At most this many schedules.",
    )(fn)


def clients_for(
    conn: str | None, *, retries: int = CLI_RETRIES, read_timeout: float = CLI_READ_TIMEOUT
) -> ClientFactory:
    return ClientFactory(
        Connection.parse(conn), connect_timeout=CLI_CONNECT_TIMEOUT, read_timeout=read_timeout, retries=retries
    )


def open_store(conn: str | None, table: str, clients: ClientFactory | None = None) -> DynamoScheduleStore:
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_TABLE_KEY] = table  # for the error message if the table is missing
    clients = clients or clients_for(conn)
    return DynamoScheduleStore(table, dynamodb=clients.dynamodb())


# -- WHEN and payload -----------------------------------------------------------------------

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


# -- the commands ---------------------------------------------------------------------------


@click.group(cls=HexeractGroup, name="hexeract", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hexeract-scheduler", prog_name="hexeract")
def main() -> None:
    """hexeract: at-least-once scheduled delivery to SQS and SNS from DynamoDB."""


@main.group()
def scheduler() -> None:
    """Create, inspect and run schedules."""


@scheduler.group()
def table() -> None:
    """The schedules table."""


@table.command("create")
@click.option(
    "--shards",
    type=click.IntRange(1, MAX_SHARDS),
    default=DEFAULT_SHARDS,
    show_default=True,
    help="Due-index shards (fixed at creation; an existing table keeps its count).",
)
@store_options
def table_create(shards: int, conn: str | None, table: str) -> None:
    """Create the table and its indexes (idempotent)."""
    store = open_store(conn, table)
    created, recorded = store.create_table(shards)
    if created:
        click.echo(f"created table {table} with {recorded} shards")
    else:
        note = "" if recorded == shards else f"; it keeps that count, not {shards}"
        click.echo(f"table {table} exists with {recorded} shards{note}")


@scheduler.command("add")
@click.option("--at", "at", metavar="WHEN", help="One-shot: RFC 3339 instant with offset or Z, now, or +30s/+5m/+1h.")
@click.option("--cron", metavar="EXPR", help="Recurring: 5 fields, 6 with leading seconds, or @hourly/@daily/...")
@click.option("--timezone", metavar="TZ", help="IANA zone the cron expression follows (default UTC). Needs --cron.")
@click.option("--target", required=True, metavar="TARGET", help="sqs:<queue URL or ARN> or sns:<topic ARN>.")
@click.option("--payload", default="{}", show_default=True, metavar="JSON|@FILE", help="Message body (JSON).")
@click.option("--event-type", default="scheduled", show_default=True, help="The event_type message attribute.")
@click.option("--max-attempts", type=int, default=5, show_default=True, help="Attempts per occurrence (>= 1).")
@store_options
def add(
    at: str | None,
    cron: str | None,
    timezone: str | None,
    target: str,
    payload: str,
    event_type: str,
    max_attempts: int,
    conn: str | None,
    table: str,
) -> None:
    """Add a schedule; prints its id."""
    if (at is None) == (cron is None):
        raise click.UsageError("give exactly one of --at WHEN or --cron EXPR")
    if timezone is not None and cron is None:
        raise click.UsageError("--timezone applies to --cron only (an --at instant carries its own offset)")
    body = read_payload(payload)
    now = _clock.now()
    if at is not None:
        msg = ScheduledMessage.delay(
            target, at=parse_when(at, now), payload=body, event_type=event_type, max_attempts=max_attempts
        )
    else:
        assert cron is not None
        msg = ScheduledMessage.cron(
            target, cron, timezone=timezone, payload=body, event_type=event_type, max_attempts=max_attempts
        )
    store = open_store(conn, table)
    snapshot = store.insert(msg, now)
    click.echo(str(snapshot.schedule_id))


@scheduler.command("list")
@limit_option
@format_option
@store_options
def list_(limit: int, fmt: str, conn: str | None, table: str) -> None:
    """Pending and paused schedules, soonest first."""
    snapshots = open_store(conn, table).list_pending(limit)
    click.echo(cli_format.to_json(snapshots) if fmt == "json" else cli_format.table(snapshots))
    _report_skipped(snapshots)


def _report_skipped(listing: Listing) -> None:
    note = cli_format.skipped_note(listing.skipped)
    if note:
        click.echo(note, err=True)


@scheduler.command()
@click.argument("schedule_id")
@format_option
@store_options
def inspect(schedule_id: str, fmt: str, conn: str | None, table: str) -> None:
    """One schedule, as stored (never its payload)."""
    sid = parse_schedule_id(schedule_id)
    snapshot = open_store(conn, table).inspect(sid)
    if snapshot is None:
        raise CliError(f"schedule {sid} not found")
    click.echo(cli_format.to_json([snapshot]) if fmt == "json" else cli_format.details(snapshot))


def _nothing_to(store: DynamoScheduleStore, sid: Any, verb: str) -> None:
    snapshot = store.inspect(sid)
    status = snapshot.status.label if snapshot else "gone"
    click.echo(f"{sid} is {status}: nothing to {verb}")


@scheduler.command()
@click.argument("schedule_id")
@store_options
def pause(schedule_id: str, conn: str | None, table: str) -> None:
    """Stop claiming a pending schedule (a no-op on any other)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(conn, table)
    if store.pause(sid):
        click.echo(f"paused {sid}")
    else:
        _nothing_to(store, sid, "pause")


@scheduler.command()
@click.argument("schedule_id")
@store_options
def resume(schedule_id: str, conn: str | None, table: str) -> None:
    """Resume a paused schedule (a cron one realigns to its next future instant)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(conn, table)
    if store.resume(sid, _clock.now()):
        snapshot = store.inspect(sid)
        if snapshot is not None and snapshot.status.label == "pending":
            click.echo(f"resumed {sid}: next due at {rfc3339(snapshot.scheduled_for)}")
        else:
            click.echo(f"resumed {sid}: {snapshot.status.label if snapshot else 'gone'}")
    else:
        _nothing_to(store, sid, "resume")


@scheduler.command()
@click.argument("schedule_id")
@store_options
def cancel(schedule_id: str, conn: str | None, table: str) -> None:
    """Cancel a pending or paused schedule (a no-op on a finished one)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(conn, table)
    if store.cancel(sid):
        click.echo(f"cancelled {sid}")
    else:
        _nothing_to(store, sid, "cancel")


def _for_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """``--for``: a finite number of seconds > 0 (NaN would stop at once, inf never)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_FOR_SECONDS):
        raise click.BadParameter(f"expected a number of seconds > 0 and <= {MAX_FOR_SECONDS}, got {value!r}")
    return value


def _shards(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """``--shards``: checked against the most shards a table may have before anything is built."""
    try:
        return parse_shards(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


@scheduler.command()
@click.option("--once", is_flag=True, help="Run one poll cycle and exit.")
@click.option(
    "--for",
    "for_seconds",
    type=float,
    callback=_for_seconds,
    metavar="SECONDS",
    help=f"Run this long (> 0, at most {MAX_FOR_SECONDS} s: 366 days), then exit (default: until Ctrl-C).",
)
@click.option(
    "--shards",
    default=None,
    callback=_shards,
    metavar="all|N-M|N,M,...",
    help="Only these due-index shards (default all).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every retry and acknowledgement (INFO).")
@store_options
def worker(
    once: bool,
    for_seconds: float | None,
    shards: tuple[int, ...] | None,
    verbose: bool,
    conn: str | None,
    table: str,
) -> None:
    """Run the dispatcher loop here; prints a one-line JSON summary when it stops."""
    if once and for_seconds is not None:
        raise click.UsageError("give at most one of --once and --for SECONDS")
    config = SchedulerWorkerConfig(shards=shards)
    clients = clients_for(conn, retries=WORKER_RETRIES, read_timeout=WORKER_READ_TIMEOUT)
    store = open_store(conn, table, clients)
    pool = DaemonExecutor(config.concurrency)  # a hung request never holds the exit
    try:
        with (
            _worker_logging(verbose),
            SchedulerWorker(store, Dispatcher.for_clients(clients), config, clock=_clock, executor=pool) as w,
        ):
            summary = w.run_once() if once else _run_until_stopped(w, for_seconds)
    finally:
        pool.shutdown()
    click.echo(json.dumps(summary.as_dict()))


@contextmanager
def _worker_logging(verbose: bool) -> Iterator[None]:
    """The worker's log lines (retries, dead letters) on stderr while the command runs."""
    logger = logging.getLogger("hexeract_scheduler")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _run_until_stopped(w: SchedulerWorker, seconds: float | None) -> CycleSummary:
    """Run until ``seconds`` pass or Ctrl-C: both finish the current cycle, then stop cleanly."""
    # A stopping worker awaits no AWS call more than STOP_GRACE_SECONDS: a hung request must not
    # keep it running past --for (or past Ctrl-C).
    stop = functools.partial(w.stop, grace=STOP_GRACE_SECONDS)
    timer = threading.Timer(seconds, stop) if seconds is not None else None
    with _stop_on_interrupt(stop):
        # A missing table fails here, not in the loop; a hung endpoint within the time asked for.
        startup = STARTUP_TIMEOUT_SECONDS if seconds is None else min(seconds, STARTUP_TIMEOUT_SECONDS)
        shards = w.resolve_shards(timeout=startup)
        until = f"for {seconds:g}s" if seconds is not None else "until Ctrl-C"
        click.echo(f"worker polling {w.store.table_name} (shards {_ranges(shards)}) {until}", err=True)
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            if seconds is None:
                return w.run()
            return w.run(hard_deadline=w.clock.monotonic() + seconds + STOP_GRACE_SECONDS)
        finally:
            if timer is not None:
                timer.cancel()


def _ranges(shards: tuple[int, ...]) -> str:
    if shards and list(shards) == list(range(shards[0], shards[-1] + 1)):
        return f"{shards[0]}-{shards[-1]}" if len(shards) > 1 else str(shards[0])
    return ",".join(map(str, shards))


@contextmanager
def _stop_on_interrupt(stop: Callable[[], None]) -> Iterator[None]:
    """First Ctrl-C (or SIGTERM) asks the loop to stop; a second one interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        click.echo("stopping after this cycle (Ctrl-C again to abort)", err=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop()

    old_int = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


@scheduler.group("dead-letter")
def dead_letter() -> None:
    """Schedules whose last attempt failed."""


@dead_letter.command("list")
@limit_option
@format_option
@store_options
def dead_letter_list(limit: int, fmt: str, conn: str | None, table: str) -> None:
    """Dead-lettered schedules, most recently dead-lettered first."""
    snapshots = open_store(conn, table).list_dead_letter(limit)
    if fmt == "json":
        click.echo(cli_format.to_json(snapshots, dead_letter=True))
    else:
        click.echo(cli_format.table(snapshots, dead_letter=True))
    _report_skipped(snapshots)


@dead_letter.command("replay")
@click.argument("schedule_id")
@store_options
def dead_letter_replay(schedule_id: str, conn: str | None, table: str) -> None:
    """Make a dead-lettered schedule due now: attempts 0, last error cleared, same occurrence."""
    sid = parse_schedule_id(schedule_id)
    open_store(conn, table).replay(sid, _clock.now())
    click.echo(f"replayed {sid}: due now")


if __name__ == "__main__":
    main(prog_name="hexeract")
