"""Histories of several clients merged into one (odradek.verify.history.merge): the Python clients' file
and a Java client's (peers/kafka/.../VerifyWorkload.java writes the same JSON lines) interleave by time,
each keeps its own order, so every operation's invocation and completion stay paired; a Java file cut
short by a kill leaves its open operation an ``info``; and the checker finds an anomaly that only the
Java client's operations show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from odradek.verify import checker, history
from odradek.verify.java_clients import PROCESS_BASE, VALUE_BASE

J = PROCESS_BASE  # the first Java client's producer; its consumer is J + 1
V = VALUE_BASE  # the first Java client's values are V + 1, V + 2, ...


def line(index: int, time: int, process: int, type_: str, f: str, value: Any) -> str:
    """A line as the Java harness writes it (Jackson, the fields in this order)."""
    return json.dumps({"index": index, "time": time, "process": process, "type": type_, "f": f, "value": value},
                      separators=(",", ":"))


def write(path: Path, rows: list[tuple[int, int, str, str, Any]], tail: str = "") -> Path:
    path.write_text("".join(line(i, *row) + "\n" for i, row in enumerate(rows)) + tail)
    return path


def python_history(path: Path) -> Path:
    # process 0 sends k=1 at offset 0 and k=2 at offset 2; process 4 polls all three offsets
    return write(path, [
        (100, 0, "invoke", "send", [["send", "k", 1]]),
        (300, 0, "ok", "send", [["send", "k", [0, 1]]]),
        (500, 0, "invoke", "send", [["send", "k", 2]]),
        (700, 0, "ok", "send", [["send", "k", [2, 2]]]),
        (900, 4, "invoke", "poll", [["poll"]]),
        (1100, 4, "ok", "poll", [["poll", {"k": [[0, 1], [1, V + 1], [2, 2]]}]]),
    ])


def java_history(path: Path, tail: str = "", read: list[list[int]] | None = None) -> Path:
    # the Java producer sends k=V+1 at offset 1, invoked before and acknowledged after Python's first send's
    # completion (times interleave with the other file's); the Java consumer reads all three
    read = read if read is not None else [[0, 1], [1, V + 1], [2, 2]]
    return write(path, [
        (200, J, "invoke", "send", [["send", "k", V + 1]]),
        (400, J, "ok", "send", [["send", "k", [1, V + 1]]]),
        (800, J + 1, "invoke", "poll", [["poll"]]),
        (1000, J + 1, "ok", "poll", [["poll", {"k": read}]]),
    ], tail)


def test_events_interleave_by_time_and_indexes_are_renumbered(tmp_path: Path) -> None:
    py, jv = python_history(tmp_path / "py.jsonl"), java_history(tmp_path / "java.jsonl")
    out = tmp_path / "history.jsonl"
    assert history.merge_files([py, jv], out) == 10
    events = list(history.read_events(out.read_text().splitlines()))
    assert [e.index for e in events] == list(range(10))
    assert [e.time for e in events] == sorted(e.time for e in events)
    assert [e.process for e in events] == [0, J, 0, J, 0, 0, J + 1, 4, J + 1, 4]
    ops = history.pair(events)
    assert [(o.process, o.f, o.type) for o in ops] == [
        (0, "send", "ok"), (J, "send", "ok"), (0, "send", "ok"), (J + 1, "poll", "ok"), (4, "poll", "ok")]
    java_send = ops[1]
    assert (java_send.index, java_send.complete_index) == (1, 3)  # invoked at 1, completed at 3: renumbered
    report = checker.check(ops)
    assert report.valid, report.summary()
    assert report.stats["ok sends"] == 3 and report.stats["records read"] == 6


def test_each_source_keeps_its_own_order_and_ties_go_to_the_first_source() -> None:
    a = [history.Event(0, 5, 1, "invoke", "poll", [["poll"]]), history.Event(1, 5, 1, "ok", "poll", [["poll", {}]])]
    # times that go back within one source (not what a recorder writes): its order is still kept
    b = [history.Event(0, 9, 2, "invoke", "poll", [["poll"]]), history.Event(1, 5, 2, "ok", "poll", [["poll", {}]])]
    merged = history.merge([a, b])
    assert [(e.process, e.type) for e in merged] == [(1, "invoke"), (1, "ok"), (2, "invoke"), (2, "ok")]
    tie = history.merge([b[1:], a])  # one time, two sources: the first source's event first
    assert [e.process for e in tie] == [2, 1, 1]
    assert all(op.ok for op in history.pair(history.merge([a, b])))


def test_a_process_in_two_sources_is_refused() -> None:
    ev = history.Event(0, 1, 7, "invoke", "poll", [["poll"]])
    with pytest.raises(history.HistoryError, match="process 7"):
        history.merge([[ev], [ev]])


def test_a_java_client_killed_mid_line_leaves_its_open_operation_info(tmp_path: Path) -> None:
    py = python_history(tmp_path / "py.jsonl")
    # invoked, then killed while writing the completion: half a line, no newline
    jv = java_history(tmp_path / "java.jsonl", tail=line(4, 1200, J, "invoke", "send", [["send", "k", V + 2]]) + "\n"
                      + line(5, 1300, J, "ok", "send", [["send", "k", [3, V + 2]]])[:25])
    out = tmp_path / "history.jsonl"
    assert history.merge_files([py, jv], out) == 11
    ops = history.read(out)
    last = ops[-1]
    assert (last.process, last.f, last.type, last.complete_index) == (J, "send", "info", None)
    assert [(s.key, s.value) for s in last.sends] == [("k", V + 2)]
    assert checker.check(ops).valid


def test_a_torn_line_before_the_end_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "java.jsonl"
    path.write_text(line(0, 1, J, "invoke", "poll", [["poll"]])[:20] + "\n"
                    + line(1, 2, J, "ok", "poll", [["poll", {}]]) + "\n")
    with pytest.raises(history.HistoryError, match="line 1"):
        history.read_file_events(path)


def test_the_checker_finds_a_write_the_java_client_saw_acknowledged_and_nobody_read(tmp_path: Path) -> None:
    py = python_history(tmp_path / "py.jsonl")
    py.write_text(py.read_text().replace("[1,1000000001],", ""))  # the Python consumer skips offset 1 too
    jv = java_history(tmp_path / "java.jsonl", read=[[0, 1], [2, 2]])  # and so does the Java one
    out = tmp_path / "history.jsonl"
    history.merge_files([py, jv], out)
    report = checker.check(history.read(out))
    assert "lost-write" in report.anomalies, report.summary()
    (ev,) = report.anomalies["lost-write"]
    assert (ev["key"], ev["value"], ev["offset"]) == ("k", V + 1, 1)
    assert f"process {J}" in ev["writer"]
    assert "int-poll-skip" in report.anomalies  # both consumers jumped over it within one poll


def test_the_checker_finds_a_java_consumer_reading_an_offset_twice(tmp_path: Path) -> None:
    py = python_history(tmp_path / "py.jsonl")
    jv = java_history(tmp_path / "java.jsonl", read=[[0, 1], [1, V + 1], [1, V + 1], [2, 2]])
    out = tmp_path / "history.jsonl"
    history.merge_files([py, jv], out)
    report = checker.check(history.read(out))
    assert "int-nonmonotonic-poll" in report.anomalies, report.summary()
    assert report.anomalies["int-nonmonotonic-poll"][0]["process"] == J + 1
