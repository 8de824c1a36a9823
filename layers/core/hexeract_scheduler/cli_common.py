"""The command line's one place for errors (every failure is one ``error:`` line, exit 1; usage
errors exit 2; Ctrl-C exits 130) and the options several commands share."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click
from botocore.exceptions import BotoCoreError, ClientError

from . import cli_format
from .aws import translate
from .contract import MAX_LIST_LIMIT, Listing, ScheduleAdmin
from .errors import CredentialsMissing, HexeractError, TableMissing
from .stack import TABLE_OUTPUT

F = TypeVar("F", bound=Callable[..., Any])
OPENED_KEY = "hexeract.opened"  # ctx.meta: the table a command opened, for the missing-table message
LOCAL_CONN_HINT = "for a local endpoint, give --conn http://127.0.0.1:PORT"


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


# -- errors: one place ----------------------------------------------------------------------


class CliError(click.ClickException):
    """A failure that is not a usage error: one ``error: ...`` line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class Interrupted(click.ClickException):
    """Ctrl-C: exit status 130 (128 + SIGINT, as a shell reports a process SIGINT ended), one line
    on stderr, never a traceback. A worker that already said it was stopping adds nothing."""

    exit_code = 130

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)

    def show(self, file: Any = None) -> None:
        if self.message:
            click.echo(self.message, err=True, file=file)


def one_line(text: str) -> str:
    return " ".join(str(text).split()) or "unknown error"


class HexeractGroup(click.Group):
    """The root group: turns every error a command raises into :class:`CliError` (exit 1), and
    Ctrl-C into :class:`Interrupted` (exit 130).

    Usage errors (``click.UsageError``, exit 2) and ``--help`` pass through to click.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted() from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, EOFError):
            raise
        except TableMissing as exc:
            opened = ctx.meta.get(OPENED_KEY)
            raise CliError(missing_table(opened) if opened else one_line(str(exc))) from None
        except CredentialsMissing as exc:
            raise CliError(one_line(f"{exc}; {LOCAL_CONN_HINT}")) from None
        except HexeractError as exc:
            raise CliError(one_line(str(exc))) from None
        except (ClientError, BotoCoreError) as exc:
            raise CliError(one_line(str(translate(exc, "AWS request")))) from None
        except OSError as exc:
            raise CliError(one_line(str(exc))) from None
        except Exception as exc:  # a bug still gets one line, not a traceback
            raise CliError(one_line(f"unexpected {type(exc).__name__}: {exc}")) from None


def missing_table(opened: Opened) -> str:
    """The missing-table message: ``table create`` is advised only where it is the fix (a local
    endpoint); against AWS the table is most likely a deployed stack's, named otherwise."""
    table, where = opened.table, opened.where
    if where.stack:
        return f"table {table} (output {TABLE_OUTPUT} of stack {where.stack}) does not exist: was it deleted?"
    if where.local:
        return (
            f"table {table} does not exist at {where.conn}: create it with `hexeract scheduler table create`, "
            "or name another with --table NAME"
        )
    return (
        f"table {table} does not exist: name the deployed table with --stack NAME or --table NAME "
        "(env HEXERACT_STACK, HEXERACT_TABLE); `hexeract scheduler table create` makes a new table, "
        "which no deployed dispatcher reads"
    )


# -- shared options -------------------------------------------------------------------------


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
    note = cli_format.skipped_note(listing.skipped)
    if note:
        click.echo(note, err=True)


def nothing_to(store: ScheduleAdmin, sid: Any, verb: str) -> None:
    snapshot = store.inspect(sid)
    status = snapshot.status.label if snapshot else "gone"
    click.echo(f"{sid} is {status}: nothing to {verb}")
