"""Work on many items a few per event loop turn, so one request never holds the loop for long.

:class:`DispatchTurns` does the same for pipelined requests across a broker's connections: once a loop
turn has handled :data:`DISPATCH_BUDGET_S` of requests, a connection handles the next of its frames
only on a later turn, after the other connections waiting (round robin), and reads no more meanwhile.

A handler that creates or grows topics writes the metadata store once per topic; a request naming
thousands of topics is worked through at most :data:`TOPICS_PER_TURN` of them per loop turn, and no more
than :data:`TURN_BUDGET_S` of work (at least one item) before other clients are served, and answered by
``finish`` once all are done. A request small enough to fit in one turn is answered at once, as before
(no task, no extra turn).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

TOPICS_PER_TURN = 8  # topics created or grown per event loop turn at most (each is a metadata store write)
TURN_BUDGET_S = 0.02  # and no longer than this per turn (a store write fsyncs; a slow disk makes 8 too many)
# requests handled per loop turn across connections: a connection's next frame waits for a later turn
# once this much of the turn is spent (its first frame of a read never waits)
DISPATCH_BUDGET_S = 0.02


def in_turns(items: Sequence[T], work: Callable[[int, T], None], finish: Callable[[], Any],
             per_turn: int = TOPICS_PER_TURN) -> Any:
    """``work(i, item)`` for each item, ``per_turn`` per loop turn, then ``finish()``'s answer: the answer
    itself when everything fitted in one turn, else a future of it (a future ``finish`` returned is awaited)."""
    if len(items) <= per_turn:
        for i, item in enumerate(items):
            work(i, item)
        return finish()

    async def stepwise() -> Any:
        done_in_turn = 0
        turn_started = time.perf_counter()  # a scheduling budget, not time the broker acts on
        for i, item in enumerate(items):
            work(i, item)
            done_in_turn += 1
            if done_in_turn >= per_turn or time.perf_counter() - turn_started >= TURN_BUDGET_S:
                await asyncio.sleep(0)
                done_in_turn, turn_started = 0, time.perf_counter()
        answer = finish()
        return await answer if isinstance(answer, asyncio.Future) else answer

    return asyncio.ensure_future(stepwise())


class DispatchTurns:
    """The request frames a broker's connections handle per event loop turn.

    Kafka's network threads put every connection's requests in one queue its request handler
    threads take in order, so a client's request waits behind the requests already queued, not
    behind everything another client pipelined. A connection here handles the frames of one read
    together; 100 connections with 100 pipelined JoinGroups each were 10,000 requests in one loop
    turn (1-2 s on a loaded two-core machine, every other client waiting). Now the first frame a
    connection reads is handled at once, and its next ones only while the turn has spent less than
    ``budget_s`` on requests; the rest wait for a later turn (:meth:`defer`), taken in the order
    they were deferred and each connection at least one frame a turn.

    The clock is a scheduling budget, not time the broker acts on (injectable for tests).
    """

    def __init__(self, budget_s: float = DISPATCH_BUDGET_S, clock: Callable[[], float] = time.perf_counter) -> None:
        self.budget_s = budget_s
        self.clock = clock
        self._turn_started: float | None = None
        self._waiting: deque[Callable[[], None]] = deque()
        self._drain_scheduled = False

    def spent(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether this loop turn has spent its budget; the first call of a turn starts it."""
        now = self.clock()
        if self._turn_started is None:
            self._turn_started = now
            loop.call_soon(self._end_turn)
            return False
        return now - self._turn_started >= self.budget_s

    def _end_turn(self) -> None:
        self._turn_started = None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def defer(self, loop: asyncio.AbstractEventLoop, resume: Callable[[], None]) -> None:
        """Call ``resume`` on a later loop turn, after what was deferred before it."""
        self._waiting.append(resume)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            loop.call_soon(self._drain, loop)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        self._drain_scheduled = False
        try:
            # each waiting one at most once (what defers again goes to the back, for the next
            # turn), and none after the first once the turn's budget is spent
            for i in range(len(self._waiting)):
                if self.spent(loop) and i:
                    break
                resume = self._waiting.popleft()
                try:
                    resume()
                except Exception:
                    log.exception("deferred request frames failed")
        finally:
            if self._waiting and not self._drain_scheduled:
                self._drain_scheduled = True
                loop.call_soon(self._drain, loop)
