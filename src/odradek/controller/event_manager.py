"""Kafka's ControllerEventManager: the controller's events, run one at a time, in order.

Every event that concerns the controller (a ZooKeeper watch firing, a broker's request
forwarded to it, a timer) is put on one queue and processed by a single runner, so the
controller's state (controller.controller) is only ever touched by that runner. Two runners:

- cluster mode: a thread of its own, "controller-event-thread" (Kafka's
  ControllerEventThread); ``put`` may be called from any thread (kazoo's watch threads, the
  broker's event loop);
- embedded (a single broker): the broker's event loop, with no thread at all. ``put`` is
  then called on the loop; the events run one per loop turn, so clients are served between
  them (a large topic creation is a series of events), or all at once by
  :meth:`ControllerEventManager.drain` (start-up runs the first election that way, before
  the listeners open).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("odradek.controller")

Event = tuple[str, dict[str, Any]]


class ControllerEventManager:
    def __init__(self, process: Callable[[str, dict[str, Any]], None], *, threaded: bool) -> None:
        self._process = process
        self.threaded = threaded
        self._events: queue.Queue[Event | None] = queue.Queue()  # threaded
        self._thread: threading.Thread | None = None
        self._pending: deque[Event] = deque()  # embedded: run on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_scheduled = False
        self.stopped = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin running events: on a thread of its own, or on ``loop`` (embedded)."""
        self._loop = loop
        if self.threaded:
            self._thread = threading.Thread(target=self._run, name="controller-event-thread", daemon=True)
            self._thread.start()

    def put(self, kind: str, **args: Any) -> None:
        if self.threaded:
            self._events.put((kind, args))
            return
        self._pending.append((kind, args))
        self._schedule()

    def _schedule(self) -> None:
        if not self._drain_scheduled and self._pending and self._loop is not None and not self.stopped:
            self._drain_scheduled = True
            self._loop.call_soon(self._run_one)

    def _run_one(self) -> None:
        """Embedded: the next queued event, then the loop's other work before the one after."""
        self._drain_scheduled = False
        if self._pending and not self.stopped:
            kind, args = self._pending.popleft()
            self._process(kind, args)
        self._schedule()

    def drain(self) -> None:
        """Embedded: run the queued events now, one at a time, until none is left."""
        while self._pending and not self.stopped:
            kind, args = self._pending.popleft()
            self._process(kind, args)

    def _run(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                break
            self._process(*item)

    def stop(self) -> None:
        """No event runs after the one running now; the thread (if any) is told to end."""
        self.stopped = True
        self._pending.clear()
        if self.threaded:
            self._events.put(None)

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)
