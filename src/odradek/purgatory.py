"""A generic, I/O-free purgatory of delayed operations (Kafka's DelayedOperation and
DelayedOperationPurgatory).

It sits at the bottom of the layers (it imports nothing from odradek): replication/ and coordinator/ build
their delayed operations on it below server/, whose ReplicaManager owns the purgatories.

A :class:`DelayedOperation` is a request that cannot be answered yet: an acks=all produce
waiting for the high watermark (replication.delayed_produce.DelayedProduce), a fetch
waiting for fetch.min.bytes (replication.delayed_fetch.DelayedFetch), a group
coordinator's answer waiting for its __consumer_offsets writes to replicate (a
DelayedProduce too, as Kafka's GroupMetadataManager appends with acks=-1). It completes
exactly once, in one of three ways:

- :meth:`DelayedOperation.try_complete` finds its condition met and calls
  :meth:`DelayedOperation.force_complete` (Kafka's tryComplete/forceComplete);
- its delay passes: the purgatory's timer calls :meth:`DelayedOperation.run`, which
  force-completes it and then calls :meth:`DelayedOperation.on_expiration`;
- :meth:`DelayedOperation.cancel`: the connection closed or the broker stops; nothing is
  answered (the listener sees ``asyncio.CancelledError``).

:meth:`DelayedOperation.on_complete` runs once, on whichever path won, and returns the
operation's response, which goes to the listener set with :meth:`DelayedOperation.then`
(Kafka's responseCallback).

A :class:`DelayedOperationPurgatory` watches operations under keys (a partition as
``(topic, index)``, or a group key: any hashable): whoever changes the state behind a key
(an append moving the log end offset, a high watermark moving, leadership moving) calls
:meth:`DelayedOperationPurgatory.check_and_complete` with it. Unlike Kafka's purgatory, a
completed operation leaves its watcher lists at once (no purge thread on one event loop).

Time comes from an injected :class:`Scheduler`: the running asyncio loop in production (no
scheduler given), a fake clock in tests. Nothing here touches a socket or a file.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

log = logging.getLogger("odradek.purgatory")

R = TypeVar("R")
K = TypeVar("K", bound=Hashable)

# a listener gets (response, None) or (None, the exception on_complete or try_complete raised)
Listener = Callable[[Any, "BaseException | None"], None]


# deadlines within half a millisecond count as due (Kafka's timing wheel ticks every millisecond)
_TICK = 0.0005


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """What a purgatory needs of a clock: asyncio's loop has this shape."""

    def time(self) -> float: ...  # seconds, monotonic

    def call_later(self, delay: float, callback: Callable[[], object], /) -> Cancellable: ...

    def call_soon(self, callback: Callable[..., object], /, *args: Any) -> object: ...


class DelayedOperation(Generic[R]):
    """One delayed request (Kafka's DelayedOperation). Subclasses implement
    :meth:`try_complete` and :meth:`on_complete`, and may override :meth:`on_expiration`."""

    __slots__ = ("delay_ms", "completed", "response", "error", "_listener", "_purgatory", "_keys")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.completed = False
        self.response: R | None = None  # once completed, unless handed to a listener
        self.error: BaseException | None = None
        self._listener: Listener | None = None
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._keys: tuple[Any, ...] = ()

    # -- to implement
    def try_complete(self, key: Any = None) -> bool:
        """Check the condition (``key``: the watch key whose state changed, None for all);
        when met, ``return self.force_complete()``. False while still waiting."""
        raise NotImplementedError

    def on_complete(self) -> R:
        """The response, computed once when the operation completes (by any path)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after :meth:`on_complete` when the operation completed by expiring."""

    # -- life cycle
    def force_complete(self) -> bool:
        """Complete now unless already completed or cancelled; True only for the caller that
        completed it (Kafka's forceComplete: exactly once)."""
        if self.completed:
            return False
        self.completed = True
        purgatory = self._purgatory
        if purgatory is not None:
            self._purgatory = None
            purgatory._unwatch(self)
        try:
            response = self.on_complete()
        except Exception as e:  # never leave the client waiting: its connection closes instead
            self.error = e
            response = None
        listener = self._listener
        if listener is not None:
            # handed over, not kept: the purgatory's deadline heap may hold on to this
            # operation for a while, and a fetch's response holds file regions
            self._listener = None
            listener(response, self.error)
        else:
            self.response = response
        return True

    def run(self) -> None:
        """The delay passed (the purgatory's timer)."""
        if self.force_complete():
            self.on_expiration()

    def fail(self, error: BaseException) -> None:
        """Complete with an error (try_complete raised): the listener gets the exception."""
        if self.completed:
            return
        self._close()
        self.error = error
        listener = self._listener
        if listener is not None:
            self._listener = None
            listener(None, error)

    def cancel(self) -> None:
        """Drop the operation unanswered (its connection closed, the broker stops): on_complete
        does not run; the listener gets ``asyncio.CancelledError``."""
        if not self.completed:
            self.fail(asyncio.CancelledError())

    def then(self, listener: Listener) -> None:
        """``listener(response, error)`` on completion (at once if already completed). The
        response goes to the listener; ``response`` keeps it only when there was none."""
        if self.completed:
            response, self.response = self.response, None
            listener(response, self.error)
            return
        self._listener = listener

    def _close(self) -> None:
        self.completed = True
        purgatory = self._purgatory
        if purgatory is not None:
            self._purgatory = None
            purgatory._unwatch(self)


