from __future__ import annotations

import base64
import logging
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from odradek.log import LogConfig, LogManager
from odradek.log.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from odradek.protocol.records import build_batch, validate_batches

from .log_helpers import NOW, append, make_batch, read_batches


def _manager(dirs: list[Path], **cfg: object) -> LogManager:
    config = LogConfig(**cfg)  # type: ignore[arg-type]
    return LogManager(dirs, lambda topic: config)


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("a.b-c", 3): 17, ("a", 0): 5})
    assert path.read_text() == "0\n2\na 0 5\na.b-c 3 17\n"
    assert read_offset_checkpoint(path) == {("a.b-c", 3): 17, ("a", 0): 5}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    path.write_text("0\n3\na 0 5\n")
    assert read_offset_checkpoint(path) == {}  # malformed: ignored
    assert read_offset_checkpoint(tmp_path / "missing") == {}


def test_create_append_shutdown_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.log")
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = _manager([d1, d2], segment_bytes=2000)
    mgr.startup()
    tid = uuid.uuid4()
    topics = [("my-topic.v1", 0), ("my-topic.v1", 1), ("other", 0), ("other", 1)]
    for t, p in topics:
        lg = mgr.get_or_create_log(t, p, tid)
        assert mgr.get_or_create_log(t, p) is lg
        for _ in range(10):
            append(lg, make_batch(2, value_size=200))
    assert {mgr.log_dir_of(t, p) for t, p in topics} == {d1, d2}
    lg = mgr.get_log("my-topic.v1", 1)
    assert lg is not None
    meta = (lg.dir / "partition.metadata").read_text()
    assert meta == f"version: 0\ntopic_id: {base64.urlsafe_b64encode(tid.bytes).decode().rstrip('=')}\n"
    assert "Created log for partition my-topic.v1-1" in caplog.text
    mgr.shutdown()
    for d in (d1, d2):
        assert (d / ".kafka_cleanshutdown").exists()
        rp = read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
        assert len(rp) == 2 and set(rp.values()) == {20}
        assert set(read_offset_checkpoint(d / "replication-offset-checkpoint").values()) == {20}
        assert set(read_offset_checkpoint(d / "log-start-offset-checkpoint").values()) == {0}

    caplog.clear()
    mgr2 = _manager([d1, d2], segment_bytes=2000)
    mgr2.startup()
    assert "Recovered partition" not in caplog.text
    assert not (d1 / ".kafka_cleanshutdown").exists()
    assert sorted((lg.topic, lg.partition) for lg in mgr2.logs()) == sorted(topics)
    lg2 = mgr2.get_log("my-topic.v1", 1)
    assert lg2 is not None and lg2.topic_id == tid
    assert lg2.log_end_offset == 20 and lg2.high_watermark == 20 and lg2.recovery_point == 20
    assert not any(s.indexes_loaded for s in lg2.segments)  # nothing mapped at startup
    assert append(lg2, make_batch(1)).first_offset == 20
    assert read_batches(lg2, 0)[-1] == (20, 1)
    mgr2.shutdown()


