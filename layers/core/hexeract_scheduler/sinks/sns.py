"""The SNS sink: PublishBatch, to a topic ARN."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.sinks.batch import BatchSink, fifo_fields, message_attributes

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient


class SnsSink(BatchSink):
    """PublishBatch to a topic ARN."""

    def __init__(self, sns: SNSClient | None = None, *, clients: ClientFactory | None = None) -> None:
        self._sns = sns
        self._clients = clients or ClientFactory()

    def _entry(self, target: Target, occ: LeasedOccurrence, entry_id: str) -> dict[str, Any]:
        return {
            "Id": entry_id,
            "Message": occ.payload.decode("utf-8"),
            "MessageAttributes": message_attributes(occ),
            **fifo_fields(target, occ),
        }

    def _request(self, target: Target, entries: list[dict[str, Any]]) -> Mapping[str, Any]:
        client = self._sns or self._clients.sns(target.region)
        return client.publish_batch(TopicArn=target.address, PublishBatchRequestEntries=entries)  # type: ignore[arg-type]
