"""DelayedProduce: an acks=all produce parked until the high watermark of every partition
it wrote to passes the end of its batches (Kafka's produce purgatory), answered on the
event loop without blocking it.

Per partition the outcome is, as in Kafka's Partition.checkEnoughReplicasReachOffset:
NONE once the high watermark reached the required offset with |ISR| ≥ min.insync.replicas,
NOT_ENOUGH_REPLICAS_AFTER_APPEND when it did so on a smaller ISR,
NOT_LEADER_OR_FOLLOWER when this broker stopped leading the partition, and
REQUEST_TIMED_OUT when the request's timeout passes first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from odradek.protocol import errors

TP = tuple[str, int]
# check(tp, required_offset) -> error code when decided, None while still waiting
Check = Callable[[TP, int], int | None]


class DelayedProduce:
    __slots__ = ("future", "pending", "results", "check", "timer", "waiters", "respond")

    def __init__(
        self,
        waiters: dict[TP, set[DelayedProduce]],
        required: dict[TP, int],
        check: Check,
        timeout_ms: int,
        respond: Callable[[dict[TP, int]], Any],
    ) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = loop.create_future()
        self.pending = dict(required)
        self.results: dict[TP, int] = {}
        self.check = check
        self.respond = respond
        self.waiters = waiters
        for tp in self.pending:
            waiters.setdefault(tp, set()).add(self)
        self.timer = loop.call_later(max(timeout_ms, 0) / 1000.0, self.on_timeout)
        self.try_complete()

    def try_complete(self, only: TP | None = None) -> None:
        if self.future.done():
            return
        for tp in [only] if only is not None and only in self.pending else list(self.pending):
            code = self.check(tp, self.pending[tp])
            if code is not None:
                del self.pending[tp]
                self.results[tp] = code
        if not self.pending:
            self._finish()

    def on_timeout(self) -> None:
        for tp in self.pending:
            self.results[tp] = errors.REQUEST_TIMED_OUT
        self.pending.clear()
        self._finish()

    def _finish(self) -> None:
        self.timer.cancel()
        for tp in list(self.results):
            ws = self.waiters.get(tp)
            if ws is not None:
                ws.discard(self)
                if not ws:
                    del self.waiters[tp]
        if self.future.done():
            return
        try:
            self.future.set_result(self.respond(self.results))
        except Exception as e:  # never leave the producer waiting
            self.future.set_exception(e)

    def cancel(self) -> None:
        self.timer.cancel()
        for tp in list(self.pending) + list(self.results):
            ws = self.waiters.get(tp)
            if ws is not None:
                ws.discard(self)
                if not ws:
                    del self.waiters[tp]
        self.pending.clear()
        if not self.future.done():
            self.future.cancel()