def test_unclean_startup_recovers_from_recovery_point(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.log")
    mgr = _manager([tmp_path], segment_bytes=1000)
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(9):
        append(lg, make_batch(1, value_size=300))
    mgr.flush_dirty(NOW)  # flushes the rolled segments: recovery point = active segment base
    rp = lg.recovery_point
    assert rp == lg.active_segment.base_offset > 0
    mgr.checkpoint()
    # corrupt a flushed segment (below the recovery point: not scanned) and tear the tail
    first = lg.segments[0]
    with open(first.log.path, "r+b") as f:
        f.seek(100)
        f.write(b"X" * 10)
    active = lg.active_segment
    os.truncate(active.log.path, active.size - 50)
    # "kill -9": no shutdown
    caplog.clear()
    mgr2 = _manager([tmp_path], segment_bytes=1000)
    mgr2.startup()
    lg2 = mgr2.get_log("t", 0)
    assert lg2 is not None
    assert lg2.log_end_offset == 8
    assert f"Recovered partition t-0: 1 segment(s) checked from offset {rp}" in caplog.text
    assert "bytes truncated" in caplog.text
    assert append(lg2, make_batch(1)).first_offset == 8


def test_unclean_startup_without_checkpoint_recovers_everything(tmp_path: Path) -> None:
    mgr = _manager([tmp_path], segment_bytes=1000)
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(6):
        append(lg, make_batch(1, value_size=300))
    first = lg.segments[0]
    with open(first.log.path, "r+b") as f:
        f.seek(first.size - 20)
        f.write(b"X" * 10)
    mgr2 = _manager([tmp_path], segment_bytes=1000)
    mgr2.startup()
    lg2 = mgr2.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 1 and lg2.number_of_segments == 1


def test_delete_log_and_leftovers(tmp_path: Path) -> None:
    mgr = _manager([tmp_path], file_delete_delay_ms=1000)
    mgr.startup()
    lg = mgr.get_or_create_log("gone-topic", 3)
    append(lg, make_batch(1))
    data = lg.read(0, 1000, 1, False)
    assert mgr.delete_log("gone-topic", 3, now_ms=NOW)
    assert mgr.get_log("gone-topic", 3) is None
    assert not (tmp_path / "gone-topic-3").exists()
    [renamed] = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert renamed.name.startswith("gone-topic-3.")
    assert os.pread(data.regions[0].file.fileno(), 10, 0)  # still readable
    mgr.cleanup_logs(NOW + 999)
    assert renamed.exists()
    mgr.cleanup_logs(NOW + 1000)
    assert not renamed.exists()
    assert not mgr.delete_log("gone-topic", 3)
    # a -delete dir left by a crash is removed at startup
    (tmp_path / f"x-0.{uuid.uuid4().hex}-delete").mkdir()
    mgr.shutdown()
    mgr2 = _manager([tmp_path])
    mgr2.startup()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]


def test_deleted_logs_keep_a_bounded_number_of_files_open(tmp_path: Path) -> None:
    """Deleted logs stay readable for file.delete.delay.ms, but no more than the manager's budget
    of them keeps files open: the oldest are closed first, and their folders still go on time."""
    mgr = _manager([tmp_path], file_delete_delay_ms=60_000)
    mgr.startup()
    mgr.deleted_logs_open_files = 3
    logs = []
    for p in range(5):
        lg = mgr.get_or_create_log("churn", p)
        append(lg, make_batch(1))
        logs.append(lg)
    for p in range(5):
        assert mgr.delete_log("churn", p, now_ms=NOW)
    assert [lg.closed for lg in logs] == [True, True, False, False, False]
    assert len([d for d in tmp_path.iterdir() if d.name.endswith("-delete")]) == 5  # the folders wait
    mgr.cleanup_logs(NOW + 60_000)
    assert not [d for d in tmp_path.iterdir() if d.name.endswith("-delete")]
    assert all(lg.closed for lg in logs) and mgr._deleted_open_files == 0
    mgr.shutdown()


def test_cleanup_and_flush(tmp_path: Path) -> None:
    mgr = _manager([tmp_path], segment_bytes=1000, retention_ms=1000, file_delete_delay_ms=0)
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)
    for i in range(6):
        append(lg, make_batch(1, value_size=300, ts=NOW + i))
    assert mgr.flush_dirty(NOW) == 1
    assert mgr.flush_dirty(NOW) == 0
    assert mgr.cleanup_logs(NOW + 1003) == 1  # [2, 4) has max ts NOW+3: not past 1000 ms yet
    assert mgr.cleanup_logs(NOW + 1004) == 1
    assert lg.log_start_offset == 4
    assert not list(lg.dir.glob("*.deleted"))
    mgr.checkpoint()
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 4}
    mgr.shutdown()
    mgr2 = _manager([tmp_path], segment_bytes=1000)
    mgr2.startup()
    lg2 = mgr2.get_log("t", 0)
    assert lg2 is not None and lg2.log_start_offset == 4 and lg2.log_end_offset == 6


