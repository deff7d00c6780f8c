"""The checker of Kafka workload histories (odradek.verify.history): the anomalies Jepsen's Kafka
workload names, each reported with the operations that prove it.

Per key (a partition), the *version order* is what the history says the log holds: offset -> value,
from acknowledged sends that carry their offset and from the records polls returned. Values written by
operations that certainly failed (``fail``: an aborted transaction) are *aborted* and left out of it.

=======================  ============================================================================
anomaly                  what it means here
=======================  ============================================================================
inconsistent-offsets     one offset of a key holds two values (two sends acknowledged at one offset,
                         or a poll read there another value than was written or read elsewhere)
duplicate                one value at two offsets of a key (written twice: an idempotence failure)
lost-write               an acknowledged send whose value no poll ever returned, though polls read
                         that key past its offset
nonmonotonic-send        one process's successive acknowledged sends to a key got offsets that do
                         not increase (int-nonmonotonic-send: within one operation)
nonmonotonic-poll        one consumer read a key at an offset not above one it read before, with no
                         assign/subscribe between (int-nonmonotonic-poll: within one poll)
poll-skip                one consumer's successive reads of a key jumped over offsets the version
                         order holds (int-poll-skip: within one poll)
G1a                      aborted read: a poll returned a value of an aborted operation (a
                         read_committed consumer must never; off with ``read_committed=False``)
G0                       write cycle: transactions ordered each before the other by their writes'
                         order in two partitions (ww edges only)
G1c                      circular information flow: a cycle of ww and wr (read-from) edges between
                         committed transactions, at least one of them wr
=======================  ============================================================================

Not checked (yet): G1b (Elle's intermediate read: under Kafka's per-record visibility a reader that
sees part of a committed transaction's writes to one partition and not the rest shows up above as a
poll-skip) and G2-class anti-dependency cycles (rw edges need every read to see a whole partition).

Consumer positions are followed per process: an ``assign`` or ``subscribe`` operation (the runner
records one at each rebalance) starts them over, and a crashed client comes back as a new process.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.graphs import strongly_connected_components
from odradek.verify.history import FAIL, INFO, OK, Op

ANOMALIES = (
    "lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-send", "int-nonmonotonic-send",
    "nonmonotonic-poll", "int-nonmonotonic-poll", "poll-skip", "int-poll-skip", "G1a", "G0", "G1c",
)
KV = tuple[str, int]


@dataclass
class Report:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def add(self, name: str, **evidence: Any) -> None:
        self.anomalies.setdefault(name, []).append(evidence)

    def summary(self, examples: int = 3) -> str:
        lines = [f"{'valid' if self.valid else 'INVALID'}: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.stats.items()))]
        for name in ANOMALIES:
            found = self.anomalies.get(name)
            if not found:
                continue
            lines.append(f"{name}: {len(found)}")
            for ev in found[:examples]:
                lines.append("  " + ", ".join(f"{k}={v}" for k, v in ev.items()))
        return "\n".join(lines)


def check(ops: Sequence[Op], read_committed: bool = True) -> Report:
    return _Checker(ops, read_committed).run()


class _Checker:
    def __init__(self, ops: Sequence[Op], read_committed: bool) -> None:
        self.ops = sorted(ops, key=lambda o: o.index)
        self.read_committed = read_committed
        self.report = Report()
        # (key, value) -> the operation that wrote it, and whether that write is certain / aborted
        self.writer: dict[KV, Op] = {}
        self.aborted: set[KV] = set()
        self.acked_at: dict[KV, int] = {}  # offsets acknowledged to the writer
        # key -> offset -> {value: [op index of each source]}
        self.at: dict[str, dict[int, dict[int, list[int]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        self.read_values: set[KV] = set()
        self.max_read: dict[str, int] = {}
        self.order: dict[str, list[int]] = {}  # key -> offsets in the version order (no aborted values)
        self.rank: dict[str, dict[int, int]] = {}

    def run(self) -> Report:
        self._collect()
        self._offsets()
        self._lost_writes()
        self._sends()
        self._polls()
        self._aborted_reads()
        self._cycles()
        r = self.report
        r.stats = {
            "ops": len(self.ops),
            "ok sends": sum(len(o.sends) for o in self.ops if o.ok),
            "ok polls": sum(1 for o in self.ops if o.ok and o.polls),
            "records read": sum(len(rs) for o in self.ops if o.ok for p in o.polls for rs in p.records.values()),
            "keys": len(self.at),
        }
        return r

    # ------------------------------------------------------------------ collection
    def _collect(self) -> None:
        for op in self.ops:
            for s in op.sends:
                kv = (s.key, s.value)
                self.writer.setdefault(kv, op)  # values are unique per key: one writer each
                if op.type == FAIL:
                    self.aborted.add(kv)
                elif op.ok and s.offset is not None:
                    self.acked_at[kv] = s.offset
                    self.at[s.key][s.offset][s.value].append(op.index)
            if not op.ok:
                continue
            for p in op.polls:
                for key, recs in p.records.items():
                    for off, val in recs:
                        self.at[key][off][val].append(op.index)
                        self.read_values.add((key, val))
                        self.max_read[key] = max(self.max_read.get(key, -1), off)
        for key, offsets in self.at.items():
            visible = sorted(o for o, vals in offsets.items() if any((key, v) not in self.aborted for v in vals))
            self.order[key] = visible
            self.rank[key] = {o: i for i, o in enumerate(visible)}

    # ------------------------------------------------------------------ per key
    def _offsets(self) -> None:
        where: dict[KV, set[int]] = defaultdict(set)
        for key, offsets in self.at.items():
            for off, vals in offsets.items():
                if len(vals) > 1:
                    self.report.add("inconsistent-offsets", key=key, offset=off,
                                    values={v: sorted(set(ix)) for v, ix in vals.items()})
                for v in vals:
                    where[(key, v)].add(off)
        for (key, v), offs in where.items():
            if len(offs) > 1:
                srcs = sorted({i for o in offs for i in self.at[key][o][v]})
                self.report.add("duplicate", key=key, value=v, offsets=sorted(offs), ops=srcs)

    def _lost_writes(self) -> None:
        for (key, v), off in self.acked_at.items():
            if (key, v) in self.read_values or off > self.max_read.get(key, -1):
                continue
            op = self.writer[(key, v)]
            self.report.add("lost-write", key=key, value=v, offset=off, writer=op.describe(),
                            read_up_to=self.max_read[key])

    # ------------------------------------------------------------------ per process
    def _sends(self) -> None:
        last: dict[tuple[int, str], tuple[int, int]] = {}  # (process, key) -> (offset, op index)
        for op in self.ops:
            if not op.ok:
                continue
            within: dict[str, int] = {}
            for s in op.sends:
                if s.offset is None:
                    continue
                prev_in = within.get(s.key)
                if prev_in is not None and s.offset <= prev_in:
                    self.report.add("int-nonmonotonic-send", key=s.key, op=op.index, offsets=[prev_in, s.offset])
                within[s.key] = s.offset
                prev = last.get((op.process, s.key))
                if prev is not None and prev_in is None and s.offset <= prev[0]:
                    self.report.add("nonmonotonic-send", key=s.key, process=op.process,
                                    offsets=[prev[0], s.offset], ops=[prev[1], op.index])
            for key, off in within.items():
                last[(op.process, key)] = (off, op.index)

    def _polls(self) -> None:
        pos: dict[tuple[int, str], tuple[int, int]] = {}  # (process, key) -> (last offset read, op index)
        for op in self.ops:
            if op.f in ("assign", "subscribe"):
                for k in [k for k in pos if k[0] == op.process]:
                    del pos[k]
                continue
            if not op.ok:
                continue
            for p in op.polls:
                for key, recs in p.records.items():
                    prev = pos.get((op.process, key))
                    for i, (off, _v) in enumerate(recs):
                        internal = i > 0
                        if prev is not None:
                            self._step(key, prev[0], off, op, prev[1], internal)
                        prev = (off, op.index)
                    if prev is not None:
                        pos[(op.process, key)] = prev

    def _step(self, key: str, before: int, after: int, op: Op, before_op: int, internal: bool) -> None:
        prefix = "int-" if internal else ""
        if after <= before:
            self.report.add(prefix + "nonmonotonic-poll", key=key, process=op.process, offsets=[before, after],
                            ops=[before_op, op.index])
            return
        rank = self.rank[key]
        a, b = rank.get(before), rank.get(after)
        if a is None or b is None or b == a + 1:
            return
        skipped = self.order[key][a + 1 : b]
        self.report.add(prefix + "poll-skip", key=key, process=op.process, offsets=[before, after],
                        skipped=skipped[:10], skipped_count=len(skipped), ops=[before_op, op.index])

    def _aborted_reads(self) -> None:
        if not self.read_committed:
            return
        for op in self.ops:
            if not op.ok:
                continue
            for p in op.polls:
                for key, recs in p.records.items():
                    for off, v in recs:
                        if (key, v) in self.aborted:
                            self.report.add("G1a", key=key, value=v, offset=off, reader=op.index,
                                            writer=self.writer[(key, v)].describe())

    # ------------------------------------------------------------------ dependency cycles
    def _cycles(self) -> None:
        ww: dict[int, set[int]] = defaultdict(set)
        wr: dict[int, set[int]] = defaultdict(set)
        by_index = {o.index: o for o in self.ops}
        for key, offsets in self.order.items():
            prev_writer: int | None = None
            for off in offsets:
                vals = [v for v in self.at[key][off] if (key, v) not in self.aborted]
                w = self.writer.get((key, vals[0])) if len(vals) == 1 else None
                if w is None or w.type == FAIL:
                    prev_writer = None
                    continue
                if prev_writer is not None and prev_writer != w.index:
                    ww[prev_writer].add(w.index)
                prev_writer = w.index
        for op in self.ops:
            if not op.ok:
                continue
            for p in op.polls:
                for key, recs in p.records.items():
                    for _off, v in recs:
                        w = self.writer.get((key, v))
                        if w is not None and w.index != op.index and w.type in (OK, INFO):
                            wr[w.index].add(op.index)
        g0 = _cycles_in(ww)
        for cycle in g0:
            self.report.add("G0", cycle=[by_index[i].describe() for i in cycle])
        g0_nodes = {i for c in g0 for i in c}
        both: dict[int, set[int]] = defaultdict(set)
        for src in (ww, wr):
            for a, bs in src.items():
                both[a] |= bs
        for cycle in _cycles_in(both):
            if set(cycle) <= g0_nodes and all(cycle[(i + 1) % len(cycle)] in ww.get(n, ()) for i, n in enumerate(cycle)):
                continue
            self.report.add("G1c", cycle=[by_index[i].describe() for i in cycle])


def _cycles_in(graph: dict[int, set[int]]) -> list[list[int]]:
    """One cycle per strongly connected component of more than one node."""
    comps = [c for c in strongly_connected_components(graph) if len(c) > 1]
    return [_a_cycle(graph, c) for c in comps]


def _a_cycle(graph: dict[int, set[int]], comp: set[int]) -> list[int]:
    """A cycle through the smallest node of a strongly connected component (breadth-first)."""
    start = min(comp)
    parent: dict[int, int] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt_frontier = []
        for n in frontier:
            for m in sorted(graph.get(n, ())):
                if m not in comp:
                    continue
                if m == start:
                    path = [n]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return list(reversed(path))
                if m not in seen:
                    seen.add(m)
                    parent[m] = n
                    nxt_frontier.append(m)
        frontier = nxt_frontier
    return sorted(comp)  # pragma: no cover - a strongly connected component always has a cycle
