from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log import LogConfig, ProducerStateError
from odradek.log.producer_state import CorruptSnapshotError, ProducerStateManager, in_sequence
from odradek.protocol.records import build_batch, validate_batches

from .log_helpers import append, make_batch, new_log, read_batches, reopen

PID = 4000


def idem(n: int, seq: int, epoch: int = 0, pid: int = PID) -> bytes:
    return make_batch(n, pid=pid, epoch=epoch, seq=seq)


def test_in_sequence_wraps() -> None:
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert in_sequence(2**31 - 1, 0)


def test_duplicate_returns_original_offsets(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, make_batch(2))
    first = append(log, idem(3, 0))
    assert (first.first_offset, first.last_offset) == (2, 4)
    append(log, idem(2, 3))
    dup = append(log, idem(3, 0))
    assert dup.duplicate and (dup.first_offset, dup.last_offset, dup.record_count) == (2, 4, 3)
    assert log.log_end_offset == 7
    nxt = append(log, idem(1, 5))
    assert (nxt.first_offset, nxt.duplicate) == (7, False)


def test_only_last_five_batches_are_deduplicated(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for seq in range(6):
        append(log, idem(1, seq))
    assert append(log, idem(1, 1)).duplicate
    with pytest.raises(ProducerStateError) as e:
        append(log, idem(1, 0))  # evicted: now an out-of-order sequence
    assert e.value.error_code == 45


def test_sequence_gap_and_epochs(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(2, 0, epoch=3))
    with pytest.raises(ProducerStateError) as e:
        append(log, idem(1, 5, epoch=3))
    assert e.value.error_code == 45
    with pytest.raises(ProducerStateError) as e:
        append(log, idem(1, 2, epoch=2))
    assert e.value.error_code == 47
    with pytest.raises(ProducerStateError) as e:
        append(log, idem(1, 2, epoch=4))  # a new epoch starts at 0
    assert e.value.error_code == 45
    assert log.log_end_offset == 2
    assert append(log, idem(1, 0, epoch=4)).first_offset == 2
    with pytest.raises(ProducerStateError) as e:
        append(log, idem(1, 2, epoch=3))
    assert e.value.error_code == 47
    # unknown producer: any first sequence is accepted (Kafka 3.x, state may have expired)
    assert append(log, idem(1, 17, pid=9)).first_offset == 3
    assert append(log, idem(1, 18, pid=9)).first_offset == 4


def test_several_batches_of_one_producer_in_one_append(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    info = append(log, idem(2, 0), idem(3, 2), make_batch(1), idem(1, 5))
    assert (info.first_offset, info.last_offset) == (0, 6)
    with pytest.raises(ProducerStateError):
        append(log, idem(1, 6), idem(1, 8))
    assert log.log_end_offset == 7  # nothing of the failed append was written
    entry = log.producer_entry(PID)
    assert entry is not None and entry.last_seq == 5 and entry.last_offset == 6


def test_sequence_wraparound(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(1, 2**31 - 2, pid=7))
    append(log, idem(2, 2**31 - 1, pid=7))  # sequences 2**31-1, 0
    assert append(log, idem(1, 1, pid=7)).first_offset == 3


def test_snapshot_round_trip_and_crc(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path)
    data = idem(3, 0) + idem(2, 3) + build_batch([(None, b"x")], producer_id=11, producer_epoch=2, base_sequence=0,
                                                   transactional=True)
    headers = validate_batches(data)
    off = 0
    fixed = []
    for h in headers:
        fixed.append(h._replace(base_offset=off))
        off += h.record_count
    updates, dup = ps.validate(fixed)
    assert dup is None
    ps.commit(updates, off)
    path = ps.take_snapshot()
    assert path.name == "00000000000000000006.snapshot"
    raw = path.read_bytes()
    assert raw[:2] == b"\x00\x01" and len(raw) == 10 + 3 * 46
    loaded = ProducerStateManager.decode_snapshot(raw)
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in loaded[PID].batches] == [
        (0, 2, 0, 2), (3, 4, 3, 4)
    ]
    assert loaded[11].current_txn_first_offset == 5
    bad = bytearray(raw)
    bad[20] ^= 1
    with pytest.raises(CorruptSnapshotError):
        ProducerStateManager.decode_snapshot(bytes(bad))


def test_state_survives_clean_restart(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(2, 0), idem(2, 2))
    log2 = reopen(log, clean=True)
    assert (log2.dir / "00000000000000000004.snapshot").exists()
    dup = append(log2, idem(2, 0))
    assert dup.duplicate and dup.first_offset == 0
    with pytest.raises(ProducerStateError):
        append(log2, idem(1, 7))
    assert append(log2, idem(1, 4)).first_offset == 4


def test_state_survives_crash(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000))
    for seq in range(0, 12, 2):
        append(log, make_batch(2, value_size=200, pid=PID, epoch=1, seq=seq))
    assert log.number_of_segments > 2
    snaps = sorted(p.name for p in log.dir.glob("*.snapshot"))
    assert snaps  # written on roll
    log2 = reopen(log, clean=False)  # no close, no final snapshot: replay from the latest one
    assert log2.log_end_offset == 12
    dup = append(log2, make_batch(2, value_size=200, pid=PID, epoch=1, seq=8))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (8, 9)
    with pytest.raises(ProducerStateError) as e:
        append(log2, make_batch(1, pid=PID, epoch=0, seq=12))
    assert e.value.error_code == 47
    assert append(log2, make_batch(1, pid=PID, epoch=1, seq=12)).first_offset == 12


