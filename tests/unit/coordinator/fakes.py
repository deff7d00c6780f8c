"""A fake clock implementing the coordinators' Scheduler: timers fire in order as time advances."""

from __future__ import annotations

import heapq
from collections.abc import Callable


class FakeTimer:
    def __init__(self, when: float, fn: Callable[[], None]) -> None:
        self.when, self.fn, self.cancelled = when, fn, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: FakeTimer) -> bool:
        return self.when < other.when


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.q: list[FakeTimer] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.t + delay, fn)
        heapq.heappush(self.q, timer)
        return timer

    def now_ms(self) -> int:
        return int(self.t * 1000)

    def advance(self, seconds: float) -> None:
        end = self.t + seconds
        while self.q and self.q[0].when <= end:
            timer = heapq.heappop(self.q)
            self.t = timer.when
            if not timer.cancelled:
                timer.fn()
        self.t = end
