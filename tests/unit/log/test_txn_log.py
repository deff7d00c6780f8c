"""Transactions in the log (KIP-98): the transaction index, markers, producer state with
ongoing transactions, the last stable offset, read_committed reads, recovery."""

from __future__ import annotations

import logging
import os
import shutil
import struct
from pathlib import Path

import pytest

from odradek.log import FetchIsolation, IsolationLevel, Log, LogConfig, ProducerStateError
from odradek.log.errors import CorruptIndexError
from odradek.log.producer_state import ProducerStateManager
from odradek.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from odradek.log.txn_marker import ControlRecordType, EndTxnMarker, build_marker_batch, parse_marker
from odradek.protocol.records import (
    DELETE_HORIZON_FLAG,
    BatchHeader,
    build_batch,
    decode_records,
    iter_batches,
    validate_batches,
)

from .log_helpers import NOW, region_bytes

COMMIT = ControlRecordType.COMMIT
ABORT = ControlRecordType.ABORT
LOG_END, HIGH_WATERMARK = FetchIsolation.LOG_END, FetchIsolation.HIGH_WATERMARK
TXN_COMMITTED = FetchIsolation.TXN_COMMITTED


# ---------------------------------------------------------------------------------- txn index


def test_txn_index_file_layout_round_trip(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert idx.entries == [] and not idx.path.exists()  # created on the first append
    a = AbortedTxn(7, 3, 10, 11)
    b = AbortedTxn(2**40, 12, 20, 15)
    idx.append(a)
    idx.append(b)
    idx.flush()
    raw = idx.path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    # version int16 0 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
    assert raw[:34] == b"\x00\x00" + (7).to_bytes(8, "big") + (3).to_bytes(8, "big") + (10).to_bytes(8, "big") + (
        11).to_bytes(8, "big")
    assert raw[34:] == struct.pack(">hqqqq", 0, 2**40, 12, 20, 15)
    idx.close()
    again = TransactionIndex(idx.path, 0)
    assert again.entries == [a, b]
    again.sanity_check()
    with pytest.raises(ValueError):
        again.append(AbortedTxn(1, 0, 20, 21))  # lastOffset must grow


def test_txn_index_torn_tail_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(AbortedTxn(1, 100, 105, 106).encode() + AbortedTxn(2, 101, 110, 111).encode()[:20])
    idx = TransactionIndex(path, 100)
    assert idx.entries == [AbortedTxn(1, 100, 105, 106)]
    assert path.stat().st_size == ENTRY_SIZE
    idx.append(AbortedTxn(2, 101, 110, 111))
    assert TransactionIndex(path, 100).entries == [AbortedTxn(1, 100, 105, 106), AbortedTxn(2, 101, 110, 111)]


def test_txn_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(AbortedTxn(1, 90, 95, 96).encode())  # marker below the segment's base offset
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()


def test_txn_index_collect_and_truncate(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "x.txnindex", 0)
    entries = [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9), AbortedTxn(3, 10, 12, 13), AbortedTxn(4, 14, 20, 21)]
    for e in entries:
        idx.append(e)
    # overlap: lastOffset >= fetch offset and firstOffset < upper bound
    res = idx.collect_aborted_txns(6, 11)
    assert res.aborted == [entries[1], entries[2]] and res.is_complete  # entry 3's LSO 13 >= 11
    res = idx.collect_aborted_txns(0, 4)
    assert res.aborted == [entries[0], entries[1]] and res.is_complete  # entry 2's LSO 9 >= 4
    res = idx.collect_aborted_txns(13, 100)
    assert res.aborted == [entries[3]] and not res.is_complete
    idx.truncate_to(12)  # entries whose marker is at or after 12 go
    assert idx.entries == entries[:2]
    assert idx.path.stat().st_size == 2 * ENTRY_SIZE
    assert TransactionIndex(idx.path, 0).entries == entries[:2]
    idx.reset()
    assert idx.entries == [] and idx.path.stat().st_size == 0


# ---------------------------------------------------------------------------------- markers


