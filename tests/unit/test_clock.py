"""odradek.clock: the system clock reads the machine's, the manual one moves only when told to."""

from __future__ import annotations

import threading
import time

import pytest

from odradek.clock import SYSTEM_CLOCK, ManualClock


def test_system_clock_reads_the_machine() -> None:
    before = time.time_ns() // 1_000_000
    assert before <= SYSTEM_CLOCK.wall_ms() <= time.time_ns() // 1_000_000
    a = SYSTEM_CLOCK.monotonic_ns()
    assert SYSTEM_CLOCK.monotonic_ns() >= a


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall_ms=1_000, monotonic_ns=5)
    assert (clock.wall_ms(), clock.monotonic_ns()) == (1_000, 5)
    clock.advance(250)
    assert (clock.wall_ms(), clock.monotonic_ns()) == (1_250, 250_000_005)
    clock.set_wall_ms(500)  # a jump back of the wall clock alone
    assert (clock.wall_ms(), clock.monotonic_ns()) == (500, 250_000_005)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_manual_clock_starts_at_the_machines_time() -> None:
    assert abs(ManualClock().wall_ms() - time.time_ns() // 1_000_000) < 5_000


def test_manual_clock_is_safe_across_threads() -> None:
    clock = ManualClock(wall_ms=0)
    threads = [threading.Thread(target=lambda: [clock.advance(1) for _ in range(1000)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.wall_ms() == 4000 and clock.monotonic_ns() == 4000 * 1_000_000
