"""Sinks: deliver claimed occurrences to SQS and SNS in batches of up to ten.

Each message carries the payload byte-for-byte as its body and the five contract attributes
(docs/contracts.md#message). FIFO queues and topics get ``MessageDeduplicationId`` = occurrence id and
``MessageGroupId`` = the target's group (default: the schedule id). Sink errors never propagate:
they become the ``last_error`` of the attempts they failed, cause first.

A bad entry fails alone:

* an entry that SQS or SNS would refuse for its content, as far as that can be told locally
  (``unsendable``: not UTF-8, characters outside SQS's set, empty), is not sent; the rest of its
  batch is;
* a failed entry in a batch response is that occurrence's failure only;
* a request refused as a whole for a reason one entry may cause (``entry_may_cause``: a 4xx that
  is neither throttling nor about the target or the caller) is resent entry by entry, so only the
  entries refused on their own fail, each with its own error. That costs at most one extra request
  per entry (n + 1 requests for n entries), and none is started after the dispatch deadline;
* any other failed request (throttling, 5xx, timeouts, a missing queue, denied access) fails every
  entry it carried, as one failed attempt each: the worker retries them with backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, wait
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from .aws import ClientFactory
from .errors import HexeractError
from .model import LeasedOccurrence, Target
from .sink_checks import entry_may_cause, failure_text, unsendable

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

MAX_BATCH_ENTRIES = 10
# Both SendMessageBatch and PublishBatch cap the sum of all entries at 256 KiB.
MAX_BATCH_BYTES = 256 * 1024

# The outcome of one occurrence: None if sent, else the error text recorded as last_error.
Outcome = str | None

# The monotonic instant after which the dispatch no longer waits for a batch: set by
# ``Dispatcher._send`` around the sink it calls, so that a sink wrapping another passes it on
# unawares. None (no dispatcher): no limit.
_DEADLINE: ContextVar[float | None] = ContextVar("hexeract_dispatch_deadline", default=None)


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


# One entry of a request: (index of its occurrence in the batch, the entry as sent).
_Entry = tuple[int, dict[str, Any]]


def _record(resp: Mapping[str, Any], sent: Sequence[_Entry], outcomes: list[Outcome]) -> None:
    """The per-entry results of one batch response; an entry the response does not mention fails."""
    index = {entry["Id"]: i for i, entry in sent}
    for i, _ in sent:
        outcomes[i] = "no result for this entry in the batch response"
    for ok in resp.get("Successful", []):
        if (j := index.get(ok.get("Id"))) is not None:
            outcomes[j] = None
    for failed in resp.get("Failed", []):
        if (j := index.get(failed.get("Id"))) is not None:
            outcomes[j] = f"{failed.get('Code', 'Failed')}: {failed.get('Message', '')}".rstrip(": ")


class Sink(Protocol):
    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        """Send up to 10 occurrences to one target; one outcome per occurrence, in order."""


def _fifo_fields(target: Target, occ: LeasedOccurrence) -> dict[str, str]:
    if not target.is_fifo:
        return {}
    return {
        "MessageDeduplicationId": str(occ.occurrence_id),
        "MessageGroupId": target.group_id or str(occ.schedule_id),
    }


class _BatchSink:
    """What the SQS and SNS sinks share: local checks, one request, isolation of a refused one.

    A subclass builds one entry (``_entry``) and sends a list of them in one request (``_request``).
    """

    def _entry(self, target: Target, occ: LeasedOccurrence, entry_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def _request(self, target: Target, entries: list[dict[str, Any]]) -> Mapping[str, Any]:
        raise NotImplementedError

    def send_batch(self, target: Target, occs: Sequence[LeasedOccurrence]) -> list[Outcome]:
        """One outcome per occurrence, in order; a refused entry or request does not raise.

        Entries refused locally (``unsendable``) are not sent; the others go in one request. If the
        service refuses that request as a whole for a reason one entry may cause
        (``entry_may_cause``) and it carried more than one entry, each is resent alone, in order:
        at most ``len(occs)`` extra requests. Any other failure of the request fails every entry it
        carried.
        """
        outcomes: list[Outcome] = [None] * len(occs)
        entries: list[_Entry] = []
        for i, occ in enumerate(occs):
            problem = unsendable(occ)
            if problem is None:
                entries.append((i, self._entry(target, occ, str(i))))
            else:
                outcomes[i] = problem
        if not entries:
            return outcomes
        try:
            resp = self._request(target, [entry for _, entry in entries])
        except ClientError as exc:
            if len(entries) > 1 and entry_may_cause(exc):
                self._isolate(target, entries, failure_text(exc, target), outcomes)
            else:
                _fail(entries, failure_text(exc, target), outcomes)
        except (BotoCoreError, HexeractError) as exc:
            _fail(entries, failure_text(exc, target), outcomes)
        else:
            _record(resp, entries, outcomes)
        return outcomes

    def _isolate(self, target: Target, entries: list[_Entry], batch_error: str, outcomes: list[Outcome]) -> None:
        """Resend each entry of a refused request alone, so that only those refused alone fail.

        Stops at the first failure that is not about one entry (throttling, 5xx, a timeout, the
        target): that error then fails the entries not resent yet, as it would have failed them
        all in a batch. Starts no request after the dispatch deadline (the dispatcher no longer
        waits for it: a late send could only be counted as failed and then duplicated by the retry);
        the entries left keep the batch's error.
        """
        deadline = _DEADLINE.get()
        for k, (i, entry) in enumerate(entries):
            if deadline is not None and time.monotonic() >= deadline:
                _fail(entries[k:], f"{batch_error}; not resent alone: the dispatch deadline passed", outcomes)
                return
            try:
                resp = self._request(target, [entry])
            except ClientError as exc:
                if entry_may_cause(exc):
                    outcomes[i] = failure_text(exc, target)
                    continue
                _fail(entries[k:], failure_text(exc, target), outcomes)
                return
            except (BotoCoreError, HexeractError) as exc:
                _fail(entries[k:], failure_text(exc, target), outcomes)
                return
            _record(resp, [(i, entry)], outcomes)


def _fail(entries: Sequence[_Entry], error: str, outcomes: list[Outcome]) -> None:
    for i, _ in entries:
        outcomes[i] = error


class SqsSink(_BatchSink):
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
            **_fifo_fields(target, occ),
        }

    def _request(self, target: Target, entries: list[dict[str, Any]]) -> Mapping[str, Any]:
        url = self.queue_url(target)
        return self._client(target).send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]


class SnsSink(_BatchSink):
    """PublishBatch to a topic ARN."""

    def __init__(self, sns: SNSClient | None = None, *, clients: ClientFactory | None = None) -> None:
        self._sns = sns
        self._clients = clients or ClientFactory()

    def _entry(self, target: Target, occ: LeasedOccurrence, entry_id: str) -> dict[str, Any]:
        return {
            "Id": entry_id,
            "Message": occ.payload.decode("utf-8"),
            "MessageAttributes": message_attributes(occ),
            **_fifo_fields(target, occ),
        }

    def _request(self, target: Target, entries: list[dict[str, Any]]) -> Mapping[str, Any]:
        client = self._sns or self._clients.sns(target.region)
        return client.publish_batch(TopicArn=target.address, PublishBatchRequestEntries=entries)  # type: ignore[arg-type]


class Dispatcher:
    """Routes occurrences to the sink of their target, batches per target, sends concurrently.

    A batch not answered within ``timeout`` seconds counts as failed for all of its entries (a
    dispatch over ``dispatch_timeout`` is a failed attempt, docs/contracts.md#hexeract-semantics).
    The request itself may still land later: that is a duplicate, which the occurrence id lets
    consumers drop. No request is started once the timeout has passed (a batch whose turn on the
    executor comes too late is not sent; a sink isolating a refused batch stops resending).
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
        # Taken before the first submit, so it never falls after the wait below gives up.
        deadline = time.monotonic() + timeout
        futures: dict[Future[list[Outcome]], list[int]] = {}
        for target, idxs in by_target.items():
            group = [occs[i] for i in idxs]
            for chunk in chunks(group):
                batch_idx = [idxs[c] for c in chunk]
                futures[executor.submit(self._send, target, [occs[i] for i in batch_idx], deadline)] = batch_idx
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

    def _send(self, target: Target, occs: list[LeasedOccurrence], deadline: float | None = None) -> list[Outcome]:
        sink = self.sinks.get(target.kind)
        if sink is None:
            return [f"no sink for {target.kind} targets"] * len(occs)
        if deadline is not None and time.monotonic() >= deadline:
            return ["dispatch timed out before this batch was sent"] * len(occs)
        token = _DEADLINE.set(deadline)
        try:
            return sink.send_batch(target, occs)
        except Exception as exc:  # a sink bug must fail these attempts, not kill the worker
            return [failure_text(exc, target)] * len(occs)
        finally:
            _DEADLINE.reset(token)


__all__ = [
    "Dispatcher",
    "Outcome",
    "SnsSink",
    "SqsSink",
    "chunks",
    "entry_may_cause",
    "message_attributes",
    "unsendable",
]
