"""Histories of a Kafka workload, in the shape of Jepsen's Kafka workload (jepsen.tests.kafka): one
operation event a line, JSON::

    {"index": 7, "time": 1200345, "process": 3, "type": "invoke", "f": "send", "value": [["send", "t-0", 17]]}
    {"index": 9, "time": 1900112, "process": 3, "type": "ok",     "f": "send", "value": [["send", "t-0", [41, 17]]]}
    {"index": 10, "time": 2000000, "process": 1, "type": "ok",    "f": "poll",
     "value": [["poll", {"t-0": [[40, 16], [41, 17]]}]]}

- ``type``: ``invoke`` when a client starts an operation, then exactly one completion by the same
  ``process``: ``ok`` (it happened), ``fail`` (it certainly did not: an aborted transaction, a send
  refused before it was written), ``info`` (unknown: a timeout, a crash). A process has at most one
  operation in flight; after an ``info`` the client is replaced by a new process number.
- ``f``: ``send`` and ``poll`` (one micro-operation each, or several), ``txn`` (sends and polls in one
  Kafka transaction), and ``assign`` / ``subscribe`` (the consumer's partitions changed: its
  positions start over; the runner also records one when a rebalance hands it new partitions).
- micro-operations: ``["send", key, value]`` at invocation and ``["send", key, [offset, value]]``
  when acknowledged (``offset`` may be null when unknown); ``["poll"]`` at invocation and
  ``["poll", {key: [[offset, value], ...]}]`` on completion. Keys name partitions
  (``"topic-partition"``); values are integers unique per key.

This module reads and writes those lines and pairs each invocation with its completion
(:class:`Op`); the checker (odradek.verify.checker) reads only :class:`Op` objects.

Several clients may each record their own file (the Python clients one, each Java client program
another: peers/kafka/.../VerifyWorkload.java), with times of one clock (CLOCK_MONOTONIC) and process
numbers of their own; :func:`merge` interleaves them by time into one history. Each file's own order
is kept, so every process's invocation still comes before its completion, and the indexes are
renumbered in the merged order. A file cut short by a kill may end in half a line, which is dropped:
the operation it would have completed stays open, an ``info``.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TYPES = frozenset({INVOKE, OK, FAIL, INFO})
FUNCTIONS = frozenset({"send", "poll", "txn", "assign", "subscribe", "commit"})
DATA_FUNCTIONS = frozenset({"send", "poll", "txn"})  # values of micro-operations; the others' are free-form


class HistoryError(ValueError):
    """A line that is not an operation of this format (its line number in the message)."""


@dataclass(frozen=True)
class Event:
    index: int
    time: int
    process: int
    type: str
    f: str
    value: Any

    def to_json(self) -> str:
        return json.dumps({"index": self.index, "time": self.time, "process": self.process,
                           "type": self.type, "f": self.f, "value": self.value}, separators=(",", ":"))


@dataclass(frozen=True)
class Send:
    key: str
    value: int
    offset: int | None = None  # known when acknowledged


@dataclass(frozen=True)
class Poll:
    records: dict[str, tuple[tuple[int, int], ...]]  # key -> ((offset, value), ...) in the order returned


@dataclass
class Op:
    """One operation: its invocation and completion, with the micro-operations of the completion
    (of the invocation for an ``info`` or ``fail`` send, whose offsets are unknown)."""

    index: int  # the invocation's index
    process: int
    f: str
    type: str  # ok | fail | info (invoke: never completed, treated as info)
    invoke_time: int
    complete_time: int | None
    complete_index: int | None
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    raw: Any = None

    @property
    def ok(self) -> bool:
        return self.type == OK

    def describe(self) -> str:
        return (f"op {self.index} (process {self.process}, {self.f} {self.type}"
                f"{'' if self.complete_index is None else f', completed at {self.complete_index}'})")


def parse_event(line: str, lineno: int) -> Event:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise HistoryError(f"line {lineno}: not JSON: {e}") from e
    if not isinstance(d, dict):
        raise HistoryError(f"line {lineno}: not an object")
    try:
        ev = Event(int(d["index"]), int(d.get("time", 0)), int(d["process"]), str(d["type"]), str(d["f"]),
                   d.get("value"))
    except (KeyError, TypeError, ValueError) as e:
        raise HistoryError(f"line {lineno}: missing or bad field: {e}") from e
    if ev.type not in TYPES:
        raise HistoryError(f"line {lineno}: type {ev.type!r} is not one of {sorted(TYPES)}")
    if ev.f not in FUNCTIONS:
        raise HistoryError(f"line {lineno}: f {ev.f!r} is not one of {sorted(FUNCTIONS)}")
    return ev


def read_events(lines: Iterable[str]) -> Iterator[Event]:
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield parse_event(line, n)


def read_file_events(path: Path | str) -> list[Event]:
    """A file's events; a last line cut short (its writer killed mid-write) is left out."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    events: list[Event] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line, n))
        except HistoryError:
            if n == len(lines):  # no newline after it: the writer died before finishing the line
                break
            raise
    return events


