"""A request waiting on a controller event is failed, not left hanging, when the event raises or is dropped
(ControllerRunner.call_controller)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.controller.runner import ControllerRunner
from odradek.controller.store import LocalStore


def _runner(before_event: Any) -> ControllerRunner:
    def serve(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    return ControllerRunner(1, LocalStore(None), threaded=False, unclean_leader_election=lambda t: False,
                            imbalance_percentage=10, endpoint_of=lambda info: (info.host, info.port),
                            serve_local=serve, before_event=before_event)


def _call(before_event: Any) -> BaseException | None:
    async def run() -> BaseException | None:
        runner = _runner(before_event)
        loop = asyncio.get_running_loop()
        runner.loop = loop
        runner.events.start(loop)
        fut = runner.call_controller("ListReassignments", lambda answer: answer, partitions=None)
        try:
            await asyncio.wait_for(fut, 5)
        except TimeoutError:
            raise AssertionError("the request was left waiting") from None
        except Exception as e:
            return e
        return None

    return asyncio.run(run())


def test_a_failing_event_fails_the_waiting_request() -> None:
    def boom(kind: str) -> str:
        raise NameError("a bug in the controller")

    err = _call(boom)
    assert isinstance(err, NameError)


def test_a_dropped_event_fails_the_waiting_request() -> None:
    err = _call(lambda kind: None)
    assert isinstance(err, RuntimeError) and "ListReassignments" in str(err)


def test_a_served_event_answers() -> None:
    assert _call(lambda kind: kind) is None


@pytest.mark.parametrize("kind", ["ListReassignments"])
def test_no_on_error_reaches_the_controller(kind: str) -> None:
    seen: list[dict[str, Any]] = []
    runner = _runner(lambda k: k)
    real_put = runner.controller.put

    def put(run: str, **args: Any) -> None:
        seen.append(args)
        real_put(run, **args)

    runner.controller.put = put  # type: ignore[method-assign]
    runner._process(kind, {"reply": lambda *a: None, "on_error": lambda e: None, "partitions": None})
    assert seen and "on_error" not in seen[0]
