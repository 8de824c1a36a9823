"""The command line's one place for errors: every failure is one ``error:`` line (exit 1), usage
errors exit 2 (click's), Ctrl-C exits 130; :class:`HexeractGroup` maps every error a command raises."""

from __future__ import annotations

from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from hexeract_scheduler.aws.stack import TABLE_OUTPUT
from hexeract_scheduler.aws.translate import translate
from hexeract_scheduler.cli.options import OPENED_KEY, Opened
from hexeract_scheduler.errors import CredentialsMissing, HexeractError, TableMissing, one_line

LOCAL_CONN_HINT = "for a local endpoint, give --conn http://127.0.0.1:PORT"


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