def test_marker_batch_format() -> None:
    raw = build_marker_batch(9, 3, 17, ABORT, timestamp=NOW)
    (_pos, h), = iter_batches(raw)
    assert h.is_control and h.is_transactional and h.producer_id == 9 and h.producer_epoch == 3
    assert h.base_sequence == -1 and h.record_count == 1 and h.compression == 0
    rec, = decode_records(raw)
    assert rec.key == b"\x00\x00\x00\x00"  # version 0, type 0 (abort)
    assert rec.value == b"\x00\x00" + (17).to_bytes(4, "big")  # version 0, coordinator epoch
    assert parse_marker(raw, h) == EndTxnMarker(ABORT, 17)
    commit = build_marker_batch(9, 3, 17, COMMIT, timestamp=NOW)
    assert parse_marker(commit, validate_batches(commit)[0]) == EndTxnMarker(COMMIT, 17)


# ---------------------------------------------------------------------------------- the log


def new_log(tmp_path: Path, config: LogConfig | None = None) -> Log:
    return Log.create(tmp_path, "txn", 0, config or LogConfig(), time_ms=NOW)


def txn_batch(pid: int, seq: int, n: int = 2, *, epoch: int = 0, value: bytes = b"v", key: bytes | None = None,
              ) -> bytearray:
    return bytearray(build_batch([(key, value)] * n, timestamp=NOW, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, transactional=True))


def produce(log: Log, data: bytearray, *, hw: bool = True) -> tuple[int, int]:
    info = log.append_as_leader(data, validate_batches(data), 0, NOW)
    if hw:
        log.update_high_watermark(log.log_end_offset)
    return info.first_offset, info.last_offset


def end_txn(log: Log, pid: int, result: ControlRecordType, *, epoch: int = 0, coordinator_epoch: int = 0,
            hw: bool = True) -> int:
    info = log.append_txn_marker(pid, epoch, coordinator_epoch, result, 0, NOW)
    if hw:
        log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def test_lso_progression_commit(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    produce(log, bytearray(build_batch([(None, b"x")], timestamp=NOW)))  # 0, no producer
    assert log.last_stable_offset == 1 and log.first_unstable_offset() is None
    produce(log, txn_batch(1, 0), hw=False)  # 1..2
    assert log.high_watermark == 1 and log.last_stable_offset == 1
    log.update_high_watermark(3)
    assert log.last_stable_offset == 1  # the open transaction starts at 1
    produce(log, txn_batch(1, 2))  # 3..4: same transaction
    assert log.producer_state.ongoing_txns.keys() == {1} and log.last_stable_offset == 1
    marker = end_txn(log, 1, COMMIT, hw=False)  # 5
    assert marker == 5 and log.log_end_offset == 6
    # completed, but its marker is not replicated yet: still unstable (Kafka's unreplicatedTxns)
    assert log.first_unstable_offset() == 1 and log.last_stable_offset == 1
    log.update_high_watermark(5)
    assert log.last_stable_offset == 1
    log.update_high_watermark(6)
    assert log.first_unstable_offset() is None and log.last_stable_offset == 6
    assert log.latest_offset(TXN_COMMITTED) == 6 and log.latest_offset(HIGH_WATERMARK) == 6
    assert all(seg.txn_index.entries == [] for seg in log.segments)  # commits are not indexed
    assert log.producer_entry(1).current_txn_first_offset == -1  # type: ignore[union-attr]


def test_abort_is_indexed_and_read_committed(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    produce(log, txn_batch(1, 0))  # 0..1
    produce(log, bytearray(build_batch([(None, b"plain")], timestamp=NOW)))  # 2
    produce(log, txn_batch(1, 2))  # 3..4
    assert log.last_stable_offset == 0
    data, aborted = log.read_isolated(0, 1 << 20, TXN_COMMITTED, True)
    assert data.size == 0 and aborted == []
    assert end_txn(log, 1, ABORT) == 5
    assert log.last_stable_offset == 6
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 0, 5, 6)]
    data, aborted = log.read_isolated(0, 1 << 20, TXN_COMMITTED, True)
    assert [h.base_offset for _p, h in iter_batches(region_bytes(data))] == [0, 2, 3, 5]
    assert aborted == [AbortedTxn(1, 0, 5, 6)]
    # a fetch beyond the transaction does not see it
    produce(log, txn_batch(1, 4))  # 6..7: a new transaction
    end_txn(log, 1, COMMIT)  # 8
    data, aborted = log.read_isolated(6, 1 << 20, TXN_COMMITTED, True)
    assert aborted == [] and data.size > 0
    assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 5, 6)]
    assert log.collect_aborted_transactions(6, 9) == []


