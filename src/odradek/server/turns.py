"""Work on many items a few per event loop turn, so one request never holds the loop for long.

A handler that creates or grows topics writes the metadata store once per topic; a request naming
thousands of topics is worked through at most :data:`TOPICS_PER_TURN` of them per loop turn, and no more
than :data:`TURN_BUDGET_S` of work (at least one item) before other clients are served, and answered by
``finish`` once all are done. A request small enough to fit in one turn is answered at once, as before
(no task, no extra turn).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

TOPICS_PER_TURN = 8  # topics created or grown per event loop turn at most (each is a metadata store write)
TURN_BUDGET_S = 0.02  # and no longer than this per turn (a store write fsyncs; a slow disk makes 8 too many)


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
