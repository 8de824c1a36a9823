"""The ``hexeract`` command line (docs/contracts.md#command-line; the full reference is docs/cli.md).

::

    hexeract scheduler table create [--shards N]
    hexeract scheduler add (--at WHEN | --cron EXPR [--timezone TZ]) --target TARGET
                           [--payload JSON | --payload @FILE] [--event-type T] [--max-attempts N]
    hexeract scheduler list | inspect ID | pause ID | resume ID | cancel ID
    hexeract scheduler worker [--once | --for SECONDS]
    hexeract scheduler dead-letter list | replay ID

Every ``scheduler`` subcommand takes ``--conn`` (env ``HEXERACT_CONN``) and ``--table`` (env
``HEXERACT_TABLE``) or ``--stack`` (env ``HEXERACT_STACK``). Exit status: 0 success, 2 usage error
(click's), 130 Ctrl-C, 1 any other failure, reported as one ``error: ...`` line on stderr. Errors
are mapped to messages in one place: :meth:`HexeractGroup.invoke`.
"""

from __future__ import annotations

import json

import click

from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.aws.stack import stack_table_name
from hexeract_scheduler.cli import render
from hexeract_scheduler.cli.errors import CliError, HexeractGroup, Interrupted
from hexeract_scheduler.cli.options import (
    OPENED_KEY,
    Opened,
    StoreRef,
    format_option,
    limit_option,
    nothing_to,
    report_skipped,
    store_options,
)
from hexeract_scheduler.cli.parse import MAX_FOR_SECONDS, check_for_seconds, check_shards, parse_when, read_payload
from hexeract_scheduler.cli.worker import run_until_stopped, worker_logging
from hexeract_scheduler.domain.clock import Clock, SystemClock, rfc3339
from hexeract_scheduler.domain.model import ScheduledMessage, parse_schedule_id
from hexeract_scheduler.domain.shards import MAX_SHARDS
from hexeract_scheduler.engine.config import SchedulerWorkerConfig
from hexeract_scheduler.service.compose import build_dispatcher, build_store
from hexeract_scheduler.store.dynamo import DEFAULT_SHARDS, DEFAULT_TABLE, DynamoScheduleStore

# The CLI fails fast on an endpoint that does not answer: a person is waiting.
CLI_CONNECT_TIMEOUT = 3.0
CLI_READ_TIMEOUT = 30.0
CLI_RETRIES = 1
# The worker's clients: a request not answered within this is retried (the loop backs off).
WORKER_READ_TIMEOUT = 10.0
WORKER_RETRIES = 3

_clock: Clock = SystemClock()


# -- the store ---------------------------------------------------------------------------------


def clients_for(
    conn: str | None, *, retries: int = CLI_RETRIES, read_timeout: float = CLI_READ_TIMEOUT
) -> ClientFactory:
    return ClientFactory(
        Connection.parse(conn), connect_timeout=CLI_CONNECT_TIMEOUT, read_timeout=read_timeout, retries=retries
    )


def table_name(where: StoreRef, clients: ClientFactory) -> str:
    """The table ``--table`` names, or ``--stack``'s (read from its outputs), or the default one;
    remembered for the error message if it turns out to be missing."""
    table = stack_table_name(clients.cloudformation(), where.stack) if where.stack else where.table or DEFAULT_TABLE
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[OPENED_KEY] = Opened(table, where)
    return table


def open_store(where: StoreRef) -> DynamoScheduleStore:
    """The table a command works on; every command but ``table create`` uses it through the store
    contracts only."""
    clients = clients_for(where.conn)
    return build_store(table_name(where, clients), clients)


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
def table_create(shards: int, where: StoreRef) -> None:
    """Create the table and its indexes (idempotent), for a local or new setup: a stack's table is
    created by its deploy."""
    if where.stack:
        raise click.UsageError("table create takes --table, not --stack: a deployed stack creates its own table")
    store = open_store(where)
    created, recorded = store.create_table(shards)
    name = store.table_name
    if created:
        click.echo(f"created table {name} with {recorded} shards")
    else:
        note = "" if recorded == shards else f"; it keeps that count, not {shards}"
        click.echo(f"table {name} exists with {recorded} shards{note}")


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
    where: StoreRef,
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
    store = open_store(where)
    snapshot = store.insert(msg, now)
    click.echo(str(snapshot.schedule_id))


@scheduler.command("list")
@limit_option
@format_option
@store_options
def list_(limit: int, fmt: str, where: StoreRef) -> None:
    """Pending and paused schedules, soonest first."""
    snapshots = open_store(where).list_pending(limit)
    click.echo(render.to_json(snapshots) if fmt == "json" else render.table(snapshots))
    report_skipped(snapshots)