def test_each_isolation_reads_to_its_own_offset(tmp_path: Path) -> None:
    """Log.latest_offset: LOG_END the log end, HIGH_WATERMARK the high watermark, TXN_COMMITTED the last stable
    offset (Kafka's UnifiedLog.read maxOffsetMetadata); read_isolated reads to it and lists aborted
    transactions for TXN_COMMITTED only."""
    log = new_log(tmp_path)
    produce(log, txn_batch(1, 0))  # 0..1, aborted below
    end_txn(log, 1, ABORT)  # 2
    produce(log, bytearray(build_batch([(None, b"plain")], timestamp=NOW)))  # 3
    produce(log, txn_batch(2, 0))  # 4..5: open, so the last stable offset stays at 4
    produce(log, bytearray(build_batch([(None, b"past")], timestamp=NOW)), hw=False)  # 6: not replicated yet
    assert (log.last_stable_offset, log.high_watermark, log.log_end_offset) == (4, 6, 7)
    assert [log.latest_offset(i) for i in (LOG_END, HIGH_WATERMARK, TXN_COMMITTED)] == [7, 6, 4]
    bases: dict[FetchIsolation, list[int]] = {}
    for isolation in FetchIsolation:
        data, aborted = log.read_isolated(0, 1 << 20, isolation, True)
        bases[isolation] = [h.base_offset for _p, h in iter_batches(region_bytes(data))]
        assert aborted == ([AbortedTxn(1, 0, 2, 3)] if isolation is TXN_COMMITTED else [])
    assert bases == {LOG_END: [0, 2, 3, 4, 6], HIGH_WATERMARK: [0, 2, 3, 4], TXN_COMMITTED: [0, 2, 3]}


def test_fetch_isolation_of_a_request() -> None:
    """Kafka's FetchIsolation.of for Fetch (a replica id >= 0 reads to the log end, whatever its level) and
    ReplicaManager.fetchOffset's rule for ListOffsets (only replica id -1 is a client bound by its level)."""
    of, lo = FetchIsolation.of, FetchIsolation.for_list_offsets
    committed, uncommitted = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    assert of(0, committed) is of(3, uncommitted) is LOG_END
    assert of(-1, committed) is TXN_COMMITTED and of(-1, uncommitted) is HIGH_WATERMARK
    assert of(-1, 1) is TXN_COMMITTED and of(-1, 0) is HIGH_WATERMARK  # the wire's int8
    assert of(-2, 1) is TXN_COMMITTED and of(-3, 0) is HIGH_WATERMARK  # other negative ids: a consumer's
    assert lo(-1, committed) is TXN_COMMITTED and lo(-1, uncommitted) is HIGH_WATERMARK
    assert lo(-2, committed) is lo(0, committed) is lo(5, uncommitted) is LOG_END  # debugging tool, replicas


def test_interleaved_producers(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=200))
    produce(log, txn_batch(1, 0))  # A 0..1
    produce(log, txn_batch(2, 0))  # B 2..3
    produce(log, txn_batch(1, 2))  # A 4..5
    assert list(log.producer_state.ongoing_txns) == [0, 2] and log.last_stable_offset == 0
    end_txn(log, 2, ABORT)  # B aborts at 6; A is still open from 0
    assert log.last_stable_offset == 0
    produce(log, txn_batch(3, 0))  # C 7..8
    end_txn(log, 1, COMMIT)  # A commits at 9
    assert log.last_stable_offset == 7  # C is open
    end_txn(log, 3, ABORT)  # 10
    assert log.last_stable_offset == 11
    entries = [e for seg in log.segments for e in seg.txn_index.entries]
    # B's entry: the LSO after it completed is A's first offset; C's: nothing else open
    assert entries == [AbortedTxn(2, 2, 6, 0), AbortedTxn(3, 7, 10, 11)]
    assert log.number_of_segments > 2  # the entries live in the segments of their markers
    assert log.collect_aborted_transactions(0, 11) == entries
    assert log.collect_aborted_transactions(4, 7) == [AbortedTxn(2, 2, 6, 0)]
    assert log.collect_aborted_transactions(9, 11) == [AbortedTxn(3, 7, 10, 11)]


