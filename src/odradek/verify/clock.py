"""Wall-clock faults for verification runs (Jepsen's clock nemesis), with Debian's libfaketime.

Each broker runs with ``LD_PRELOAD`` of libfaketime and reads its offset from its own file
(``FAKETIME_TIMESTAMP_FILE``, ``+120s`` / ``-90.5s``, re-read on every call: ``FAKETIME_NO_CACHE=1``),
which the nemesis rewrites (atomically: a rename). Only the wall clock moves
(``FAKETIME_DONT_FAKE_MONOTONIC=1``), as Jepsen changes the wall clock only; files' timestamps are the
kernel's, not shifted (``NO_FAKE_STAT=1``), as on a machine whose clock moved after they were written.

Three things about Debian's libfaketime 0.9.10, found by experiment:

- it is built in two flavours; the multi-threaded one (libfaketimeMT.so.1) is used: a broker calls
  ``time.time()`` from several threads at once;
- with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` its ``clock_nanosleep`` turns an absolute monotonic
  deadline into a negative time (libfaketime issue #426, fixed after 0.9.10), and Python 3.11's
  ``time.sleep`` sleeps so: every ``time.sleep`` raises ``OSError: [Errno 22]``. The brokers are therefore
  started through :mod:`odradek.verify.faketime_boot`, which replaces ``time.sleep`` with a wait that
  libfaketime passes through untouched (``select`` with a timeout), then runs ``odradek`` as usual;
- unless ``FAKETIME_FORCE_MONOTONIC_FIX=0``, its ``pthread_cond_timedwait`` reads the absolute
  CLOCK_MONOTONIC deadline of CPython's GIL wait as a wall-clock time long past and returns at once:
  a thread waiting for the GIL then forces a switch every few microseconds instead of every 5 ms
  (``sys.getswitchinterval()``). Three brokers so took 3-8 s to start instead of 0.1-0.2 s, stopped
  answering for 5 s at a time, and a 35-second run acknowledged 22 sends instead of about 9,000.

:meth:`Clocks.observe` runs a Python process in the broker's environment (and network namespace) and
reports the offset it sees, and whether the broker's process has libfaketime mapped; and
:class:`BrokerClockProbe` asks the broker itself: it produces a record to the broker's own partition
of a LogAppendTime topic (``odradek-verify-clock``, one single-replica partition per broker), whose
timestamp the broker's ``time.time()`` gives. That is the run's evidence that a clock really moved.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIB_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
)


def find_library() -> str | None:
    return next((p for p in LIB_CANDIDATES if os.path.exists(p)), None)


def offset_text(offset_s: float) -> str:
    """libfaketime's relative offset syntax: ``+120s``, ``-90.5s``."""
    return f"{offset_s:+.3f}s"


def environment(lib: str, offset_file: Path) -> dict[str, str]:
    return {
        "LD_PRELOAD": lib,
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "NO_FAKE_STAT": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


@dataclass
class Clocks:
    lib: str
    dir: Path  # holds clock-<i> for each broker
    brokers: int
    offsets: dict[int, float] = field(default_factory=dict)

    def file(self, i: int) -> Path:
        return self.dir / f"clock-{i}"

    def env(self, i: int) -> dict[str, str]:
        return environment(self.lib, self.file(i))

    def setup(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for i in range(1, self.brokers + 1):
            self.set(i, 0.0)

    def set(self, i: int, offset_s: float) -> None:
        tmp = self.file(i).with_suffix(".tmp")
        tmp.write_text(offset_text(offset_s) + "\n")
        os.replace(tmp, self.file(i))
        self.offsets[i] = offset_s

    def reset(self) -> None:
        for i in range(1, self.brokers + 1):
            if self.offsets.get(i, 0.0) != 0.0:
                self.set(i, 0.0)

    def observe(self, i: int, prefix: list[str], pid: int | None) -> str:
        """What broker ``i``'s environment sees: its wall clock's offset from this process's, and
        whether the broker's process (``pid``) has libfaketime mapped."""
        before = time.time()
        r = subprocess.run([*prefix, sys.executable, "-c", "import time; print(repr(time.time()))"],
                           capture_output=True, text=True, timeout=30, env={**os.environ, **self.env(i)})
        after = time.time()
        try:
            seen = float(r.stdout.strip()) - (before + after) / 2
            text = f"observed {seen:+.1f}s"
        except ValueError:
            text = f"not observed ({r.stderr.strip()[-200:] or r.returncode})"
        mapped = "?"
        if pid is not None:
            with contextlib.suppress(OSError):
                mapped = "yes" if "libfaketime" in Path(f"/proc/{pid}/maps").read_text() else "NO"
        return (f"clock: broker {i} set to {offset_text(self.offsets.get(i, 0.0))}, {text} "
                f"(libfaketime in broker pid {pid}: {mapped})")


PROBE_TOPIC = "odradek-verify-clock"


class BrokerClockProbe:
    """Broker ``i``'s wall clock as the broker reads it: the LogAppendTime of a record produced to
    partition ``i - 1`` of :data:`PROBE_TOPIC`, whose only replica is broker ``i``."""

    def __init__(self, bootstrap: str, brokers: int) -> None:
        self.bootstrap = bootstrap
        self.brokers = brokers
        self._producer: Any = None
        self.last_error = ""

    def setup(self, timeout_s: float = 60.0) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})  # no notice at its end
        topic = NewTopic(PROBE_TOPIC, self.brokers, replica_assignment=[[i] for i in range(1, self.brokers + 1)],
                         config={"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "1"})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                admin.create_topics([topic])[PROBE_TOPIC].result(30)
                break
            except Exception as e:
                if "already exists" in str(e).lower():
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def offset(self, i: int, timeout_s: float = 5.0) -> float | None:
        """The broker's clock minus this process's (seconds), or None when the broker did not answer within
        ``timeout_s`` (:attr:`last_error` then says what the client saw). Tried in attempts of at most 10 s, each
        with a fresh client: on a loaded machine one client's first metadata can name no leader yet."""
        deadline = time.monotonic() + timeout_s
        self.last_error = "no attempt"
        while (left := deadline - time.monotonic()) > 0.5:
            got = self._attempt(i, min(left, 10.0))
            if got is not None:
                return got
            self._producer = None
        return None

    def _attempt(self, i: int, timeout_s: float) -> float | None:
        from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer

        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "1", "linger.ms": 0,
                                       "message.timeout.ms": max(int(timeout_s * 1000), 1000),
                                       "enable.idempotence": False, "log_level": 0})
        got: list[float] = []

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self.last_error = str(err)
                return
            kind, ts = msg.timestamp()
            if kind == TIMESTAMP_LOG_APPEND_TIME:
                got.append(ts / 1000.0)
            else:
                self.last_error = f"timestamp type {kind}, not LogAppendTime"

        before = time.time()
        self._producer.produce(PROBE_TOPIC, b"", partition=i - 1, on_delivery=done)
        if self._producer.flush(timeout_s + 1) > 0:
            self.last_error = f"not delivered within {timeout_s:.0f} s"
        after = time.time()
        return got[0] - (before + after) / 2 if got else None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1)
            self._producer = None
