"""One error hierarchy for the whole package.

AWS errors are translated at one boundary (``aws.translate``, used by ``store/dynamo/``, ``sinks/``
and ``aws/stack``): callers never see a ``botocore`` exception. The CLI and the Lambda handlers map
these classes to messages and exit codes in one place each.
"""

from __future__ import annotations


class HexeractError(Exception):
    """Base of every error this package raises on purpose."""


class InvalidInput(HexeractError, ValueError):
    """A value given by a user (cron, zone, target, id, payload, config) is not acceptable.

    Raised before anything is written.
    """


class InvalidCron(InvalidInput):
    """A cron expression or time zone that cannot be evaluated."""


class InvalidTarget(InvalidInput):
    """A target that is not ``sqs:<queue URL or ARN>`` or ``sns:<topic ARN>``."""


class ConfigError(InvalidInput):
    """An incoherent worker configuration or environment setting.

    ``fields`` names the settings the rule involves, the one at fault first (``field``): an
    environment variable for ``Settings``, a field name for ``SchedulerWorkerConfig``, so that a
    caller can map them without reading the message.
    """

    def __init__(self, message: str, *fields: str) -> None:
        super().__init__(message)
        self.fields: tuple[str, ...] = fields

    @property
    def field(self) -> str | None:
        return self.fields[0] if self.fields else None


class CredentialsMissing(ConfigError):
    """No usable AWS credentials (none found, partial, an unknown profile, an expired SSO session).

    Raised before any request leaves the machine."""


class ScheduleNotFound(HexeractError, LookupError):
    """No schedule with that id exists in the table."""

    def __init__(self, schedule_id: object) -> None:
        super().__init__(f"schedule {schedule_id} not found")
        self.schedule_id = schedule_id


class NotReplayable(HexeractError):
    """Replay asked for a schedule that is not dead-lettered; nothing was changed."""

    def __init__(self, schedule_id: object, status: str) -> None:
        super().__init__(f"schedule {schedule_id} is {status}, not dead-lettered: nothing to replay")
        self.schedule_id = schedule_id
        self.status = status


class UnreadableItem(HexeractError):
    """A stored item this package cannot read: an attribute missing or of the wrong type, a
    schedule id that is not a UUID, a stored target or cron that no longer parses.

    Such an item was written by something else (by hand, a bug, a migration). The worker
    quarantines it (dead-letters it with ``reason``) so that it stops nothing else; listings skip it
    and report its ``key``.
    """

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"item {key!r}: {reason}")
        self.key = key
        self.reason = reason


class StoreError(HexeractError):
    """An AWS service (DynamoDB, SQS, SNS, CloudFormation) refused or failed a request in a way the
    caller cannot fix by retrying. The name is kept from when the store made every AWS call."""


class TableMissing(StoreError):
    """The schedules table does not exist (a wrong table name, or a local table not created yet)."""


class EndpointUnreachable(StoreError):
    """The AWS endpoint could not be reached at all (connection refused, timed out, no such host).

    A connection error: the same request may succeed once the endpoint answers, and ``endpoint``
    names the URL that did not."""

    def __init__(self, message: str, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.endpoint = endpoint


class RetryableError(HexeractError):
    """A transient AWS failure (throttling, 5xx, timeout): the same request may succeed later."""


def one_line(text: object, limit: int | None = None) -> str:
    """An error's text on one line (whitespace runs collapsed), at most ``limit`` characters with an
    ellipsis where it was cut; ``unknown error`` for an empty one."""
    line = " ".join(str(text).split()) or "unknown error"
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"