def test_state_rebuilt_without_any_snapshot(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(2, 0))
    append(log, idem(2, 2))
    for p in log.dir.glob("*.snapshot"):
        p.unlink()
    log2 = reopen(log, clean=False)
    assert append(log2, idem(2, 2)).duplicate


def test_corrupt_snapshot_falls_back(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=600))
    for seq in range(4):
        append(log, make_batch(1, value_size=200, pid=PID, epoch=0, seq=seq))
    log.close()
    latest = sorted(log.dir.glob("*.snapshot"))[-1]
    latest.write_bytes(b"\x00\x01garbage")
    log2 = reopen(log, clean=False)
    assert append(log2, make_batch(1, value_size=200, pid=PID, epoch=0, seq=3)).duplicate
    # after the unclean start it was passed over (the recovered segments' batches were replayed);
    # the clean close writes the snapshot at the log end again
    log2.close()
    assert not latest.exists() or latest.read_bytes() != b"\x00\x01garbage"
    latest.write_bytes(b"\x00\x01garbage")
    log3 = reopen(log2, clean=True)  # a clean start reads it, finds it corrupt and falls back
    assert append(log3, make_batch(1, value_size=200, pid=PID, epoch=0, seq=3)).duplicate
    assert not latest.exists() or latest.read_bytes() != b"\x00\x01garbage"


def test_truncation_reloads_state(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(2, 0))
    append(log, idem(2, 2))
    log.truncate_to(2)
    assert append(log, idem(2, 2)).first_offset == 2  # not a duplicate any more
    log.update_high_watermark(4)
    assert read_batches(log, 0) == [(0, 2), (2, 2)]


def test_old_snapshots_deleted_with_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=600, retention_bytes=0, retention_ms=-1))
    for _ in range(8):
        append(log, make_batch(1, value_size=200))
    assert len(list(log.dir.glob("*.snapshot"))) == 3  # one per roll: 2, 4, 6
    assert log.delete_old_segments(0) == 4  # the active one is rolled first (snapshot 8)
    assert log.log_start_offset == 8
    snaps = sorted(int(p.name.split(".")[0]) for p in log.dir.glob("*.snapshot"))
    assert snaps == [6, 8]  # below the log start offset, but the two newest are kept
