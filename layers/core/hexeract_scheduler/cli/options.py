"""The options several commands share (where the schedules are, ``--format``, ``--limit``) and the
small outputs they share."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from hexeract_scheduler.aws.stack import TABLE_OUTPUT
from hexeract_scheduler.cli.commands import render
from hexeract_scheduler.store.contract import MAX_LIST_LIMIT, Listing, ScheduleAdmin

F = TypeVar("F", bound=Callable[..., Any])
OPENED_KEY = "hexeract.opened"  # ctx.meta: the table a command opened, for the missing-table message


@dataclass(frozen=True)
class StoreRef:
    """Where a command's schedules are: ``--conn``, and ``--table`` or ``--stack`` (at most one;
    neither: the local default table)."""

    conn: str | None = None
    table: str | None = None
    stack: str | None = None

    @property
    def local(self) -> bool:
        return (self.conn or "").strip().startswith(("http://", "https://"))


@dataclass(frozen=True)
class Opened:
    """The table a command opened, and how it was named (for the missing-table message)."""

    table: str
    where: StoreRef


def store_options(fn: F) -> F:
    """``--conn``, and ``--table`` or ``--stack``, on every leaf command of ``scheduler``: the
    command receives them as one ``where: StoreRef``."""

    @functools.wraps(fn)
    def command(*args: Any, conn: str | None, table: str | None, stack: str | None, **kwargs: Any) -> Any:
        if table is not None and stack is not None:
            raise click.UsageError("give at most one of --table (HEXERACT_TABLE) and --stack (HEXERACT_STACK)")
        return fn(*args, where=StoreRef(conn, table, stack), **kwargs)

    options = [
        click.option(
            "--stack",
            envvar="HEXERACT_STACK",
            default=None,
            metavar="NAME",
            show_envvar=True,
            help=f"A deployed stack: its table is the one its dispatcher reads (output {TABLE_OUTPUT}). "
            "Not with --table.",
        ),
        click.option(
            "--table",
            envvar="HEXERACT_TABLE",
            default=None,
            metavar="NAME",
            show_envvar=True,
            help="Name of the schedules table. Default: hexeract-schedules (a local setup's).",
        ),
        click.option(
            "--conn",
            envvar="HEXERACT_CONN",
            default=None,
            metavar="URL|aws|aws://REGION",
            show_envvar=True,
            help="A local endpoint URL for DynamoDB, SQS, SNS and CloudFormation (http://127.0.0.1:5000), "
            "or real AWS (aws, aws://REGION; default credential chain). Default: aws.",
        ),
    ]
    for option in options:
        command = option(command)
    return cast(F, command)


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


def report_skipped(listing: Listing) -> None:
    note = render.skipped_note(listing.skipped)
    if note:
        click.echo(note, err=True)


def nothing_to(store: ScheduleAdmin, sid: Any, verb: str) -> None:
    snapshot = store.inspect(sid)
    status = snapshot.status.label if snapshot else "gone"
    click.echo(f"{sid} is {status}: nothing to {verb}")
