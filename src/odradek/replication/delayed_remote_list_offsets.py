"""DelayedRemoteListOffsets: a ListOffsets request whose timestamp lookups on tiered partitions read remote
segments (Kafka's DelayedRemoteListOffsets, KIP-1075), parked in the replica manager's purgatory until every
lookup is done or its timeout passes (the request's TimeoutMs from v10, else
``remote.list.offsets.request.timeout.ms``).

Each lookup is a :class:`concurrent.futures.Future` the remote log manager completes on a reader thread (or
at once, when the segment is also local); its completion wakes the loop, which checks the operation under its
own key. On completion ``resolve(index, future)`` turns each lookup into its partition's answer, on the loop:
``future`` None when the wait ran out first (Kafka answers REQUEST_TIMED_OUT; the lookup is cancelled, as
Kafka's onExpiration cancels its job).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any

from odradek.purgatory import DelayedOperation

Resolve = Callable[[int, "concurrent.futures.Future[Any] | None"], Any]


class DelayedRemoteListOffsets(DelayedOperation[list[Any]]):
    __slots__ = ("lookups", "resolve")

    def __init__(self, delay_ms: int, lookups: Sequence[concurrent.futures.Future[Any]], resolve: Resolve) -> None:
        super().__init__(delay_ms)
        self.lookups = list(lookups)
        self.resolve = resolve

    def try_complete(self, key: object = None) -> bool:
        if all(f.done() for f in self.lookups):
            return self.force_complete()
        return False

    def on_complete(self) -> list[Any]:
        out = []
        for i, fut in enumerate(self.lookups):
            if fut.done():
                out.append(self.resolve(i, fut))
            else:  # the timeout ran out
                fut.cancel()
                out.append(self.resolve(i, None))
        return out