@scheduler.command()
@click.argument("schedule_id")
@format_option
@store_options
def inspect(schedule_id: str, fmt: str, where: StoreRef) -> None:
    """One schedule, as stored (never its payload)."""
    sid = parse_schedule_id(schedule_id)
    snapshot = open_store(where).inspect(sid)
    if snapshot is None:
        raise CliError(f"schedule {sid} not found")
    click.echo(render.to_json([snapshot]) if fmt == "json" else render.details(snapshot))


@scheduler.command()
@click.argument("schedule_id")
@store_options
def pause(schedule_id: str, where: StoreRef) -> None:
    """Stop claiming a pending schedule (a no-op on any other)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(where)
    if store.pause(sid):
        click.echo(f"paused {sid}")
    else:
        nothing_to(store, sid, "pause")


@scheduler.command()
@click.argument("schedule_id")
@store_options
def resume(schedule_id: str, where: StoreRef) -> None:
    """Resume a paused schedule (a cron one realigns to its next future instant)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(where)
    if store.resume(sid, _clock.now()):
        snapshot = store.inspect(sid)
        if snapshot is not None and snapshot.status.label == "pending":
            click.echo(f"resumed {sid}: next due at {rfc3339(snapshot.scheduled_for)}")
        else:
            click.echo(f"resumed {sid}: {snapshot.status.label if snapshot else 'gone'}")
    else:
        nothing_to(store, sid, "resume")


@scheduler.command()
@click.argument("schedule_id")
@store_options
def cancel(schedule_id: str, where: StoreRef) -> None:
    """Cancel a pending or paused schedule (a no-op on a finished one)."""
    sid = parse_schedule_id(schedule_id)
    store = open_store(where)
    if store.cancel(sid):
        click.echo(f"cancelled {sid}")
    else:
        nothing_to(store, sid, "cancel")


@scheduler.command()
@click.option("--once", is_flag=True, help="Run one poll cycle and exit.")
@click.option(
    "--for",
    "for_seconds",
    type=float,
    callback=check_for_seconds,
    metavar="SECONDS",
    help=f"Run this long (> 0, at most {MAX_FOR_SECONDS} s: 366 days), then exit (default: until Ctrl-C).",
)
@click.option(
    "--shards",
    default=None,
    callback=check_shards,
    metavar="all|N-M|N,M,...",
    help="Only these due-index shards (default all).",
)
@click.option("-v", "--verbose", is_flag=True, help="Also log every claim, send, retry and reschedule (with ids).")
@store_options
def worker(
    once: bool,
    for_seconds: float | None,
    shards: tuple[int, ...] | None,
    verbose: bool,
    where: StoreRef,
) -> None:
    """Run the dispatcher loop here; prints a one-line JSON summary when it stops."""
    if once and for_seconds is not None:
        raise click.UsageError("give at most one of --once and --for SECONDS")
    clients = clients_for(where.conn, retries=WORKER_RETRIES, read_timeout=WORKER_READ_TIMEOUT)
    table = table_name(where, clients)
    # hexeract's worker defaults; daemon threads, so a hung request never holds the exit.
    dispatcher = build_dispatcher(
        table, clients, SchedulerWorkerConfig(), read_shards=shards, clock=_clock, daemon_threads=True
    )
    with worker_logging(verbose), dispatcher as w:
        summary, interrupted = (w.run_once(), False) if once else run_until_stopped(w, for_seconds)
    click.echo(json.dumps(summary.as_dict()))
    if interrupted:  # stopped by Ctrl-C, which it reported when it came
        raise Interrupted("")


@scheduler.group("dead-letter")
def dead_letter() -> None:
    """Schedules whose last attempt failed."""


@dead_letter.command("list")
@limit_option
@format_option
@store_options
def dead_letter_list(limit: int, fmt: str, where: StoreRef) -> None:
    """Dead-lettered schedules, most recently dead-lettered first."""
    snapshots = open_store(where).list_dead_letter(limit)
    click.echo(render.to_json(snapshots) if fmt == "json" else render.table(snapshots, dead_letter=True))
    report_skipped(snapshots)


@dead_letter.command("replay")
@click.argument("schedule_id")
@store_options
def dead_letter_replay(schedule_id: str, where: StoreRef) -> None:
    """Make a dead-lettered schedule due now: attempts 0, last error cleared, same occurrence."""
    sid = parse_schedule_id(schedule_id)
    open_store(where).replay(sid, _clock.now())
    click.echo(f"replayed {sid}: due now")


if __name__ == "__main__":
    main(prog_name="hexeract")
