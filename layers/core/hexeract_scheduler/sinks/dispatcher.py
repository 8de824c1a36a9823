"""The Dispatcher: routes claimed occurrences to their target's sink, in batches, concurrently,
within the dispatch timeout."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, wait

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.domain.model import LeasedOccurrence, Target
from hexeract_scheduler.sinks.batch import DISPATCH_DEADLINE, Outcome, Sink, chunks
from hexeract_scheduler.sinks.refusals import failure_text
from hexeract_scheduler.sinks.sns import SnsSink
from hexeract_scheduler.sinks.sqs import SqsSink


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
        token = DISPATCH_DEADLINE.set(deadline)
        try:
            return sink.send_batch(target, occs)
        except Exception as exc:  # a sink bug must fail these attempts, not kill the worker
            return [failure_text(exc, target)] * len(occs)
        finally:
            DISPATCH_DEADLINE.reset(token)
