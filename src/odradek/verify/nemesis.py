"""Faults injected into a verification run (Jepsen's nemeses), on a schedule that is random but seeded
and printed, so that a run can be repeated.

Families (``--nemesis``, comma-separated):

- ``kill``: SIGKILL of one broker, restarted ``heal_s`` (4-12 s) later;
- ``kill2``: SIGKILL of two brokers at once (a minority left), both restarted ``heal_s`` later;
- ``kill-controller``: SIGKILL of whichever broker is the controller at that moment, restarted
  ``heal_s`` later;
- ``pause``: SIGSTOP of one broker (a leader that wakes up believing it still leads), SIGCONT
  ``heal_s`` later;
- network cuts, with each broker in its own network namespace (odradek.verify.netns): ``partition``
  (one broker and the other two lose each other), ``one-way`` (one broker hears nothing from the
  others), ``bridge`` (two brokers lose each other, the third sees both), ``isolate`` (one broker
  loses everything: brokers, ZooKeeper and clients), each healed ``heal_s`` later.

- ``zookeeper``: SIGKILL of ZooKeeper (the metadata store, and with it the controller's and every
  broker's session), restarted on its data ``heal_s`` later.

- ``disk-full``: one or two brokers' log dirs (each on its own size-limited tmpfs,
  odradek.verify.disks) filled to ENOSPC by a filler file, held ``heal_s``; then the filler is removed
  and a broker that stopped (Odradek, as Kafka, halts when its last log dir fails) is restarted;
- ``clock``: Jepsen's clock nemesis on one to three brokers' wall clocks (libfaketime,
  odradek.verify.clock; the monotonic clock stays real): ``bump`` moves it by -300..+300 s,
  ``strobe`` flips it between real and an offset of up to 300 s every 50-1000 ms; reset to the
  real time ``heal_s`` later (a last jump of its own).

The schedule is a list of :class:`Fault` (start time, family, brokers); :func:`schedule` makes it from a
seed and :class:`Nemesis` applies it to a :class:`Target` (odradek.verify.runner's cluster), recording
in :attr:`Nemesis.evidence` what the disk and clock faults were seen to do.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

PROCESS_FAMILIES = ("kill", "kill2", "kill-controller", "pause")
STORE_FAMILIES = ("zookeeper",)
NETWORK_FAMILIES = ("partition", "one-way", "bridge", "isolate")
DISK_FAMILIES = ("disk-full",)
CLOCK_FAMILIES = ("clock",)
FAMILIES = PROCESS_FAMILIES + NETWORK_FAMILIES + STORE_FAMILIES + DISK_FAMILIES + CLOCK_FAMILIES


class Target(Protocol):
    def kill(self, broker: int) -> None: ...
    def restart(self, broker: int) -> None: ...
    def pause(self, broker: int) -> None: ...
    def resume(self, broker: int) -> None: ...
    def partition(self, kind: str, brokers: tuple[int, ...]) -> None: ...
    def heal_network(self) -> None: ...
    def controller(self) -> int | None: ...
    def kill_store(self) -> None: ...
    def restart_store(self) -> None: ...
    def fill_disk(self, broker: int) -> str: ...
    def free_disk(self, broker: int) -> str: ...
    def shift_clock(self, broker: int, offset_s: float, observe: bool) -> str: ...
    def reset_clocks(self) -> None: ...


@dataclass(frozen=True)
class ClockChange:
    """Jepsen's clock nemesis: ``bump`` sets the wall clock ``offset_s`` away from the real time;
    ``strobe`` flips it between the real time and ``offset_s`` away every ``period_s``."""

    kind: str  # bump | strobe
    offset_s: float
    period_s: float = 0.0

    def __str__(self) -> str:
        if self.kind == "bump":
            return f"bump {self.offset_s:+.1f}s"
        return f"strobe {self.offset_s:+.1f}s every {self.period_s * 1000:.0f}ms"

    def offset_at(self, elapsed_s: float) -> float:
        """The offset ``elapsed_s`` after the change began."""
        if self.kind == "bump":
            return self.offset_s
        return self.offset_s if int(elapsed_s / self.period_s) % 2 == 0 else 0.0


def clock_change(rnd: random.Random, max_s: float = 300.0) -> ClockChange:
    offset = round(rnd.choice((-1, 1)) * rnd.uniform(1.0, max_s), 1)
    if rnd.random() < 0.5:
        return ClockChange("bump", offset)
    return ClockChange("strobe", offset, round(rnd.uniform(0.05, 1.0), 3))


@dataclass(frozen=True)
class Fault:
    at_s: float  # from the start of the run
    family: str
    brokers: tuple[int, ...]
    heal_s: float
    clock: ClockChange | None = None  # the clock family's change

    def __str__(self) -> str:
        who = f" broker(s) {','.join(map(str, self.brokers))}" if self.brokers else ""
        what = f" {self.clock}" if self.clock is not None else ""
        return f"t+{self.at_s:.1f}s {self.family}{who}{what} for {self.heal_s:.1f}s"


def parse_families(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FAMILIES and n != "none"]
    if unknown:
        raise ValueError(f"unknown nemesis {', '.join(unknown)}; known: {', '.join(FAMILIES)}, none")
    return tuple(n for n in names if n != "none")


def schedule(families: Sequence[str], brokers: Sequence[int], duration_s: float, seed: int,
             interval_s: tuple[float, float] = (5.0, 12.0), heal_s: tuple[float, float] = (4.0, 12.0)) -> list[Fault]:
    """Faults one after another (each healed before the next starts), until ``duration_s``."""
    if not families:
        return []
    rnd = random.Random(seed)
    out: list[Fault] = []
    t = rnd.uniform(*interval_s)
    while True:
        family = rnd.choice(list(families))
        heal = rnd.uniform(*heal_s)
        if t + heal > duration_s:
            return out
        n = 2 if family in ("kill2", "bridge") else 0 if family in STORE_FAMILIES + ("kill-controller",) else 1
        clock: ClockChange | None = None
        if family == "disk-full":  # (these draws only for the new families: older seeds keep their schedules)
            n = rnd.choice((1, 2))
        elif family == "clock":
            n = rnd.randint(1, len(brokers))
            clock = clock_change(rnd)
        out.append(Fault(round(t, 2), family, tuple(sorted(rnd.sample(list(brokers), n))), round(heal, 2), clock))
        t += heal + rnd.uniform(*interval_s)


class Nemesis:
    """Applies a schedule from a thread; :meth:`stop` heals what is broken and returns."""

    def __init__(self, target: Target, faults: Sequence[Fault], log: Callable[[str], None] = print) -> None:
        self.target = target
        self.faults = list(faults)
        self.log = log
        self.applied: list[Fault] = []
        self.evidence: list[str] = []  # what the faults did, as observed (a filler's ENOSPC, a shifted clock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._broken: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        for f in self.faults:
            if self._stop.wait(max(0.0, self._t0 + f.at_s - time.monotonic())):
                return
            self.log(f"nemesis: {f}")
            with self._lock:
                if f.family in NETWORK_FAMILIES:
                    self.target.partition(f.family, f.brokers)
                    self._broken.append(("cut", 0))
                elif f.family in STORE_FAMILIES:
                    self.target.kill_store()
                    self._broken.append(("store", 0))
                victims: tuple[int, ...] = f.brokers
                if f.family == "kill-controller":
                    c = self.target.controller()
                    victims = (c,) if c is not None else ()
                    self.log(f"nemesis: the controller is broker {c}")
                if f.family == "disk-full":
                    for b in f.brokers:
                        self._evidence(self.target.fill_disk(b))
                        self._broken.append(("disk", b))
                if f.clock is not None:
                    self._broken.append(("clock", 0))
                    self._set_clocks(f, 0.0)
                for b in victims if f.family in PROCESS_FAMILIES else ():
                    if f.family in ("kill", "kill2", "kill-controller"):
                        self.target.kill(b)
                        self._broken.append(("killed", b))
                    else:
                        self.target.pause(b)
                        self._broken.append(("paused", b))
                self.applied.append(f)
            if f.clock is not None and f.clock.kind == "strobe":
                started = time.monotonic()
                while not self._stop.wait(f.clock.period_s):
                    elapsed = time.monotonic() - started
                    if elapsed >= f.heal_s:
                        break
                    with self._lock:
                        if self._broken:
                            self._set_clocks(f, elapsed, quiet=True)
                if self._stop.is_set():
                    return
            elif self._stop.wait(f.heal_s):
                return
            self._heal()

    def _evidence(self, text: str) -> None:
        if text:
            self.evidence.append(text)
            self.log(f"nemesis: {text}")

    def _set_clocks(self, f: Fault, elapsed_s: float, quiet: bool = False) -> None:
        assert f.clock is not None
        offset = f.clock.offset_at(elapsed_s)
        for b in f.brokers:
            self._evidence(self.target.shift_clock(b, offset, not quiet))

    def _heal(self) -> None:
        with self._lock:
            for what, b in self._broken:
                if what == "killed":
                    self.target.restart(b)
                elif what == "paused":
                    self.target.resume(b)
                elif what == "store":
                    self.target.restart_store()
                elif what == "disk":
                    self._evidence(self.target.free_disk(b))
                elif what == "clock":
                    self.target.reset_clocks()
                else:
                    self.target.heal_network()
                healed = {"cut": "the network", "store": "ZooKeeper", "clock": "the clocks"}.get(
                    what, f"broker {b} ({what})")
                self.log(f"nemesis: healed {healed}")
            self._broken.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._heal()
