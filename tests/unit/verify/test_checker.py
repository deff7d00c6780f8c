"""The checker says no: every anomaly class it names is found in a history built to show it, with
the operations that prove it, and a clean history of the same shape passes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.verify import checker, history


class H:
    """A history under construction: each call writes an operation's invocation and completion."""

    def __init__(self) -> None:
        self.buf = io.StringIO()
        self.t = 0
        self.rec = history.Recorder(self.buf, self._clock)

    def _clock(self) -> int:
        self.t += 1000
        return self.t

    def send(self, p: int, key: str, value: int, offset: int | None, type_: str = "ok") -> H:
        self.rec.invoke(p, "send", [["send", key, value]])
        done = [["send", key, [offset, value]]] if type_ == "ok" else [["send", key, value]]
        self.rec.complete(p, type_, "send", done)
        return self

    def poll(self, p: int, records: dict[str, list[tuple[int, int]]]) -> H:
        self.rec.invoke(p, "poll", [["poll"]])
        self.rec.complete(p, "ok", "poll", [["poll", {k: [list(r) for r in rs] for k, rs in records.items()}]])
        return self

    def txn(self, p: int, mops: list[Any], type_: str = "ok") -> H:
        inv = [[m[0], m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in mops]
        self.rec.invoke(p, "txn", inv)
        self.rec.complete(p, type_, "txn", mops if type_ == "ok" else inv)
        return self

    def assign(self, p: int) -> H:
        self.rec.invoke(p, "assign", ["k"])
        self.rec.complete(p, "ok", "assign", ["k"])
        return self

    def report(self, **kw: Any) -> checker.Report:
        ops = history.pair(history.read_events(self.buf.getvalue().splitlines()))
        return checker.check(ops, **kw)


def found(r: checker.Report) -> set[str]:
    return set(r.anomalies)


def clean() -> H:
    h = H()
    for i in range(5):
        h.send(1, "k", i, i)
    h.poll(2, {"k": [(0, 0), (1, 1), (2, 2)]}).poll(2, {"k": [(3, 3), (4, 4)]})
    return h


def test_a_clean_history_is_valid() -> None:
    r = clean().report()
    assert r.valid, r.summary()
    assert r.stats["ok sends"] == 5 and r.stats["records read"] == 5


def test_lost_write() -> None:
    h = H().send(1, "k", 1, 0).send(1, "k", 2, 1).send(1, "k", 3, 2)
    h.poll(2, {"k": [(0, 1), (2, 3)]})  # read past offset 1, value 2 never seen
    r = h.report()
    assert "lost-write" in found(r)
    (ev,) = r.anomalies["lost-write"]
    assert (ev["key"], ev["value"], ev["offset"]) == ("k", 2, 1)


def test_a_write_beyond_what_was_read_is_not_lost() -> None:
    h = H().send(1, "k", 1, 0).send(1, "k", 2, 1).poll(2, {"k": [(0, 1)]})
    assert h.report().valid


def test_duplicate_and_inconsistent_offsets() -> None:
    h = H().send(1, "k", 1, 0).send(1, "k", 2, 1)
    h.poll(2, {"k": [(0, 1), (1, 2), (2, 1)]})  # value 1 again at offset 2
    assert "duplicate" in found(h.report())
    h = H().send(1, "k", 1, 0).send(3, "k", 2, 0)  # two values acknowledged at one offset
    r = h.report()
    assert "inconsistent-offsets" in found(r)
    assert r.anomalies["inconsistent-offsets"][0]["offset"] == 0


def test_nonmonotonic_send() -> None:
    h = H().send(1, "k", 1, 5).send(1, "k", 2, 3)
    assert "nonmonotonic-send" in found(h.report())
    h = H().txn(1, [["send", "k", [5, 1]], ["send", "k", [4, 2]]])
    assert "int-nonmonotonic-send" in found(h.report())


def test_nonmonotonic_poll_and_its_reset_by_assign() -> None:
    h = clean().poll(2, {"k": [(1, 1)]})  # back to offset 1 after reading 4
    r = h.report()
    assert "nonmonotonic-poll" in found(r)
    assert r.anomalies["nonmonotonic-poll"][0]["offsets"] == [4, 1]
    assert clean().assign(2).poll(2, {"k": [(1, 1)]}).report().valid  # a new assignment starts over
    h = H().send(1, "k", 1, 0).send(1, "k", 2, 1).poll(2, {"k": [(1, 2), (0, 1)]})
    assert "int-nonmonotonic-poll" in found(h.report())


def test_poll_skip() -> None:
    h = clean()
    h.poll(3, {"k": [(0, 0), (1, 1)]}).poll(3, {"k": [(3, 3)]})  # offset 2 holds value 2
    r = h.report()
    assert "poll-skip" in found(r)
    assert r.anomalies["poll-skip"][0]["skipped"] == [2]
    h = clean().poll(3, {"k": [(0, 0), (2, 2)]})
    assert "int-poll-skip" in found(h.report())


def test_gaps_left_by_aborted_transactions_are_not_skips() -> None:
    h = H().send(1, "k", 1, 0)
    h.txn(4, [["send", "k", [1, 7]]], type_="fail")  # aborted: its value sits at offset 1 (or nowhere)
    h.send(1, "k", 2, 3)
    h.poll(2, {"k": [(0, 1), (3, 2)]})
    assert h.report().valid


def test_aborted_read() -> None:
    h = H().txn(4, [["send", "k", [0, 7]]], type_="fail").poll(2, {"k": [(0, 7)]})
    r = h.report()
    assert "G1a" in found(r)
    assert not h.report(read_committed=False).anomalies.get("G1a")


def test_g0_write_cycle() -> None:
    # T1 writes x first and y second; T2 writes y first and x second
    h = H()
    h.txn(1, [["send", "x", [0, 1]], ["send", "y", [1, 1]]])
    h.txn(2, [["send", "x", [1, 2]], ["send", "y", [0, 2]]])
    r = h.report()
    assert "G0" in found(r)
    assert len(r.anomalies["G0"][0]["cycle"]) == 2


def test_g1c_read_write_cycle() -> None:
    # T1 reads y's value from T2 and writes x; T2 reads x's value from T1 and writes y
    h = H()
    h.txn(1, [["send", "x", [0, 1]], ["poll", {"y": [[0, 2]]}]])
    h.txn(2, [["send", "y", [0, 2]], ["poll", {"x": [[0, 1]]}]])
    r = h.report()
    assert "G1c" in found(r) and "G0" not in found(r)


def test_no_cycle_between_ordinary_transactions() -> None:
    h = H()
    h.txn(1, [["send", "x", [0, 1]], ["send", "y", [0, 1]]])
    h.txn(2, [["send", "x", [1, 2]], ["send", "y", [1, 2]], ["poll", {"x": [[0, 1]]}]])
    h.txn(3, [["poll", {"x": [[0, 1], [1, 2]], "y": [[0, 1], [1, 2]]}]])
    assert h.report().valid


def test_history_format_errors() -> None:
    with pytest.raises(history.HistoryError, match="line 1"):
        list(history.read_events(["{not json"]))
    ev = {"index": 0, "process": 1, "type": "ok", "f": "send", "value": []}
    with pytest.raises(history.HistoryError, match="no invocation"):
        history.pair(history.read_events([json.dumps(ev)]))
    inv = {"index": 0, "process": 1, "type": "invoke", "f": "send", "value": [["send", "k", 1]]}
    with pytest.raises(history.HistoryError, match="invoked again"):
        history.pair(history.read_events([json.dumps(inv), json.dumps({**inv, "index": 1})]))
    # an invocation never completed is an info operation, its send possibly written
    (op,) = history.pair(history.read_events([json.dumps(inv)]))
    assert op.type == "info" and op.sends[0].value == 1 and op.sends[0].offset is None


def test_cli_exit_codes(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(clean().buf.getvalue())
    bad.write_text(clean().poll(2, {"k": [(1, 1)]}).buf.getvalue())

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "odradek", "verify", "check", *args],
                              capture_output=True, text=True, timeout=60)

    r = run(str(good))
    assert r.returncode == 0 and r.stdout.startswith("valid"), r.stdout + r.stderr
    r = run(str(bad))
    assert r.returncode == 1 and "nonmonotonic-poll" in r.stdout
    r = run(str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and "error" in r.stderr