def test_fenced_coordinator_and_producer_epochs(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    produce(log, txn_batch(1, 0))
    end_txn(log, 1, COMMIT, coordinator_epoch=5)
    assert log.producer_entry(1).coordinator_epoch == 5  # type: ignore[union-attr]
    produce(log, txn_batch(1, 2))
    with pytest.raises(ProducerStateError) as e:
        end_txn(log, 1, ABORT, coordinator_epoch=4)
    assert e.value.error_code == 52  # TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == 5 and log.first_unstable_offset() == 3
    with pytest.raises(ProducerStateError) as e:
        log.append_txn_marker(1, -1, 5, ABORT, 0, NOW)
    assert e.value.error_code == 47  # an older producer epoch
    # a newer coordinator epoch and a bumped producer epoch (the coordinator's abort on a fence)
    end_txn(log, 1, ABORT, coordinator_epoch=6, epoch=1)
    assert log.first_unstable_offset() is None and log.last_stable_offset == 6
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 3, 5, 6)]


def test_clients_cannot_write_markers(tmp_path: Path) -> None:
    from odradek.protocol.records import InvalidRecordError

    log = new_log(tmp_path)
    data = bytearray(build_marker_batch(1, 0, 0, COMMIT, timestamp=NOW))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(data, validate_batches(data), 0, NOW)


def test_follower_follows_the_transactions(tmp_path: Path) -> None:
    leader = new_log(tmp_path / "l", LogConfig(segment_bytes=300))
    produce(leader, txn_batch(1, 0))
    produce(leader, txn_batch(2, 0))
    end_txn(leader, 1, ABORT)
    produce(leader, txn_batch(1, 2, epoch=0))
    end_txn(leader, 2, COMMIT)
    follower = new_log(tmp_path / "f", LogConfig(segment_bytes=300))
    offset = 0
    while offset < leader.log_end_offset:
        raw = bytearray(region_bytes(leader.read(offset, 1 << 20, leader.log_end_offset, True)))
        headers = validate_batches(raw)
        offset = follower.append_as_follower(raw, headers, NOW)
    follower.update_high_watermark(leader.high_watermark)
    assert follower.last_stable_offset == leader.last_stable_offset == 5  # producer 1's second transaction
    assert list(follower.producer_state.ongoing_txns) == [5]
    assert [e for s in follower.segments for e in s.txn_index.entries] == [
        e for s in leader.segments for e in s.txn_index.entries
    ] == [AbortedTxn(1, 0, 4, 2)]


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    produce(log, txn_batch(1, 0))  # 0..1
    end_txn(log, 1, ABORT)  # 2
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 0, 2, 3)]
    log.truncate_to(2, NOW)
    assert log.active_segment.txn_index.entries == []
    assert log.first_unstable_offset() == 0 and log.last_stable_offset == 0
    end_txn(log, 1, ABORT)  # again at 2
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 0, 2, 3)]


# ---------------------------------------------------------------------------------- restarts


def _state(log: Log) -> tuple[object, ...]:
    ps = log.producer_state
    log.first_unstable_offset()  # loads the producer state
    return (
        log.log_end_offset,
        [(t.producer_id, t.first_offset) for t in ps.ongoing_txns.values()],
        {pid: (e.epoch, e.current_txn_first_offset, e.coordinator_epoch, e.last_seq) for pid, e in ps.producers.items()},
        [(s.base_offset, list(s.txn_index.entries)) for s in log.segments],
        log.last_stable_offset,
    )


