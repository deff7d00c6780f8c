"""The embedded controller event queue runs one event per loop turn (the loop serves clients in
between); start-up's drain runs them all at once."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.controller.event_manager import ControllerEventManager


def test_embedded_events_run_one_per_loop_turn() -> None:
    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        events = ControllerEventManager(lambda kind, args: seen.append(kind), threaded=False)
        events.start(loop)
        for kind in ("a", "b", "c"):
            events.put(kind)

        def between() -> None:  # queued after the events: runs before the second one
            seen.append("client")

        loop.call_soon(between)
        for _ in range(5):
            await asyncio.sleep(0)
        return seen

    assert asyncio.run(run()) == ["a", "client", "b", "c"]


def test_drain_runs_everything_now() -> None:
    seen: list[str] = []

    def process(kind: str, args: dict[str, Any]) -> None:
        seen.append(kind)
        if kind == "a":
            events.put("b")  # queued by an event: also run by the same drain

    events = ControllerEventManager(process, threaded=False)
    events.put("a")
    events.drain()
    assert seen == ["a", "b"]
