"""Reading the payloads stored apart (docs/contracts.md#table-layout): one ``BatchGetItem`` per
claimed batch, for the claims that need one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hexeract_scheduler.aws.translate import aws_errors
from hexeract_scheduler.concurrency import map_concurrently
from hexeract_scheduler.errors import HexeractError, RetryableError
from hexeract_scheduler.store.dynamo.base import DynamoBase
from hexeract_scheduler.store.dynamo.codec import key
from hexeract_scheduler.store.dynamo.expressions import PAYLOAD_ATTRS

# BatchGetItem takes at most 100 keys; keys it leaves unprocessed (throttling, or its 16 MB cap
# on a response) are asked for again, this many rounds at most, with a short backoff.
BATCH_GET_KEYS = 100
BATCH_GET_ROUNDS = 5
BATCH_GET_BACKOFF_SECONDS = 0.05


class PayloadReads(DynamoBase):
    def _payload_items(
        self, refs: list[str], time_left: Callable[[], float | None] | None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, HexeractError]]:
        """Payload items by key (a key with no item is absent), and the keys that could not be
        read, with why. One ``BatchGetItem`` per 100 keys, eventually consistent (a payload item
        never changes once written); a key it does not find is read again consistently before
        it counts as missing, since its item was written just before its schedule's."""
        found: dict[str, dict[str, Any]] = {}
        failed: dict[str, HexeractError] = {}
        if not refs:
            return found, failed

        def read(keys: list[str], consistent: bool) -> list[str]:
            """Read ``keys`` into ``found``; the keys left unprocessed after every round."""
            request: dict[str, Any] = {
                self.table_name: {
                    "Keys": [key(k) for k in keys],
                    "ProjectionExpression": PAYLOAD_ATTRS,
                    **({"ConsistentRead": True} if consistent else {}),
                }
            }
            for round_ in range(BATCH_GET_ROUNDS):
                if round_:
                    time.sleep(BATCH_GET_BACKOFF_SECONDS * 2 ** (round_ - 1))
                resp = self.client.batch_get_item(RequestItems=request)
                for item in resp.get("Responses", {}).get(self.table_name, []):
                    found[item["schedule_id"]["S"]] = item
                request = resp.get("UnprocessedKeys") or {}
                if not request:
                    return []
            return [k["schedule_id"]["S"] for k in request.get(self.table_name, {}).get("Keys", [])]

        def chunk(keys: list[str]) -> list[str]:
            with aws_errors("reading payloads"):
                left = read(keys, consistent=False)
                missing = [k for k in keys if k not in found and k not in left]
                if missing:
                    left += read(missing, consistent=True)
            return left

        chunks = [refs[i : i + BATCH_GET_KEYS] for i in range(0, len(refs), BATCH_GET_KEYS)]

        def run(keys: list[str]) -> list[str] | HexeractError:
            try:
                return chunk(keys)
            except HexeractError as exc:
                return exc

        def late(keys: list[str]) -> HexeractError:
            return RetryableError("reading payloads: no answer within the time left")

        for keys, result in zip(
            chunks, map_concurrently(self.executor, run, chunks, time_left=time_left, late=late), strict=True
        ):
            if isinstance(result, HexeractError):
                failed |= dict.fromkeys(keys, result)
            else:
                unprocessed = RetryableError(f"reading payloads: still unprocessed after {BATCH_GET_ROUNDS} rounds")
                failed |= dict.fromkeys(result, unprocessed)
        return found, failed
