"""A progress line for long CLI operations, on stderr only.

Shown when stderr is a terminal, or when ``--progress`` asks for it (a log file, CI); never on
stdout, which stays what the command prints for machines (JSON, Kafka's tool lines). On a terminal
the line is redrawn in place (``\\r``); elsewhere one line is written per update, at most every
``min_interval`` seconds, so a log is not flooded. :meth:`Progress.done` ends it.

    progress = Progress.for_args(args, "reset offsets", total=len(partitions))
    for i, tp in enumerate(partitions, 1):
        ...
        progress.update(i)
    progress.done()
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO


def add_progress_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action="store_true", default=None,
                   help="show a progress line on stderr even when it is not a terminal")


def enabled(flag: bool | None, stream: TextIO) -> bool:
    if flag:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    def __init__(self, label: str, total: int | None = None, *, show: bool, stream: TextIO | None = None,
                 min_interval: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = total
        self.show = show
        self.stream = stream if stream is not None else sys.stderr
        self.tty = enabled(False, self.stream)
        self.min_interval = min_interval if self.tty else max(min_interval, 1.0)
        self.clock = clock
        self.start = clock()
        self._last = float("-inf")
        self._width = 0
        self.done_count = 0

    @classmethod
    def for_args(cls, args: argparse.Namespace, label: str, total: int | None = None,
                 stream: TextIO | None = None) -> Progress:
        s = stream if stream is not None else sys.stderr
        return cls(label, total, show=enabled(getattr(args, "progress", None), s), stream=s)

    def line(self, done: int, detail: str = "") -> str:
        elapsed = self.clock() - self.start
        if self.total:
            text = f"{self.label}: {done}/{self.total} ({100.0 * done / self.total:.0f}%)"
        else:
            text = f"{self.label}: {done}"
        text += f", {elapsed:.1f}s"
        if detail:
            text += f", {detail}"
        return text

    def update(self, done: int, detail: str = "", force: bool = False) -> None:
        self.done_count = done
        if not self.show:
            return
        now = self.clock()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        self._write(self.line(done, detail))

    def _write(self, text: str) -> None:
        if self.tty:
            pad = max(self._width - len(text), 0)
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, detail: str = "") -> None:
        """The final state, then the line is ended (a terminal's cursor moves to a new line)."""
        if not self.show:
            return
        self._write(self.line(self.done_count, detail))
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