def merge(sources: Sequence[Iterable[Event]]) -> list[Event]:
    """One history of several clients' histories: their events by time, each source's events in its
    own order (a tie goes to the earlier source), indexes renumbered from 0. Their process numbers
    must be disjoint."""
    owner: dict[int, int] = {}
    tagged: list[list[tuple[int, int, int, Event]]] = []
    for s, events in enumerate(sources):
        rows: list[tuple[int, int, int, Event]] = []
        for i, ev in enumerate(events):
            if owner.setdefault(ev.process, s) != s:
                raise HistoryError(f"process {ev.process} appears in sources {owner[ev.process]} and {s}")
            rows.append((ev.time, s, i, ev))
        tagged.append(rows)
    # heapq.merge takes each source's next row only: a source's order is kept even where its times
    # are not sorted
    merged = heapq.merge(*tagged, key=lambda row: (row[0], row[1]))
    return [Event(n, ev.time, ev.process, ev.type, ev.f, ev.value) for n, (_, _, _, ev) in enumerate(merged)]


def merge_files(paths: Sequence[Path | str], out: Path | str) -> int:
    """Merge history files (:func:`merge`) into ``out``; returns the number of events."""
    events = merge([read_file_events(p) for p in paths])
    with open(out, "w", encoding="utf-8") as f:
        for ev in events:
            f.write(ev.to_json() + "\n")
    return len(events)


def read(path: Path | str) -> list[Op]:
    with open(path, encoding="utf-8") as f:
        return pair(read_events(f))


def _micro(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise HistoryError(f"{where}: value is not a list of micro-operations")
    return value


def _sends_and_polls(value: Any, where: str, completed: bool) -> tuple[list[Send], list[Poll]]:
    sends: list[Send] = []
    polls: list[Poll] = []
    for mop in _micro(value, where):
        if not isinstance(mop, list) or not mop:
            raise HistoryError(f"{where}: bad micro-operation {mop!r}")
        if mop[0] == "send":
            if len(mop) != 3:
                raise HistoryError(f"{where}: bad send {mop!r}")
            key, v = str(mop[1]), mop[2]
            if isinstance(v, list):
                if len(v) != 2:
                    raise HistoryError(f"{where}: bad acknowledged send {mop!r}")
                off = None if v[0] is None else int(v[0])
                sends.append(Send(key, int(v[1]), off))
            else:
                sends.append(Send(key, int(v)))
        elif mop[0] == "poll":
            if len(mop) == 1:
                if completed:
                    polls.append(Poll({}))
                continue
            recs = mop[1]
            if not isinstance(recs, dict):
                raise HistoryError(f"{where}: bad poll {mop!r}")
            polls.append(Poll({str(k): tuple((int(o), int(v)) for o, v in rs) for k, rs in recs.items()}))
        else:
            raise HistoryError(f"{where}: unknown micro-operation {mop[0]!r}")
    return sends, polls


def pair(events: Iterable[Event]) -> list[Op]:
    """Operations in invocation order; an invocation never completed is an ``info``."""
    open_ops: dict[int, tuple[Event, Op]] = {}
    ops: list[Op] = []
    for ev in events:
        where = f"event {ev.index}"
        if ev.type == INVOKE:
            if ev.process in open_ops:
                raise HistoryError(f"{where}: process {ev.process} invoked again before its op "
                                   f"{open_ops[ev.process][0].index} completed")
            op = Op(ev.index, ev.process, ev.f, INFO, ev.time, None, None, raw=ev.value)
            open_ops[ev.process] = (ev, op)
            ops.append(op)
            continue
        if ev.process not in open_ops:
            raise HistoryError(f"{where}: a completion with no invocation by process {ev.process}")
        inv, op = open_ops.pop(ev.process)
        if inv.f != ev.f:
            raise HistoryError(f"{where}: completes a {inv.f!r} with a {ev.f!r}")
        op.type, op.complete_time, op.complete_index = ev.type, ev.time, ev.index
        # what was written comes from the completion when it is known (offsets), else the invocation
        value = ev.value if ev.type == OK else inv.value
        if ev.f in DATA_FUNCTIONS:
            op.sends, op.polls = _sends_and_polls(value, where, ev.type == OK)
        op.raw = ev.value
    for inv, op in open_ops.values():
        if inv.f in DATA_FUNCTIONS:
            op.sends, _ = _sends_and_polls(inv.value, f"event {inv.index}", False)
    return ops


class Recorder:
    """Writes events as they happen (thread-safe callers hold their own lock): ``invoke`` returns the
    event; ``complete`` writes the completion of a process's operation."""

    def __init__(self, out: TextIO, clock_ns: Any) -> None:
        self.out = out
        self.clock_ns = clock_ns
        self.index = 0

    def _write(self, process: int, type_: str, f: str, value: Any) -> Event:
        ev = Event(self.index, int(self.clock_ns()), process, type_, f, value)
        self.index += 1
        self.out.write(ev.to_json() + "\n")
        return ev

    def invoke(self, process: int, f: str, value: Any) -> Event:
        return self._write(process, INVOKE, f, value)

    def complete(self, process: int, type_: str, f: str, value: Any) -> Event:
        if type_ not in (OK, FAIL, INFO):
            raise ValueError(type_)
        return self._write(process, type_, f, value)