_CHILD = r"""
import sys, time
from pathlib import Path
from odradek.log import LogConfig, LogManager
from odradek.protocol.records import build_batch, validate_batches
cfg = LogConfig(segment_bytes=20000)
mgr = LogManager([Path(sys.argv[1])], lambda t: cfg)
mgr.startup()
lg = mgr.get_or_create_log("crash", 0)
seq = 0
while True:
    data = bytearray(build_batch([(None, b"v" * 500)] * 4, timestamp=1, producer_id=77, producer_epoch=0,
                                 base_sequence=seq))
    lg.append_as_leader(data, validate_batches(data), 0, 1)
    seq += 4
    if seq % 40 == 0:
        mgr.flush_dirty()
        mgr.checkpoint()
    print(seq, flush=True)
"""


def test_state_survives_kill_9(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked = 0
    for line in proc.stdout:
        acked = int(line)
        if acked >= 400:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    mgr = _manager([tmp_path], segment_bytes=20000)
    mgr.startup()
    lg = mgr.get_log("crash", 0)
    assert lg is not None
    leo = lg.log_end_offset
    assert leo >= acked and leo % 4 == 0
    entry = lg.producer_entry(77)
    assert entry is not None and entry.last_seq == leo - 1
    lg.update_high_watermark(leo)
    last = build_batch([(None, b"v" * 500)] * 4, timestamp=1, producer_id=77, producer_epoch=0, base_sequence=leo - 4)
    dup = lg.append_as_leader(bytearray(last), validate_batches(last), 0, 1)
    assert dup.duplicate and dup.first_offset == leo - 4
    nxt = build_batch([(None, b"v")], timestamp=1, producer_id=77, producer_epoch=0, base_sequence=leo)
    assert lg.append_as_leader(bytearray(nxt), validate_batches(nxt), 0, 1).first_offset == leo
    assert len(read_batches(lg, 0)) == leo // 4
    mgr.shutdown()


def _crash_reopen(d: Path, **cfg: object) -> LogManager:
    """A new manager on the directory of one that was never shut down (kill -9)."""
    mgr = _manager([d], **cfg)
    mgr.startup()
    return mgr


def test_truncation_below_the_recovery_point_checkpoints_it_at_once(tmp_path: Path) -> None:
    """A follower truncates below its checkpointed recovery point and appends under a new leader epoch; a
    crash before the periodic checkpoint must not recover from the old point, below which the index
    entries and the leader epochs have changed (Kafka's LogManager.truncateTo checkpoints at once)."""
    mgr = _manager([tmp_path], index_interval_bytes=200)
    mgr.startup()
    lg = mgr.get_or_create_log("t", 0)

    def app(epoch: int, n: int) -> None:
        for _ in range(n):
            b = bytearray(build_batch([(None, b"x" * 100)] * 2, timestamp=NOW))
            lg.append_as_leader(b, validate_batches(b), epoch, NOW)

    app(0, 40)  # offsets 0..79 under epoch 0
    lg.flush()
    mgr.checkpoint()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")[("t", 0)] == 80
    lg.truncate_to(20)
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")[("t", 0)] == 20
    app(1, 40)  # offsets 20..99 under epoch 1
    live_epochs = list(lg.leader_epoch_cache.entries)
    assert [tuple(e) for e in live_epochs] == [(0, 0), (1, 20)]
    mgr2 = _crash_reopen(tmp_path, index_interval_bytes=200)
    lg2 = mgr2.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 100
    assert list(lg2.leader_epoch_cache.entries) == live_epochs
    assert lg2.leader_epoch_cache.end_offset_for(0, lg2.log_end_offset)[1] == 20
    seg = lg2.active_segment
    for i in range(seg.offset_index.entries):
        off, pos = seg.offset_index.entry(i)
        h = seg.log.read_header(pos)
        assert h is not None and h.base_offset + h.last_offset_delta == off
    lg2.update_high_watermark(100)
    assert [b for b, _n in read_batches(lg2, 0)] == list(range(0, 100, 2))
