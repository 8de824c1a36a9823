"""The SQS sink: SendMessageBatch, to a queue given by URL or ARN."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.sinks.batch import BatchSink, fifo_fields, message_attributes

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsSink(BatchSink):
    """SendMessageBatch to a queue given by URL or ARN (an ARN is resolved once, with GetQueueUrl)."""

    def __init__(self, sqs: SQSClient | None = None, *, clients: ClientFactory | None = None) -> None:
        self._sqs = sqs
        self._clients = clients or ClientFactory()
        self._urls: dict[str, str] = {}
        self._lock = threading.Lock()

    def _client(self, target: Target) -> SQSClient:
        return self._sqs or self._clients.sqs(target.region)

    def queue_url(self, target: Target) -> str:
        if not target.is_arn:
            return target.address
        with self._lock:
            cached = self._urls.get(target.address)
        if cached:
            return cached
        _, _, _, _, account, name = target.address.split(":")
        url = self._client(target).get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
        with self._lock:
            self._urls[target.address] = url
        return url

    def _entry(self, target: Target, occ: LeasedOccurrence, entry_id: str) -> dict[str, Any]:
        return {
            "Id": entry_id,
            "MessageBody": occ.payload.decode("utf-8"),
            "MessageAttributes": message_attributes(occ),
            **fifo_fields(target, occ),
        }

    def _request(self, target: Target, entries: list[dict[str, Any]]) -> Mapping[str, Any]:
        url = self.queue_url(target)
        return self._client(target).send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
