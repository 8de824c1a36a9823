"""The command line's one place for errors (every failure is one ``error:`` line, exit 1; usage
errors exit 2) and the options several commands share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from botocore.exceptions import BotoCoreError, ClientError

from . import cli_format
from .aws import translate
from .contract import MAX_LIST_LIMIT, Listing, ScheduleAdmin
from .errors import HexeractError, TableMissing

F = TypeVar("F", bound=Callable[..., Any])
TABLE_KEY = "hexeract.table"  # ctx.meta: the table a command opened, for the missing-table message


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
            table = ctx.meta.get(TABLE_KEY)
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
