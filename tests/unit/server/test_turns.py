"""odradek.server.turns: a few items per loop turn, others served in between."""

from __future__ import annotations

import asyncio

from odradek.server.turns import in_turns


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
