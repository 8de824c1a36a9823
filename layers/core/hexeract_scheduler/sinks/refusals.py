"""What a sink can tell about an entry or a refusal without asking again: whether an entry is
sendable at all, whether a refused batch may have been refused for one entry, and the text an
attempt's failure records (cause first)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hexeract_scheduler.aws.translate import error_code, translate
from hexeract_scheduler.domain.checks import SQS_INVALID_CHARS
from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.errors import HexeractError, RetryableError

# Refusals that name the target or the caller, never one entry: resending entry by entry would only
# repeat them once per entry. SQS codes are compared without their ``AWS.SimpleQueueService.`` prefix;
# any code starting with ``KMS`` (the queue's or topic's key) counts too.
_TARGET_REFUSALS = frozenset(
    {
        "NonExistentQueue",
        "QueueDoesNotExist",
        "QueueDeletedRecently",
        "NotFound",
        "NotFoundException",
        "ResourceNotFoundException",
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "InvalidSecurity",
        "InvalidAddress",
        "UnsupportedOperation",
        "OptInRequired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)


def _refused_chars(text: str) -> str | None:
    """``U+XXXX at offset N`` for the first character SQS does not accept (N: its byte offset in
    the UTF-8 text), and how many more there are; None if there is none."""
    found = SQS_INVALID_CHARS.finditer(text)
    first = next(found, None)
    if first is None:
        return None
    offset = len(text[: first.start()].encode("utf-8"))  # the prefix holds only accepted characters
    more = sum(1 for _ in found)
    return f"U+{ord(first.group()):04X} at offset {offset}" + (f" and {more} more" if more else "")


def unsendable(occ: LeasedOccurrence) -> str | None:
    """Why SQS or SNS would refuse this entry, when that can be told without asking them; else None.

    The rules ``ScheduledMessage`` applies when a schedule is built (the character set is the same
    expression, ``domain.checks.SQS_INVALID_CHARS``, for both sinks: a topic may fan out to queues), checked
    again because an item can reach the table another way (by hand, a migration, another tool). An
    entry refused here is never sent, so it cannot fail the request it would have travelled in.
    Offsets are byte offsets into the payload. Size is not checked: ``chunks`` puts an entry too
    large for a batch in a request of its own, so the service's refusal of it is its own already.
    """
    payload: object = occ.payload
    if not isinstance(payload, bytes | bytearray):
        return f"payload is {type(payload).__name__}, not bytes"
    try:
        text = bytes(payload).decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"payload is not valid UTF-8 text: {exc.reason} at offset {exc.start} (byte 0x{payload[exc.start]:02x})"
    if not text:
        return "payload is empty: SQS and SNS refuse an empty message body"
    if bad := _refused_chars(text):
        return f"payload has characters SQS does not accept: {bad}"
    if not occ.event_type:
        return "event type is empty: SQS and SNS refuse an empty message attribute value"
    if bad := _refused_chars(occ.event_type):
        return f"event type has characters SQS does not accept: {bad}"
    return None


def _error_codes(exc: ClientError) -> set[str]:
    error: Mapping[str, Any] = exc.response.get("Error", {})
    codes = (error.get("Code"), error.get("QueryErrorCode"))  # SQS's JSON protocol sends both
    return {str(c).removeprefix("AWS.SimpleQueueService.") for c in codes if c}


def entry_may_cause(exc: ClientError) -> bool:
    """Whether a request refused as a whole may have been refused for one of its entries.

    True for a 4xx that is not retryable (``translate`` decides, as for every AWS call in this
    package; any code naming throttling, and 429, count as retryable too) and does not name the
    target or the caller (401, 403, 404, missing queue or topic, denied access, KMS, credentials).
    Wrongly true costs one request per entry, never a wrong outcome: each entry resent alone gets
    the service's own answer about it.
    """
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if not 400 <= status < 500 or status in (401, 403, 404, 429):
        return False
    if isinstance(translate(exc, "sending"), RetryableError):
        return False
    return not any(
        c in _TARGET_REFUSALS or "thrott" in c.lower() or c.lower().startswith("kms") for c in _error_codes(exc)
    )


def failure_text(exc: BaseException, target: Target) -> str:
    """An exception as the ``last_error`` of the attempts it failed: the cause first, since that is
    what an operator reads in a shortened last_error column, then where it was going."""
    if isinstance(exc, ClientError):
        message = exc.response.get("Error", {}).get("Message", "")
        return f"{error_code(exc)}: {message} (sending to {target})"
    if isinstance(exc, BotoCoreError):
        return f"{exc} (sending to {target})"
    if isinstance(exc, HexeractError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
