"""What the SQS and SNS sinks share: the ``Sink`` protocol, the entries' attributes, batches of at
most ten entries and 256 KiB, and :class:`BatchSink`, which sends one request and isolates an entry
that may have caused its refusal."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.errors import HexeractError
from hexeract_scheduler.sinks.refusals import entry_may_cause, failure_text, unsendable

MAX_BATCH_ENTRIES = 10
# Both SendMessageBatch and PublishBatch cap the sum of all entries at 256 KiB.
MAX_BATCH_BYTES = 256 * 1024

# The outcome of one occurrence: None if sent, else the error text recorded as last_error.
Outcome = str | None

# The monotonic instant after which the dispatch no longer waits for a batch: set by
# ``Dispatcher`` around the sink it calls, so that a sink wrapping another passes it on unawares.
# None (no dispatcher): no limit.
DISPATCH_DEADLINE: ContextVar[float | None] = ContextVar("hexeract_dispatch_deadline", default=None)


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


def fifo_fields(target: Target, occ: LeasedOccurrence) -> dict[str, str]:
    if not target.is_fifo:
        return {}
    return {
        "MessageDeduplicationId": str(occ.occurrence_id),
        "MessageGroupId": target.group_id or str(occ.schedule_id),
    }


class BatchSink:
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
        deadline = DISPATCH_DEADLINE.get()
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
