"""botocore's errors translated into this package's hierarchy: the one boundary they cross.

Every AWS call of the package runs inside :func:`aws_errors` (or passes its exception to
:func:`translate`), so callers never see a botocore exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    SSOError,
    TokenRetrievalError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from hexeract_scheduler.errors import (
    ConfigError,
    CredentialsMissing,
    EndpointUnreachable,
    RetryableError,
    StoreError,
    TableMissing,
)

RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionConflictException",
        "KMSThrottlingException",
        "RequestThrottled",
        "LimitExceededException",
    }
)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


# botocore's errors that mean no request could be signed: nothing left the machine.
_CREDENTIAL_ERRORS = (
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    CredentialRetrievalError,
    TokenRetrievalError,
    SSOError,
)
CREDENTIALS_HINT = (
    "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or run `aws configure` / `aws sso login`)"
)
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


def translate(exc: Exception, what: str) -> Exception:
    """Map a botocore exception to this package's hierarchy (the boundary). ``what`` names the
    operation the caller asked for ("listing schedules"), and starts the message."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or code
        if code == "ResourceNotFoundException":
            return TableMissing(f"{what}: the table does not exist ({message})")
        if code in RETRYABLE_CODES or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
            return RetryableError(f"{what}: {code}: {message}")
        return StoreError(f"{what}: {code}: {message}")
    if isinstance(exc, BotoConnectionError):  # refused, timed out, no such host, proxy, TLS
        url = str(exc.kwargs.get("endpoint_url") or exc.kwargs.get("proxy_url") or "")
        return EndpointUnreachable(f"{what}: cannot reach the endpoint {url} ({_connection_detail(exc)})", url or None)
    if isinstance(exc, ReadTimeoutError):
        return RetryableError(f"{what}: timed out ({exc})")
    if isinstance(exc, (HTTPClientError, IncompleteReadError)):
        # A connection reset or closed mid-response, a truncated body: the request may or may not
        # have been applied, and the same request may succeed on a fresh connection.
        return RetryableError(f"{what}: the connection failed ({exc})")
    if isinstance(exc, _CREDENTIAL_ERRORS):
        return CredentialsMissing(f"{what}: no usable AWS credentials ({exc}): {CREDENTIALS_HINT}")
    if isinstance(exc, NoRegionError):
        return ConfigError(f"{what}: no AWS region: set AWS_DEFAULT_REGION")
    if isinstance(exc, BotoCoreError):
        return StoreError(f"{what}: {exc}")
    return exc


def _connection_detail(exc: BotoCoreError) -> str:
    """Why a connection failed, in a few words ("Connection refused"), not urllib3's repr."""
    if isinstance(exc, ConnectTimeoutError):
        return "connection timed out"
    found = _ERRNO.search(str(exc.kwargs.get("error", "")))
    return found.group(1).strip() if found else "no connection"


@contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Run AWS calls, re-raising botocore errors as package errors."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, what) from exc
