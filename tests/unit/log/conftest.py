"""Every Log a test here creates or opens (directly, through log_helpers or a LogManager) has its
descriptors and index maps released when the test ends: the tests leave logs open, and a log's
segments reference it back, so without this they wait for a full garbage collection while the
pytest-xdist worker runs other files (one worker reached 1,240 descriptors, and py4j's callback
server, which waits with select(), cannot take a descriptor past 1,023: a pipeline test later in that
worker never saw its micro-batches)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.log.log import Log


@pytest.fixture(autouse=True)
def _release_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    opened: list[Log] = []
    for name in ("create", "open"):
        made = getattr(Log, name)

        def tracked(*args: Any, _made: Any = made, **kwargs: Any) -> Log:
            lg = _made(*args, **kwargs)
            opened.append(lg)
            return lg

        monkeypatch.setattr(Log, name, tracked)
    yield
    for lg in opened:
        if not lg.closed:
            with contextlib.suppress(Exception):
                lg.close_handlers()