def _mixed_workload(log: Log, rounds: int = 12) -> None:
    seqs = {1: 0, 2: 0, 3: 0}
    for r in range(rounds):
        for pid in (1, 2, 3):
            produce(log, txn_batch(pid, seqs[pid], 3))
            seqs[pid] += 3
        end_txn(log, 1, ABORT if r % 2 else COMMIT)
        end_txn(log, 2, ABORT if r % 3 == 0 else COMMIT)
        if r % 4 != 3:
            end_txn(log, 3, ABORT)
    produce(log, txn_batch(2, seqs[2], 3))  # producer 2 stays open; 3 is open since round 11


def test_recovery_after_kill_rebuilds_state_and_indexes(tmp_path: Path) -> None:
    log = new_log(tmp_path / "a", LogConfig(segment_bytes=700))
    _mixed_workload(log)
    assert log.number_of_segments > 4
    log.flush(log.segments[2].base_offset)  # a recovery point inside the log: earlier segments are not scanned
    expected = _state(log)
    assert expected[1] and any(entries for _b, entries in expected[3])  # type: ignore[index]
    # "kill -9": a copy of the live directory, nothing closed
    copy = tmp_path / "b" / log.dir.name
    shutil.copytree(log.dir, copy)
    # a torn tail in the recovered active segment's txn index, and a wrong entry: both rebuilt
    active_idx = copy / log.active_segment.txn_index_path.name
    with open(active_idx, "ab") as f:
        f.write(b"\x00\x00\x01")
    # and a torn tail in the index of a segment below the recovery point (not rescanned): cut on load
    below = [seg for seg in log.segments[:2] if seg.txn_index.entries]
    assert below
    torn = copy / below[0].txn_index_path.name
    with open(torn, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00")
    recovered = Log.open(copy, LogConfig(segment_bytes=700), clean=False, recovery_point=log.recovery_point,
                         high_watermark=log.high_watermark, time_ms=NOW)
    assert _state(recovered) == expected
    assert active_idx.stat().st_size % ENTRY_SIZE == 0
    assert torn.stat().st_size == len(below[0].txn_index.entries) * ENTRY_SIZE
    # and from scratch (no snapshot, recovery point 0)
    copy2 = tmp_path / "c" / log.dir.name
    shutil.copytree(log.dir, copy2)
    for p in copy2.glob("*.snapshot"):
        p.unlink()
    for p in copy2.glob("*.txnindex"):
        p.unlink()
    again = Log.open(copy2, LogConfig(segment_bytes=700), clean=False, recovery_point=0,
                     high_watermark=log.high_watermark, time_ms=NOW)
    assert _state(again) == expected


def test_clean_restart_needs_no_rebuild(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=700))
    _mixed_workload(log, 6)
    expected = _state(log)
    log.close()
    calls: list[int] = []
    original = ProducerStateManager.replay_batch

    def counting(self: ProducerStateManager, *a: object, **k: object) -> object:
        calls.append(1)
        return original(self, *a, **k)  # type: ignore[arg-type]

    ProducerStateManager.replay_batch = counting  # type: ignore[assignment,method-assign]
    try:
        reopened = Log.open(log.dir, LogConfig(segment_bytes=700), clean=True, high_watermark=expected[0],  # type: ignore[arg-type]
                            recovery_point=expected[0], time_ms=NOW)  # type: ignore[arg-type]
        assert _state(reopened) == expected
    finally:
        ProducerStateManager.replay_batch = original  # type: ignore[method-assign]
    assert calls == []  # the snapshot at the log end offset and the index files were enough


# ---------------------------------------------------------------------------------- the cleaner


def _all_batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        buf = region_bytes(log.read(offset, 1 << 30, log.high_watermark, True))
        got = list(iter_batches(buf))
        assert got
        out.extend((h, buf[p : p + h.size]) for p, h in got)
        offset = got[-1][1].next_offset
    return out


def _committed_view(log: Log) -> dict[bytes, bytes | None]:
    """What a read_committed consumer ends up with: latest value per key, aborted batches skipped."""
    aborted = {(t.producer_id, t.first_offset, t.last_offset) for t in log.collect_aborted_transactions(0, 1 << 62)}
    out: dict[bytes, bytes | None] = {}
    for h, raw in _all_batches(log):
        if h.is_control:
            continue
        if h.is_transactional and any(p == h.producer_id and f <= h.base_offset <= last for p, f, last in aborted):
            continue
        for r in decode_records(raw):
            assert r.key is not None
            out[r.key] = r.value
    return out


