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

from hexeract_scheduler.sinks.batch import BatchSink, Outcome, Sink, chunks, message_attributes
from hexeract_scheduler.sinks.dispatcher import Dispatcher
from hexeract_scheduler.sinks.refusals import entry_may_cause, unsendable
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink

__all__ = [
    "BatchSink",
    "Dispatcher",
    "Outcome",
    "Sink",
    "SnsSink",
    "SqsSink",
    "chunks",
    "entry_may_cause",
    "message_attributes",
    "unsendable",
]
