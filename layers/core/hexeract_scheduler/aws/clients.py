"""AWS clients: where they point (:class:`Connection`) and one cached, thread-safe factory."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config

from hexeract_scheduler.aws.translate import aws_errors
from hexeract_scheduler.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

LOCAL_REGION = "us-east-1"
# Local endpoints (moto, DynamoDB Local) accept any credentials; real AWS never sees these.
_LOCAL_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(frozen=True)
class Connection:
    """Where the AWS clients point: a local endpoint URL, or real AWS (optionally a region).

    Parsed from the CLI's ``--conn``: ``http://127.0.0.1:5000`` (one endpoint for DynamoDB, SQS,
    SNS and CloudFormation) or ``aws`` / ``aws://REGION``. With neither, boto3's own resolution applies, including the
    standard ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>`` variables.
    """

    endpoint_url: str | None = None
    region: str | None = None
    # (service, URL) pairs that override ``endpoint_url`` for one service, e.g. DynamoDB served by
    # one local endpoint and SQS/SNS by another.
    service_endpoints: tuple[tuple[str, str], ...] = ()

    def endpoint_for(self, service: str) -> str | None:
        return dict(self.service_endpoints).get(service, self.endpoint_url)

    @classmethod
    def parse(cls, text: str | None) -> Connection:
        if text is None or text.strip() in ("", "aws"):
            return cls()
        text = text.strip()
        if text.startswith("aws://"):
            region = text[len("aws://") :].strip("/")
            if not region or not all(c.isalnum() or c == "-" for c in region):
                raise ConfigError(f"invalid connection {text!r}: expected aws://REGION")
            return cls(region=region)
        try:
            parsed = urlparse(text)
            _ = parsed.port  # ValueError for a port that is not a number from 0 to 65535
        except ValueError as exc:  # also an unclosed IPv6 bracket (http://[::1)
            raise ConfigError(f"invalid connection {text!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(
                f"invalid connection {text!r}: expected an endpoint URL (http://127.0.0.1:5000), aws or aws://REGION"
            )
        return cls(endpoint_url=text.rstrip("/"))


class ClientFactory:
    """Creates and caches boto3 clients (thread-safe: boto3 clients are; creating them is not)."""

    def __init__(
        self,
        connection: Connection | None = None,
        *,
        session: boto3.session.Session | None = None,
        max_pool_connections: int = 50,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        self.connection = connection or Connection()
        with aws_errors("reading the AWS configuration"):  # an unknown AWS_PROFILE fails here
            self._session = session or boto3.session.Session()
        self._config = Config(
            max_pool_connections=max_pool_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"mode": "standard", "total_max_attempts": retries},
        )
        self._clients: dict[tuple[str, str | None], Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str, region: str | None = None) -> Any:
        key = (service, region)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._make(service, region)
            return self._clients[key]

    def _make(self, service: str, region: str | None) -> Any:
        kwargs: dict[str, Any] = {"config": self._config}
        conn = self.connection
        endpoint_url = conn.endpoint_for(service)
        with aws_errors(f"connecting to {service}"):
            if endpoint_url:
                kwargs["endpoint_url"] = endpoint_url
                kwargs["region_name"] = region or conn.region or self._session.region_name or LOCAL_REGION
                if self._session.get_credentials() is None:
                    kwargs.update(_LOCAL_CREDENTIALS)
            else:
                region = region or conn.region
                if region:
                    kwargs["region_name"] = region
            return self._session.client(service, **kwargs)  # type: ignore[call-overload]

    def dynamodb(self) -> DynamoDBClient:
        return self.client("dynamodb")  # type: ignore[no-any-return]

    def sqs(self, region: str | None = None) -> SQSClient:
        return self.client("sqs", region)  # type: ignore[no-any-return]

    def sns(self, region: str | None = None) -> SNSClient:
        return self.client("sns", region)  # type: ignore[no-any-return]

    def cloudformation(self) -> Any:
        return self.client("cloudformation")