def test_cleaner_removes_aborted_data_then_markers(tmp_path: Path) -> None:
    from odradek.log.cleaner import LogCleaner

    cfg = LogConfig(segment_bytes=1024, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                    file_delete_delay_ms=0, index_interval_bytes=256, delete_retention_ms=10_000)
    log = new_log(tmp_path, cfg)

    def txn(pid: int, seq: int, *kvs: tuple[bytes, bytes]) -> None:
        produce(log, bytearray(build_batch(list(kvs), timestamp=NOW, producer_id=pid, producer_epoch=0,
                                           base_sequence=seq, transactional=True)))

    def filler(tag: str, n: int = 12) -> None:
        for i in range(n):
            produce(log, bytearray(build_batch([(f"f{i:02d}".encode(), f"{tag}{i}".encode() * 20)], timestamp=NOW)))

    txn(1, 0, (b"a", b"a1"), (b"b", b"b1"))  # 0..1, committed below
    txn(2, 0, (b"a", b"aX"), (b"c", b"cX"))  # 2..3, aborted below: must not shadow a=a1
    end_txn(log, 2, ABORT)  # 4
    end_txn(log, 1, COMMIT)  # 5
    filler("x")
    log.roll(NOW)
    produce(log, bytearray(build_batch([(b"z", b"active")], timestamp=NOW)))
    before = _committed_view(log)
    assert before[b"a"] == b"a1" and b"c" not in before
    cleaner = LogCleaner()

    t1 = NOW + 1000
    stats = cleaner.clean_now([log], t1)
    assert stats is not None and stats.aborted_batches_removed == 1 and stats.markers_removed == 0
    hs = [h for h, _raw in _all_batches(log)]
    assert not any(h.base_offset == 2 for h in hs)  # the aborted batch is gone
    assert [h.base_offset for h in hs if h.is_control] == [4, 5]  # its data was met in this pass: kept
    assert log.segments[0].txn_index.entries == [AbortedTxn(2, 2, 4, 0)]  # copied into the cleaned segment
    assert log.segments[0].txn_index_path.exists()
    assert _committed_view(log) == {**before}

    # producer 1 overwrites a and b: its first transaction's records go in the next clean
    txn(1, 2, (b"a", b"a2"), (b"b", b"b2"))
    end_txn(log, 1, COMMIT)
    filler("y")
    log.roll(NOW)
    produce(log, bytearray(build_batch([(b"z", b"active2")], timestamp=NOW)))
    t2 = t1 + 1000
    assert cleaner.clean_now([log], t2) is not None
    controls = {h.base_offset: h for h, _raw in _all_batches(log) if h.is_control}
    assert 4 in controls and controls[4].attributes & DELETE_HORIZON_FLAG  # no data left: horizon set
    assert controls[4].base_timestamp == t2 + 10_000
    assert 5 in controls and not controls[5].attributes & DELETE_HORIZON_FLAG  # its batch was still read
    assert all(seg.txn_index.entries == [] for seg in log.segments)
    marker4 = next(raw for h, raw in _all_batches(log) if h.base_offset == 4)
    assert parse_marker(marker4, controls[4]) == EndTxnMarker(ABORT, 0)  # still a valid marker

    filler("w")
    log.roll(NOW)
    produce(log, bytearray(build_batch([(b"z", b"active3")], timestamp=NOW)))
    t3 = t2 + 1000
    assert cleaner.clean_now([log], t3) is not None
    controls = {h.base_offset: h for h, _raw in _all_batches(log) if h.is_control}
    assert controls[4].base_timestamp == t2 + 10_000  # horizon not reached: kept
    assert controls[5].attributes & DELETE_HORIZON_FLAG and controls[5].base_timestamp == t3 + 10_000

    stats = cleaner.clean_now([log], t3 + 10_000)  # the horizons alone trigger it
    assert stats is not None and stats.markers_removed == 2
    controls = {h.base_offset: h for h, _raw in _all_batches(log) if h.is_control}
    assert 4 not in controls and 5 not in controls
    assert len(controls) == 1  # producer 1's second commit: its data is still there
    view = _committed_view(log)
    assert view[b"a"] == b"a2" and view[b"b"] == b"b2" and b"c" not in view


