"""An example consumer of hexeract-scheduler messages, deduplicating on ``occurrence_id``.

Delivery is at-least-once: the same occurrence can arrive twice (a worker that sent it and crashed
before acknowledging, a dispatch that timed out but landed, a replay). Every copy carries the same
``occurrence_id`` message attribute, so a consumer keeps a dedupe store keyed by it and acts once
per occurrence. Here the store is a set in memory; in production it is a table with a TTL (see
``examples/consumer/app.py`` for a Lambda consumer using Powertools' idempotency utility).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class DedupeStore(Protocol):
    def first_time(self, occurrence_id: str) -> bool:
        """Record the id; True if it had not been seen before (atomically)."""


class MemoryDedupeStore:
    """A process-local dedupe store (a real one: DynamoDB conditional put, Redis SET NX, with a TTL)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def first_time(self, occurrence_id: str) -> bool:
        with self._lock:
            if occurrence_id in self._seen:
                return False
            self._seen.add(occurrence_id)
            return True


@dataclass(frozen=True)
class Reminder:
    """One received message: the payload (body) and the contract attributes (docs/contracts.md#message)."""

    source: str
    body: str
    occurrence_id: str
    schedule_id: str
    event_type: str
    scheduled_for: str
    attempt: int

    @classmethod
    def from_sqs(cls, source: str, message: dict[str, Any]) -> Reminder:
        attrs = {k: v.get("StringValue", "") for k, v in message.get("MessageAttributes", {}).items()}
        return cls(
            source=source,
            body=message["Body"],
            occurrence_id=attrs["occurrence_id"],
            schedule_id=attrs["schedule_id"],
            event_type=attrs["event_type"],
            scheduled_for=attrs["scheduled_for"],
            attempt=int(attrs["attempt"]),
        )


class ReminderConsumer:
    """Polls SQS queues (a queue target, or a queue subscribed to an SNS topic with raw delivery)
    and hands each reminder to ``handle`` once per occurrence; duplicates go to ``on_duplicate``."""

    def __init__(
        self,
        sqs: SQSClient,
        dedupe: DedupeStore,
        handle: Callable[[Reminder], None],
        on_duplicate: Callable[[Reminder], None] | None = None,
    ) -> None:
        self.sqs = sqs
        self.dedupe = dedupe
        self.handle = handle
        self.on_duplicate = on_duplicate
        self.queues: dict[str, str] = {}
        self.raw = 0
        self.distinct = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def watch(self, source: str, queue_url: str) -> None:
        with self._lock:
            self.queues[source] = queue_url

    def poll_once(self) -> int:
        """One receive on every queue; returns how many messages arrived."""
        with self._lock:
            queues = list(self.queues.items())
        received = 0
        for source, url in queues:
            resp = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
            )
            messages = resp.get("Messages", [])
            for message in messages:
                self._consume(Reminder.from_sqs(source, dict(message)))
            if messages:
                received += len(messages)
                self.sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )
        return received

    def _consume(self, reminder: Reminder) -> None:
        self.raw += 1
        if self.dedupe.first_time(reminder.occurrence_id):
            self.distinct += 1
            self.handle(reminder)
        elif self.on_duplicate is not None:
            self.on_duplicate(reminder)

    def run(self, interval: float = 0.1) -> None:
        while not self._stop.is_set():
            if not self.poll_once():
                self._stop.wait(interval)

    def stop(self) -> None:
        self._stop.set()
