"""``python -m odradek.verify.faketime_boot ARGS``: ``python -m odradek ARGS`` under libfaketime.

Debian's libfaketime 0.9.10 with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` makes every ``time.sleep`` of
Python 3.11 fail with EINVAL (its ``clock_nanosleep`` with an absolute monotonic deadline: libfaketime
issue #426; see odradek.verify.clock). This replaces ``time.sleep`` before anything else is imported
(kazoo keeps a reference to it) with a ``select`` timeout, which libfaketime leaves alone, then runs
odradek's command line. Only verification runs start brokers this way.
"""

from __future__ import annotations

import runpy
import select
import sys
import time
from typing import SupportsIndex


def sleep(seconds: float | SupportsIndex) -> None:
    s = float(seconds.__index__()) if not isinstance(seconds, float) else seconds
    if s < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], s)  # retried with the time left after a signal (PEP 475)


def main() -> None:
    time.sleep = sleep
    sys.argv = ["odradek", *sys.argv[1:]]
    runpy.run_module("odradek", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