class DelayedOperationPurgatory(Generic[K]):
    """Delayed operations watched by key (Kafka's DelayedOperationPurgatory).

    Expiration (Kafka's SystemTimer) is one heap of deadlines per purgatory with a single
    scheduler timer armed for the earliest: watching an operation costs a heap push, completing
    it nothing (its entry is skipped when it falls due, and entries of completed operations are
    dropped once they outnumber the waiting ones, as Kafka's purge interval does for watchers)."""

    __slots__ = ("name", "scheduler", "watchers", "_pending", "_deadlines", "_seq", "_armed", "_armed_at")

    def __init__(self, name: str, scheduler: Scheduler | None = None) -> None:
        self.name = name
        self.scheduler = scheduler  # None: the running asyncio loop
        # key -> operations watching it, in arrival order (a dict as an ordered set)
        self.watchers: dict[K, dict[DelayedOperation[Any], None]] = {}
        self._pending: dict[DelayedOperation[Any], None] = {}
        self._deadlines: list[tuple[float, int, DelayedOperation[Any]]] = []  # a heap
        self._seq = 0
        self._armed: Cancellable | None = None
        self._armed_at = 0.0

    def try_complete_else_watch(self, op: DelayedOperation[Any], keys: Iterable[K]) -> bool:
        """Complete ``op`` now if it can be (True), else watch it under ``keys`` and start its
        expiration timer (False)."""
        if op.try_complete():
            return True
        self.watch(op, keys)
        return op.completed

    def watch(self, op: DelayedOperation[Any], keys: Iterable[K]) -> None:
        """Watch ``op`` under ``keys`` without trying it first (the caller just did) and start
        its expiration timer."""
        if op.completed:
            return
        op._purgatory = self
        op._keys = ks = tuple(keys)
        watchers = self.watchers
        for k in ks:
            w = watchers.get(k)
            if w is None:
                watchers[k] = {op: None}
            else:
                w[op] = None
        self._pending[op] = None
        scheduler = self.scheduler or asyncio.get_running_loop()
        delay = op.delay_ms / 1000.0 if op.delay_ms > 0 else 0.0
        deadline = scheduler.time() + delay
        deadlines = self._deadlines
        self._seq += 1
        heapq.heappush(deadlines, (deadline, self._seq, op))
        if self._armed is None or deadline < self._armed_at:
            if self._armed is not None:
                self._armed.cancel()
            self._armed_at = deadline
            self._armed = scheduler.call_later(delay, self._expire)
        elif len(deadlines) > 64 and len(deadlines) > 2 * len(self._pending):
            self._purge()

    def _expire(self) -> None:
        """The earliest deadline passed: expire what is due, arm for the next."""
        self._armed = None
        scheduler = self.scheduler or asyncio.get_running_loop()
        now = scheduler.time()
        due = now + _TICK
        deadlines = self._deadlines
        while deadlines:
            deadline, _seq, op = deadlines[0]
            if op.completed:
                heapq.heappop(deadlines)
            elif deadline <= due:
                heapq.heappop(deadlines)
                try:
                    op.run()
                except Exception:  # one operation's listener failing must not stop the others expiring
                    log.exception("expiring a delayed operation in the %s purgatory failed", self.name)
            else:
                self._armed_at = deadline
                self._armed = scheduler.call_later(deadline - now, self._expire)
                return

    def _purge(self) -> None:
        self._deadlines = [e for e in self._deadlines if not e[2].completed]
        heapq.heapify(self._deadlines)

    def check_and_complete(self, key: K) -> int:
        """Try every operation watching ``key``; returns how many completed."""
        w = self.watchers.get(key)
        if not w:
            return 0
        done = 0
        for op in list(w):
            if op.completed:
                continue
            try:
                if op.try_complete(key):
                    done += 1
            except Exception as e:
                op.fail(e)
                done += 1
        return done

    def is_watched(self, key: K) -> bool:
        return key in self.watchers

    def watched(self, key: K) -> int:
        """How many operations watch ``key`` (Kafka's checkAndComplete bookkeeping, for tests)."""
        return len(self.watchers.get(key, ()))

    def delayed(self) -> int:
        """Operations waiting (Kafka's purgatory size metric)."""
        return len(self._pending)

    def cancel_all(self) -> None:
        """Drop every waiting operation unanswered (broker shutdown)."""
        for op in list(self._pending):
            op.cancel()
        self.watchers.clear()
        self._pending.clear()
        self._deadlines.clear()
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None

    def _unwatch(self, op: DelayedOperation[Any]) -> None:
        self._pending.pop(op, None)
        watchers = self.watchers
        for k in op._keys:
            w = watchers.get(k)
            if w is not None:
                w.pop(op, None)
                if not w:
                    del watchers[k]
        op._keys = ()


class DelayedResponse:
    """What a handler returns for a request a delayed operation answers (an acks=all produce, a
    fetch waiting for data): the connection listens to ``op`` itself (:meth:`DelayedOperation.then`)
    and writes ``build(response)`` from the very call that completes it. A follower's fetch that
    completes a produce, or an append that wakes a fetch, thus gets the response onto the socket in
    the same event-loop iteration; through an asyncio Future (:func:`future_of`) the connection's
    done-callback would run an iteration later, after every other socket ready by then (at 100 MB/s,
    whole produce bursts of other connections)."""

    __slots__ = ("op", "build")

    def __init__(self, op: DelayedOperation[Any], build: Callable[[Any], Any]) -> None:
        self.op = op
        self.build = build


def future_of(op: DelayedOperation[R], build: Callable[[R], Any]) -> asyncio.Future[Any]:
    """An asyncio future of ``build(response)``, set when ``op`` completes (with the exception
    when it failed); the request layer parks it on the connection."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def done(response: Any, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            if isinstance(error, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(error)
            return
        try:
            fut.set_result(build(response))
        except Exception as e:
            fut.set_exception(e)

    op.then(done)
    return fut
