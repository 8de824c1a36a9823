"""Sinks: deliver claimed occurrences to SQS and SNS in batches of up to ten.

Each message carries the payload byte-for-byte as its body and the five contract attributes
(docs/contracts.md#message). FIFO queues and topics get ``MessageDeduplicationId`` = occurrence id and
``MessageGroupId`` = the target's group (default: the schedule id). A failed entry in a batch is
that occurrence's failure only; a failed request fails every entry it carried. Sink errors never
propagate: they become the ``last_error`` of the attempts they failed, cause first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, wait
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from .aws import ClientFactory, error_code
from .errors import DispatchError, HexeractError
from .model import LeasedOccurrence, Target

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

MAX_BATCH_ENTRIES = 10
# Both SendMessageBatch and PublishBatch cap the sum of all entries at 256 KiB.
MAX_BATCH_BYTES = 256 * 1024

# The outcome of one occurrence: None if sent, else the error text recorded as last_error.
Outcome = str | None


def message_attributes(occ: LeasedOccurrence) -> dict[str, dict[str, str]]:
    return {
        name: {"DataType": "Number" if isinstance(value, int) else "String", "StringValue": str(value)}
        for name, value in occ.message_attributes().items()
    }


def entry_size(occ: LeasedOccurrence, attrs: dict[str, dict[str, str]]) -> int:
    return len(occ.payload) + sum(
        len(k) + len(v["DataType"]) + len(v["StringValue"].encode()) for k, v in attrs.items()
    )


def chunks(occs: Sequence[LeasedOccurrence]) -> list[list[int]]:
    """Indexes of ``occs`` split into batches of at most 10 entries and 256 KiB."""
    out: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, occ in enumerate(occs):
        n = entry_size(occ, message_attributes(occ))
        if current and (len(current) == MAX_BATCH_ENTRIES or size + n > MAX_BATCH_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        out.append(current)
    return out


class Sink(Protocol):
    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        """Send up to 10 occurrences to one target; one outcome per occurrence, in order."""


def _entry_errors(resp: dict[str, Any], n: int) -> list[Outcome]:
    outcomes: list[Outcome] = ["no result for this entry in the batch response"] * n
    for ok in resp.get("Successful", []):
        outcomes[int(ok["Id"])] = None
    for failed in resp.get("Failed", []):
        outcomes[int(failed["Id"])] = f"{failed.get('Code', 'Failed')}: {failed.get('Message', '')}".rstrip(": ")
    return outcomes


def _fifo_fields(target: Target, occ: LeasedOccurrence) -> dict[str, str]:
    if not target.is_fifo:
        return {}
    return {
        "MessageDeduplicationId": str(occ.occurrence_id),
        "MessageGroupId": target.group_id or str(occ.schedule_id),
    }


class SqsSink:
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

    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        entries = []
        for i, occ in enumerate(occs):
            entries.append(
                {
                    "Id": str(i),
                    "MessageBody": occ.payload.decode("utf-8"),
                    "MessageAttributes": message_attributes(occ),
                    **_fifo_fields(target, occ),
                }
            )
        url = self.queue_url(target)
        resp = self._client(target).send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
        return _entry_errors(dict(resp), len(occs))


class SnsSink:
    """PublishBatch to a topic ARN."""

    def __init__(self, sns: SNSClient | None = None, *, clients: ClientFactory | None = None) -> None:
        self._sns = sns
        self._clients = clients or ClientFactory()

    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        entries = []
        for i, occ in enumerate(occs):
            entries.append(
                {
                    "Id": str(i),
                    "Message": occ.payload.decode("utf-8"),
                    "MessageAttributes": message_attributes(occ),
                    **_fifo_fields(target, occ),
                }
            )
        client = self._sns or self._clients.sns(target.region)
        resp = client.publish_batch(TopicArn=target.address, PublishBatchRequestEntries=entries)  # type: ignore[arg-type]
        return _entry_errors(dict(resp), len(occs))


class Dispatcher:
    """Routes occurrences to the sink of their target, batches per target, sends concurrently.

    A batch not answered within ``timeout`` seconds counts as failed for all of its entries (a
    dispatch over ``dispatch_timeout`` is a failed attempt, docs/contracts.md#hexeract-semantics).
    The request itself may still land later: that is a duplicate, which the occurrence id lets
    consumers drop.
    """

    def __init__(self, sinks: dict[str, Sink]) -> None:
        self.sinks = sinks

    @classmethod
    def for_clients(cls, clients: ClientFactory) -> Dispatcher:
        return cls({"sqs": SqsSink(clients=clients), "sns": SnsSink(clients=clients)})

    def dispatch(
        self,
        occs: Sequence[LeasedOccurrence],
        *,
        executor: Executor,
        timeout: float,
        on_sent: Callable[[LeasedOccurrence], None] | None = None,
    ) -> list[Outcome]:
        outcomes: list[Outcome] = ["not dispatched"] * len(occs)
        by_target: dict[Target, list[int]] = {}
        for i, occ in enumerate(occs):
            by_target.setdefault(occ.target, []).append(i)
        futures: dict[Future[list[Outcome]], list[int]] = {}
        for target, idxs in by_target.items():
            group = [occs[i] for i in idxs]
            for chunk in chunks(group):
                batch_idx = [idxs[c] for c in chunk]
                futures[executor.submit(self._send, target, [occs[i] for i in batch_idx])] = batch_idx
        done, _ = wait(futures, timeout=timeout)
        for fut, batch_idx in futures.items():
            if fut not in done:
                results: list[Outcome] = [f"dispatch timed out after {timeout:g}s"] * len(batch_idx)
            else:
                results = fut.result()
            for i, res in zip(batch_idx, results, strict=True):
                outcomes[i] = res
                if res is None and on_sent is not None:
                    on_sent(occs[i])
        return outcomes

    def _send(self, target: Target, occs: list[LeasedOccurrence]) -> list[Outcome]:
        sink = self.sinks.get(target.kind)
        if sink is None:
            return [f"no sink for {target.kind} targets"] * len(occs)
        try:
            return sink.send_batch(target, occs)
        except HexeractError as exc:
            return [str(exc)] * len(occs)
        except ClientError as exc:
            # The cause first: it is what an operator reads in a shortened last_error column.
            message = exc.response.get("Error", {}).get("Message", "")
            return [f"{error_code(exc)}: {message} (sending to {target})"] * len(occs)
        except BotoCoreError as exc:
            return [f"{exc} (sending to {target})"] * len(occs)
        except Exception as exc:  # a sink bug must fail these attempts, not kill the worker
            return [f"{type(exc).__name__}: {exc}"] * len(occs)


__all__ = ["DispatchError", "Dispatcher", "Outcome", "SnsSink", "SqsSink", "chunks", "message_attributes"]
