"""odradek.server.turns: a few items per loop turn, others served in between; a connection's
pipelined requests a turn's budget at a time."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from odradek.server.connection import Connection, ConnectionEdges
from odradek.server.turns import DispatchTurns, in_turns


def test_a_request_that_fits_one_turn_is_answered_at_once() -> None:
    done: list[int] = []
    answer = in_turns([1, 2, 3], lambda i, x: done.append(x), lambda: "answer", per_turn=3)
    assert answer == "answer" and done == [1, 2, 3]


def test_a_large_request_lets_other_tasks_run_between_turns() -> None:
    async def run() -> tuple[object, list[str]]:
        trace: list[str] = []

        async def other() -> None:
            for _ in range(3):
                trace.append("other")
                await asyncio.sleep(0)

        other_task = asyncio.ensure_future(other())
        answer = in_turns(list(range(6)), lambda i, x: trace.append(f"w{x}"), lambda: "answer", per_turn=2)
        assert isinstance(answer, asyncio.Future)
        result = await answer
        await other_task
        return result, trace

    result, trace = asyncio.run(run())
    assert result == "answer"
    works = [i for i, t in enumerate(trace) if t.startswith("w")]
    assert [trace[i] for i in works] == [f"w{x}" for x in range(6)]
    # another task ran between the first and the last turn
    assert any(t == "other" for t in trace[works[0]:works[-1]])


def test_a_future_finish_is_awaited() -> None:
    async def run() -> object:
        loop = asyncio.get_running_loop()

        def finish() -> asyncio.Future[str]:
            f: asyncio.Future[str] = loop.create_future()
            loop.call_soon(f.set_result, "later")
            return f

        return await in_turns(list(range(5)), lambda i, x: None, finish, per_turn=2)

    assert asyncio.run(run()) == "later"


class _Loop:
    """call_soon collected, run turn by turn by the test."""

    def __init__(self) -> None:
        self.ready: list[tuple[Any, tuple[Any, ...]]] = []

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.ready.append((fn, args))

    def turn(self) -> None:
        ready, self.ready = self.ready, []
        for fn, args in ready:
            fn(*args)


def test_dispatch_budget_is_per_loop_turn() -> None:
    now = [0.0]
    loop = _Loop()
    turns = DispatchTurns(0.02, lambda: now[0])
    assert not turns.spent(loop)  # type: ignore[arg-type]  # the first call starts the turn
    now[0] += 0.019
    assert not turns.spent(loop)  # type: ignore[arg-type]
    now[0] += 0.001
    assert turns.spent(loop)  # type: ignore[arg-type]
    loop.turn()  # the next turn has its own budget
    assert not turns.spent(loop)  # type: ignore[arg-type]


def test_deferred_work_is_taken_in_order_at_least_one_a_turn() -> None:
    now = [0.0]
    loop = _Loop()
    turns = DispatchTurns(0.02, lambda: now[0])
    ran: list[str] = []

    def work(name: str, cost: float, again: int) -> Any:
        def resume() -> None:
            ran.append(name)
            now[0] += cost
            if again:
                turns.defer(loop, work(name, cost, again - 1))  # type: ignore[arg-type]
        return resume

    assert not turns.spent(loop)  # type: ignore[arg-type]
    for name in "abc":
        turns.defer(loop, work(name, 0.015, 1))  # type: ignore[arg-type]
    assert turns.waiting == 3 and not ran
    loop.turn()  # a new turn: a (15 ms), b (30 ms: spent), c waits at the front
    assert ran == ["a", "b"] and turns.waiting == 3
    loop.turn()
    assert ran == ["a", "b", "c", "a"]
    loop.turn()
    assert ran == ["a", "b", "c", "a", "b", "c"] and turns.waiting == 0
    loop.turn()
    assert not loop.ready


def _frames(tag: bytes, n: int) -> bytes:
    return b"".join(struct.pack(">i", 16) + tag + i.to_bytes(4, "big") + b"\0" * 11 for i in range(n))


def test_a_connection_with_pipelined_requests_lets_another_in_between() -> None:
    """50 pipelined frames read at once are handled a turn's budget at a time (in order, not
    reading meanwhile), and another connection's one request is handled in between, not after
    all of them (it used to wait for the whole burst: 10,000 JoinGroups over 100 connections
    held the loop 1-2 s)."""

    async def run() -> list[bytes]:
        now = [0.0]
        edges = ConnectionEdges(
            services=None,  # type: ignore[arg-type]  # no request reaches a handler here
            max_request_bytes=1 << 20, request_memory=None, on_closed=lambda c: None,
            on_read=lambda: None, inter_broker=None, turns=DispatchTurns(0.02, lambda: now[0]),
        )
        handled: list[bytes] = []

        def on_frame(frame: bytes | memoryview) -> None:
            handled.append(bytes(frame))
            now[0] += 0.005  # each request costs 5 ms: 4 to a turn

        socks = [socket.socketpair() for _ in range(2)]
        a, b = (Connection(edges, s, ("10.0.0.1", 5555), "PLAINTEXT") for s, _ in socks)
        for c in (a, b):
            c._on_frame = on_frame  # type: ignore[method-assign]
            c.start()
        socks[0][1].sendall(_frames(b"a", 50))
        for _ in range(100):
            await asyncio.sleep(0)
            if handled:
                break
        assert 0 < len(handled) < 50 and not a.reading  # the rest wait for later turns
        socks[1][1].sendall(_frames(b"b", 1))
        for _ in range(1000):
            if len(handled) == 51:
                break
            await asyncio.sleep(0.001)
        assert a.reading and b.reading
        for c in (a, b):
            c.close()
        for _, peer in socks:
            peer.close()
        return handled

    handled = asyncio.run(run())
    assert [f[:5] for f in handled if f[:1] == b"a"] == [b"a" + i.to_bytes(4, "big") for i in range(50)]
    assert [f[:1] for f in handled].index(b"b") < 20