def test_cleaner_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    from odradek.log.cleaner import LogCleaner

    cfg = LogConfig(segment_bytes=600, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = new_log(tmp_path, cfg)
    produce(log, bytearray(build_batch([(b"k", b"v0")], timestamp=NOW)))
    produce(log, bytearray(build_batch([(b"k", b"open")], timestamp=NOW, producer_id=4, producer_epoch=0,
                                       base_sequence=0, transactional=True)))
    for i in range(20):
        produce(log, bytearray(build_batch([(b"k", b"v%d" % i)], timestamp=NOW)))
    assert log.number_of_segments >= 3 and log.first_unstable_offset() == 1
    rng = LogCleaner().cleanable_range(log, NOW)
    assert rng is None or rng.end_offset <= 1


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    produce(log, txn_batch(1, 0))  # 0..1
    plain = bytearray(build_batch([(None, b"x")], timestamp=NOW, producer_id=1, producer_epoch=0, base_sequence=2))
    with pytest.raises(ProducerStateError) as e:
        produce(log, plain)
    assert e.value.error_code == 48  # INVALID_TXN_STATE
    assert log.log_end_offset == 2
    end_txn(log, 1, COMMIT)
    assert produce(log, plain) == (3, 3)


def test_interrupted_swap_installs_the_cleaned_txn_index(tmp_path: Path) -> None:
    from odradek.log.clean_task import complete_swaps

    log = new_log(tmp_path, LogConfig(segment_bytes=300))
    produce(log, txn_batch(1, 0))
    end_txn(log, 1, ABORT)
    for i in range(6):
        produce(log, bytearray(build_batch([(b"k%d" % i, b"v" * 30)], timestamp=NOW)))
    assert log.number_of_segments >= 2
    first = log.segments[0]
    entries = list(first.txn_index.entries)
    assert entries == [AbortedTxn(1, 0, 2, 3)]
    log.close()
    # a crash after .cleaned -> .swap: the swap's files replace the segment's
    prefix = str(first.txn_index_path)[: -len(".txnindex")]
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copyfile(prefix + suffix, prefix + suffix + ".swap")
    Path(prefix + ".txnindex.swap").write_bytes(AbortedTxn(1, 0, 2, 3).encode())
    Path(prefix + ".txnindex").unlink()
    assert complete_swaps(log.dir) == 1
    assert not Path(prefix + ".txnindex.swap").exists()
    reopened = Log.open(log.dir, LogConfig(segment_bytes=300), clean=True, time_ms=NOW)
    assert reopened.segments[0].txn_index.entries == entries


def test_swap_interrupted_after_its_indexes_were_installed_keeps_the_txn_index(tmp_path: Path) -> None:
    """kill -9 inside the install of a clean (odradek.log.cleaner): the old segment renamed .deleted,
    the cleaned segment's .index/.timeindex/.txnindex already renamed from .swap, its .log still
    .swap. Completing the swap keeps those indexes: the .txnindex is the only record of the aborted
    transaction below the recovery point."""
    from odradek.log.clean_task import complete_swaps

    log = new_log(tmp_path, LogConfig(segment_bytes=300))
    produce(log, txn_batch(1, 0))
    end_txn(log, 1, ABORT)
    for i in range(6):
        produce(log, bytearray(build_batch([(b"k%d" % i, b"v" * 30)], timestamp=NOW)))
    first = log.segments[0]
    entries = list(first.txn_index.entries)
    assert entries == [AbortedTxn(1, 0, 2, 3)]
    log.close()
    prefix = str(first.txn_index_path)[: -len(".txnindex")]
    # the cleaned copy (same batches here), written as .swap
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        shutil.copyfile(prefix + suffix, prefix + suffix + ".swap")
    # the old segment renamed .deleted, then the install renamed the indexes, not yet the .log
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        os.replace(prefix + suffix, prefix + suffix + ".deleted")
    for suffix in (".index", ".timeindex", ".txnindex"):
        os.replace(prefix + suffix + ".swap", prefix + suffix)
    assert complete_swaps(log.dir) == 1
    assert Path(prefix + ".txnindex").exists() and Path(prefix + ".log").exists()
    # below the recovery point (a clean start, or a recovery from a later point): not rebuilt
    reopened = Log.open(log.dir, LogConfig(segment_bytes=300), clean=True, time_ms=NOW)
    assert reopened.segments[0].txn_index.entries == entries
    assert not [p for p in os.listdir(log.dir) if p.endswith((".swap", ".deleted"))]


def test_follower_refuses_an_undecodable_marker_before_writing(tmp_path: Path) -> None:
    from odradek.log import LogError

    follower = new_log(tmp_path)
    bad = bytearray(build_batch([(b"\x00", b"\x00")], timestamp=NOW, producer_id=1, producer_epoch=0,
                                transactional=True, control=True))
    with pytest.raises(LogError):
        follower.append_as_follower(bad, validate_batches(bad), NOW)
    assert follower.log_end_offset == 0 and follower.size_in_bytes == 0


def test_recovery_from_inside_a_segment_keeps_the_transaction_index(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A recovery point inside a segment: the segment is checked from its last index entry below the
    point; aborted transactions whose markers lie before and after that batch stay in its index, and the
    producer state is the one before the crash."""
    cfg = LogConfig(segment_bytes=1400, index_interval_bytes=40)
    log = new_log(tmp_path / "a", cfg)
    _mixed_workload(log)
    seg = log.segments[2]
    middle = seg.offset_index.entry(seg.offset_index.entries // 2)[0] + 2
    log.flush(middle)
    expected = _state(log)
    assert any(entries for _b, entries in expected[3])  # type: ignore[index]
    copy = tmp_path / "b" / log.dir.name
    shutil.copytree(log.dir, copy)
    caplog.set_level(logging.INFO, logger="odradek.log")
    recovered = Log.open(copy, cfg, clean=False, recovery_point=log.recovery_point,
                         high_watermark=log.high_watermark, time_ms=NOW)
    checked_from = int(caplog.text.split("checked from offset ")[1].split()[0])
    assert seg.base_offset < checked_from < middle
    assert _state(recovered) == expected


def test_flush_snapshots_producer_state_for_the_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush that moves the recovery point SNAPSHOT_AT_FLUSH_BYTES into the active segment past its last
    producer snapshot takes one at the log end, replacing the previous one taken so (the segment's own, at
    its base, stays); a crash recovery replays from it instead of from the segment's base."""
    import odradek.log.log as log_module
    from odradek.log.producer_state import snapshot_path

    monkeypatch.setattr(log_module, "SNAPSHOT_AT_FLUSH_BYTES", 600)
    cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100)
    log = new_log(tmp_path / "a", cfg)
    _mixed_workload(log, 3)
    log.flush()
    first = log.log_end_offset
    assert snapshot_path(log.dir, first).exists()
    log.flush()  # nothing new: no new snapshot
    assert log.producer_state.snapshot_offsets() == [first]
    for seq in range(0, 6, 2):
        produce(log, txn_batch(7, seq, 2))
    end_txn(log, 7, ABORT)
    log.flush()
    assert log.producer_state.snapshot_offsets() == [first]  # under 600 bytes since: none
    _mixed_workload(log, 3)
    log.flush()
    second = log.log_end_offset
    assert log.producer_state.snapshot_offsets() == [second]  # the first one replaced
    _mixed_workload(log, 2)  # past the recovery point, never flushed
    expected = _state(log)
    copy = tmp_path / "b" / log.dir.name
    shutil.copytree(log.dir, copy)
    replayed: list[int] = []
    original = ProducerStateManager.replay_batch

    def counting(self: ProducerStateManager, h: BatchHeader, *a: object) -> object:
        replayed.append(h.base_offset)
        return original(self, h, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(ProducerStateManager, "replay_batch", counting)
    recovered = Log.open(copy, cfg, clean=False, recovery_point=log.recovery_point,
                         high_watermark=log.high_watermark, time_ms=NOW)
    assert _state(recovered) == expected
    assert replayed and min(replayed) == second
