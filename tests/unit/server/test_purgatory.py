"""odradek.purgatory: delayed operations complete exactly once, on a key check, on expiry or not at
all when cancelled (Kafka's DelayedOperation / DelayedOperationPurgatory). No loop, no socket: a
fake scheduler drives time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.purgatory import DelayedOperation, DelayedOperationPurgatory, future_of

from ..fake_scheduler import FakeScheduler


class Counter(DelayedOperation[str]):
    """Completes once ``state[key] >= target`` for every key it waits on."""

    __slots__ = ("state", "targets", "completions", "expired", "tries")

    def __init__(self, state: dict[str, int], targets: dict[str, int], delay_ms: int = 100) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.targets = targets
        self.completions = 0
        self.expired = 0
        self.tries = 0

    def try_complete(self, key: Any = None) -> bool:
        self.tries += 1
        if all(self.state.get(k, 0) >= t for k, t in self.targets.items()):
            return self.force_complete()
        return False

    def on_complete(self) -> str:
        self.completions += 1
        return "done" if all(self.state.get(k, 0) >= t for k, t in self.targets.items()) else "expired"

    def on_expiration(self) -> None:
        self.expired += 1


def test_completes_at_once_without_watching() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    op = Counter({"a": 1}, {"a": 1})
    assert purgatory.try_complete_else_watch(op, ["a"])
    assert op.completed and op.response == "done" and op.completions == 1
    assert purgatory.delayed() == 0 and not purgatory.is_watched("a") and sched.pending_timers() == 0


def test_completes_on_key_check_exactly_once() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    state = {"a": 0, "b": 0}
    op = Counter(state, {"a": 1, "b": 1})
    seen: list[tuple[Any, Any]] = []
    op.then(lambda r, e: seen.append((r, e)))
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched("a") == purgatory.watched("b") == 1 and purgatory.delayed() == 1
    assert purgatory.check_and_complete("unrelated") == 0
    state["a"] = 1
    assert purgatory.check_and_complete("a") == 0 and not op.completed
    state["b"] = 1
    assert purgatory.check_and_complete("b") == 1
    assert seen == [("done", None)] and op.completions == 1
    # gone from every watcher list and the timer cancelled at once
    assert not purgatory.is_watched("a") and not purgatory.is_watched("b") and purgatory.delayed() == 0
    # later checks, expiry and forcing do nothing more
    assert purgatory.check_and_complete("a") == 0
    sched.advance(1000)
    assert not op.force_complete()
    op.run()
    assert op.completions == 1 and op.expired == 0 and seen == [("done", None)]


def test_expires_through_the_injected_timer() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    op = Counter({}, {"a": 1}, delay_ms=250)
    seen: list[Any] = []
    op.then(lambda r, e: seen.append(r))
    purgatory.try_complete_else_watch(op, ["a"])
    sched.advance(249)
    assert not op.completed
    sched.advance(1)
    assert op.completed and op.completions == 1 and op.expired == 1 and seen == ["expired"]
    assert not purgatory.is_watched("a") and purgatory.delayed() == 0


def test_cancel_answers_nothing_and_unwatches() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    state = {"a": 0}
    ops = [Counter(state, {"a": 1}) for _ in range(3)]
    seen: list[Any] = []
    for op in ops:
        op.then(lambda r, e: seen.append(type(e)))
        purgatory.try_complete_else_watch(op, ["a"])
    ops[0].cancel()
    assert purgatory.watched("a") == 2 and ops[0].completions == 0 and seen == [asyncio.CancelledError]
    purgatory.cancel_all()
    assert purgatory.delayed() == 0 and not purgatory.is_watched("a") and sched.pending_timers() == 0
    state["a"] = 1
    sched.advance(1000)
    assert all(op.completions == 0 for op in ops) and len(seen) == 3


def test_an_operation_that_raises_fails_alone() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    state = {"a": 0}

    class Broken(Counter):
        __slots__ = ()

        def try_complete(self, key: Any = None) -> bool:
            if state["a"]:
                raise RuntimeError("boom")
            return False

    bad, good = Broken(state, {"a": 1}), Counter(state, {"a": 1})
    errors: list[Any] = []
    bad.then(lambda r, e: errors.append(e))
    purgatory.try_complete_else_watch(bad, ["a"])
    purgatory.try_complete_else_watch(good, ["a"])
    state["a"] = 1
    assert purgatory.check_and_complete("a") == 2
    assert isinstance(errors[0], RuntimeError) and good.response == "done" and purgatory.delayed() == 0


def test_future_of_bridges_to_asyncio() -> None:
    async def run() -> None:
        sched = FakeScheduler()
        purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
        state = {"a": 0}
        op = Counter(state, {"a": 1})
        purgatory.try_complete_else_watch(op, ["a"])
        fut = future_of(op, str.upper)
        state["a"] = 1
        purgatory.check_and_complete("a")
        assert await fut == "DONE"
        cancelled = Counter(state, {"a": 2})
        purgatory.try_complete_else_watch(cancelled, ["a"])
        fut = future_of(cancelled, str.upper)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fut
        # an operation completed before anyone listens still answers
        done = Counter(state, {"a": 1})
        assert purgatory.try_complete_else_watch(done, ["a"])
        assert await future_of(done, str.upper) == "DONE"

    asyncio.run(run())


def test_deadlines_expire_in_order_with_one_timer() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    state: dict[str, int] = {}
    late, early, middle = Counter(state, {"a": 1}, 300), Counter(state, {"a": 1}, 100), Counter(state, {"a": 1}, 200)
    for op in (late, early, middle):
        purgatory.try_complete_else_watch(op, ["a"])
    assert sched.pending_timers() == 1  # re-armed once for the earlier deadline, not one per operation
    sched.advance(100)
    assert (late.expired, early.expired, middle.expired) == (0, 1, 0)
    sched.advance(100)
    assert (late.expired, middle.expired) == (0, 1)
    sched.advance(100)
    assert late.expired == 1 and purgatory.delayed() == 0 and sched.pending_timers() == 0


def test_completed_operations_leave_the_deadline_heap() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("test", sched)
    state = {"a": 0}
    for i in range(1000):
        purgatory.try_complete_else_watch(Counter(state, {"a": i + 1}, 60_000), ["a"])
        state["a"] = i + 1
        purgatory.check_and_complete("a")
    assert purgatory.delayed() == 0 and len(purgatory._deadlines) <= 130
    sched.advance(60_000)
    assert not purgatory._deadlines and sched.pending_timers() == 0
