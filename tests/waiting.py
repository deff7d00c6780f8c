"""The suite's one polling helper: ``from waiting import wait_until`` (``tests/`` is on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], timeout: float, what: str = "the condition", *, interval: float = 0.1,
               detail: Callable[[], object] | None = None) -> T:
    """Call ``cond`` every ``interval`` seconds until it returns something true, and return that. Past
    ``timeout`` seconds (``cond`` is called once more then) fail with ``what``, and ``detail()`` if given."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{extra}")
        time.sleep(interval)
