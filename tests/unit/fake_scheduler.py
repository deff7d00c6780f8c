"""A fake clock for delayed operations (purgatory.Scheduler): timers fire only when a test
advances time, ``call_soon`` callbacks only when it runs them."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._timers: list[tuple[float, int, Callable[[], object], FakeTimer]] = []
        self._soon: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self._seq = 0

    def time(self) -> float:
        return self.now_ms / 1000.0

    def call_later(self, delay: float, callback: Callable[[], object], /) -> FakeTimer:
        handle = FakeTimer()
        self._seq += 1
        heapq.heappush(self._timers, (self.now_ms + delay * 1000.0, self._seq, callback, handle))
        return handle

    def call_soon(self, callback: Callable[..., object], /, *args: Any) -> object:
        self._soon.append((callback, args))
        return None

    def run_soon(self) -> int:
        """Run the callbacks queued with call_soon (and any they queue); returns how many ran."""
        n = 0
        while self._soon:
            cb, args = self._soon.pop(0)
            cb(*args)
            n += 1
        return n

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` on, firing the timers that fall due, in order."""
        until = self.now_ms + ms
        while self._timers and self._timers[0][0] <= until:
            when, _seq, cb, handle = heapq.heappop(self._timers)
            self.now_ms = max(self.now_ms, round(when))
            if not handle.cancelled:
                cb()
        self.now_ms = until

    def pending_timers(self) -> int:
        return sum(1 for *_x, h in self._timers if not h.cancelled)
