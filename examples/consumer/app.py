"""A Lambda consumer of hexeract reminders: an SQS event source, processed once per occurrence.

hexeract-scheduler delivers at least once, so the same occurrence may arrive twice, always with the
same ``occurrence_id`` message attribute. This handler makes the side effect idempotent with
Powertools for AWS Lambda: ``@idempotent_function`` keyed on ``occurrence_id`` stores each
occurrence's result in a DynamoDB table (key ``id``, TTL attribute ``expiration``) and returns the
stored result for a repeat instead of running the side effect again. A copy that arrives while the
first is still in progress fails that record only (``BatchProcessor`` reports it as a partial batch
failure), and SQS redelivers it later, when the stored result answers it.

Deploy it behind an SQS event source with ``FunctionResponseTypes: [ReportBatchItemFailures]``; the
queue is the schedule's target (``sqs:...``) or is subscribed to its topic (``sns:...``) with
``RawMessageDelivery: true`` so the body is the payload and the attributes are message attributes.
Environment: ``IDEMPOTENCY_TABLE`` (the table name).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, cast

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

# Keep results longer than SQS can redeliver and than the scheduler can re-send (lease + retries).
IDEMPOTENCY_TTL_SECONDS = 7 * 24 * 3600

Reminder = dict[str, Any]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def reminder_of(record: SQSRecord) -> Reminder:
    """The contract attributes (docs/contracts.md#message) and the payload of one SQS record."""

    def attr(name: str) -> str:
        value = record.message_attributes[name]
        if value is None or value.string_value is None:
            raise ValueError(f"message {record.message_id} has no {name} attribute: not from hexeract-scheduler")
        return value.string_value

    return {
        "occurrence_id": attr("occurrence_id"),
        "schedule_id": attr("schedule_id"),
        "event_type": attr("event_type"),
        "scheduled_for": attr("scheduled_for"),
        "attempt": int(attr("attempt")),
        "payload": json.loads(record.body),
    }


def build_handler(persistence: BasePersistenceLayer, act: Callable[[Reminder], Any]) -> Handler:
    """The Lambda handler, with its persistence layer and side effect injected (tests use moto)."""
    config = IdempotencyConfig(
        event_key_jmespath="occurrence_id",
        expires_after_seconds=IDEMPOTENCY_TTL_SECONDS,
        raise_on_no_idempotency_key=True,
    )
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(data_keyword_argument="reminder", persistence_store=persistence, config=config)
    def handle_reminder(reminder: Reminder) -> dict[str, Any]:
        result = act(reminder)
        return {"occurrence_id": reminder["occurrence_id"], "result": result}

    def record_handler(record: SQSRecord) -> dict[str, Any]:
        return handle_reminder(reminder=reminder_of(record))  # type: ignore[no-any-return]

    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if context is not None:
            config.register_lambda_context(context)
        response = process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
        return cast(dict[str, Any], response)

    return lambda_handler


def send_reminder(reminder: Reminder) -> str:
    """The side effect that must happen once per occurrence (an e-mail, a push notification...)."""
    print(f"reminder {reminder['payload']!r} for occurrence {reminder['occurrence_id']}")
    return "sent"


_handler: Handler | None = None


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _handler
    if _handler is None:  # built on first use: importing this module needs no AWS configuration
        _handler = build_handler(DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"]), send_reminder)
    return _handler(event, context)
