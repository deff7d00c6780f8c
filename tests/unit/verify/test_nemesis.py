"""The nemesis's schedule and parsing, the disk-full and clock families' pieces (odradek.verify.nemesis,
.disks, .clock, .faketime_boot), and a process under libfaketime as the brokers run."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.verify import campaign, clock, disks, nemesis


def test_parse_families_knows_the_new_families() -> None:
    assert nemesis.parse_families("disk-full, clock,none") == ("disk-full", "clock")
    with pytest.raises(ValueError, match="unknown nemesis disk"):
        nemesis.parse_families("disk")


def test_schedule_of_disk_and_clock_faults() -> None:
    faults = nemesis.schedule(["disk-full", "clock"], [1, 2, 3], 600, seed=3)
    assert faults == nemesis.schedule(["disk-full", "clock"], [1, 2, 3], 600, seed=3)  # seeded
    assert {f.family for f in faults} == {"disk-full", "clock"}
    for f in faults:
        assert f.at_s + f.heal_s <= 600
        if f.family == "disk-full":
            assert len(f.brokers) in (1, 2) and f.clock is None
        else:
            assert 1 <= len(f.brokers) <= 3 and f.clock is not None
            assert 1.0 <= abs(f.clock.offset_s) <= 300.0
            assert f.clock.kind in ("bump", "strobe")
            if f.clock.kind == "strobe":
                assert 0.05 <= f.clock.period_s <= 1.0
    assert {len(f.brokers) for f in faults if f.family == "disk-full"} == {1, 2}
    assert {f.clock.kind for f in faults if f.clock is not None} == {"bump", "strobe"}
    assert any(f.clock.offset_s < 0 for f in faults if f.clock) and any(f.clock.offset_s > 0 for f in faults if f.clock)


def test_older_families_keep_their_schedules() -> None:
    # the new families draw their extra numbers only when chosen: a seed of the older families
    # gives the schedule it gave before them (tests/cluster/test_verify.py relies on seeds)
    faults = nemesis.schedule(["kill", "kill2", "kill-controller", "pause", "zookeeper"], [1, 2, 3], 45, 76)
    assert [(f.family, f.brokers) for f in faults] == [("pause", (2,)), ("kill2", (2, 3)), ("kill-controller", ())]


def test_clock_change_text_and_strobe() -> None:
    bump = nemesis.ClockChange("bump", -90.0)
    assert str(bump) == "bump -90.0s" and bump.offset_at(0) == bump.offset_at(100) == -90.0
    strobe = nemesis.ClockChange("strobe", 120.0, 0.5)
    assert str(strobe) == "strobe +120.0s every 500ms"
    assert [strobe.offset_at(t) for t in (0.0, 0.4, 0.6, 0.9, 1.1)] == [120.0, 120.0, 0.0, 0.0, 120.0]
    assert "strobe" in str(nemesis.Fault(1.0, "clock", (2,), 3.0, strobe))
    changes = [nemesis.clock_change(random.Random(s)) for s in range(40)]
    assert all(1.0 <= abs(c.offset_s) <= 300.0 for c in changes)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def kill(self, broker: int) -> None: ...
    def restart(self, broker: int) -> None: ...
    def pause(self, broker: int) -> None: ...
    def resume(self, broker: int) -> None: ...
    def partition(self, kind: str, brokers: tuple[int, ...]) -> None: ...
    def heal_network(self) -> None: ...
    def controller(self) -> int | None:
        return None
    def kill_store(self) -> None: ...
    def restart_store(self) -> None: ...

    def fill_disk(self, broker: int) -> str:
        self.calls.append(("fill", broker))
        return f"filled {broker}"

    def free_disk(self, broker: int) -> str:
        self.calls.append(("free", broker))
        return f"freed {broker}"

    def shift_clock(self, broker: int, offset_s: float, observe: bool) -> str:
        self.calls.append(("clock", broker, offset_s, observe))
        return f"clock {broker} {offset_s}" if observe else ""

    def reset_clocks(self) -> None:
        self.calls.append(("reset",))


def test_nemesis_applies_and_heals_disk_and_clock_faults() -> None:
    target = Recorder()
    faults = [nemesis.Fault(0.0, "disk-full", (1, 3), 0.0),
              nemesis.Fault(0.0, "clock", (2,), 0.0, nemesis.ClockChange("bump", 30.0))]
    nem = nemesis.Nemesis(target, faults, log=lambda _: None)
    nem.start()
    nem._thread.join(10)  # noqa: SLF001 (the schedule ran through: every fault healed)
    assert target.calls == [("fill", 1), ("fill", 3), ("free", 1), ("free", 3), ("clock", 2, 30.0, True), ("reset",)]
    assert nem.evidence == ["filled 1", "filled 3", "freed 1", "freed 3", "clock 2 30.0"]
    assert nem.applied == faults


def test_campaign_mixes() -> None:
    assert ("disk-full",) in campaign.MIXES and ("clock",) in campaign.MIXES
    assert set(campaign.MIXES[-1]) == set(nemesis.FAMILIES)
    assert campaign.mixes_of(("disk-full", "clock")) == (("disk-full",), ("clock",), ("disk-full", "clock"))
    assert campaign.mixes_of(()) == campaign.MIXES


def test_fill_stops_at_enospc() -> None:
    written, err = disks.fill(Path("/dev/full"))
    assert written == 0 and err is not None and err.errno == errno.ENOSPC


def test_clock_files_and_environment(tmp_path: Path) -> None:
    c = clock.Clocks("/lib/fake.so", tmp_path / "clocks", 3)
    c.setup()
    assert (tmp_path / "clocks" / "clock-2").read_text() == "+0.000s\n"
    c.set(2, -90.5)
    assert (tmp_path / "clocks" / "clock-2").read_text() == "-90.500s\n"
    c.reset()
    assert (tmp_path / "clocks" / "clock-2").read_text() == "+0.000s\n"
    env = c.env(1)
    assert env["LD_PRELOAD"] == "/lib/fake.so" and env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert env["FAKETIME_TIMESTAMP_FILE"].endswith("clock-1") and env["FAKETIME_NO_CACHE"] == "1"
    # CPython's GIL waits on a CLOCK_MONOTONIC condition: libfaketime's "fix" makes that wait return at once
    assert env["FAKETIME_FORCE_MONOTONIC_FIX"] == "0" and env["NO_FAKE_STAT"] == "1"


PROBE = """
import time, threading, asyncio, uvloop
import odradek.verify.faketime_boot as boot
time.sleep = boot.sleep
w0, m0 = time.time(), time.monotonic()
open(FILE, "w").write("+120s\\n")
w1, m1 = time.time(), time.monotonic()
time.sleep(0.05)  # libfaketime 0.9.10 makes Python's own time.sleep fail with EINVAL
async def main():
    await asyncio.sleep(0.01)
    return await asyncio.get_running_loop().run_in_executor(None, time.time)
w2 = uvloop.run(main())
threads = [threading.Thread(target=lambda: [time.time() for _ in range(2000)]) for _ in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
print(round(w1 - w0), round(m1 - m0), round(w2 - w0))
"""


def test_a_process_under_libfaketime_sees_the_wall_clock_move_and_the_monotonic_clock_not(tmp_path: Path) -> None:
    lib = clock.find_library()
    assert lib is not None, "libfaketime is not installed (scripts/setup.sh installs it)"
    f = tmp_path / "clock-1"
    f.write_text("+0s\n")
    env = {**os.environ, **clock.environment(lib, f)}
    r = subprocess.run([sys.executable, "-c", f"FILE = {str(f)!r}\n" + PROBE], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["120", "0", "120"]
