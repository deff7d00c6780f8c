"""The suite's own guard: a broker started here cannot grow past its address-space cap."""

from __future__ import annotations

from pathlib import Path

from integration.broker import Broker

from .conftest import BROKER_MEMORY_LIMIT


def test_broker_runs_under_the_memory_cap(broker: Broker) -> None:
    assert broker.pid is not None
    limits = Path(f"/proc/{broker.pid}/limits").read_text()
    line = next(x for x in limits.splitlines() if x.startswith("Max address space"))
    assert line.split()[3] == str(BROKER_MEMORY_LIMIT)
