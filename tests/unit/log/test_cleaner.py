"""Log compaction (odradek.log.cleaner): no sockets, explicit clocks."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import cramjam
import pytest

from odradek.log import Log, LogConfig, LogManager
from odradek.log.checkpoint import read_offset_checkpoint
from odradek.log.cleaner import CLEANER_CHECKPOINT, CleanerConfig, LogCleaner, has_keyless_record
from odradek.protocol.errors import INVALID_RECORD
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DELETE_HORIZON_FLAG,
    InvalidRecordError,
    Record,
    batch_crc_ok,
    build_batch,
    crc32c,
    decode_records,
    iter_batches,
    read_header,
)

from .log_helpers import NOW, append, new_log, region_bytes, reopen

COMPACT = LogConfig(
    segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=1000,
    index_interval_bytes=256,
)


def kv(key: bytes | None, value: bytes | None, ts: int = NOW, **kw: object) -> bytes:
    return build_batch([(key, value)], timestamp=ts, **kw)  # type: ignore[arg-type]


def recompress(batch: bytes, codec: int) -> bytes:
    """Re-encode an uncompressed batch with another codec (test-side encoders)."""
    h = read_header(batch)
    raw = batch[BATCH_HEADER_SIZE:]
    if codec == COMPRESSION_SNAPPY:
        payload = bytes(cramjam.snappy.compress_raw(raw))
    elif codec == COMPRESSION_LZ4:
        payload = bytes(cramjam.lz4.compress(raw))
    elif codec == COMPRESSION_ZSTD:
        payload = bytes(cramjam.zstd.compress(raw))
    else:
        raise ValueError(codec)
    after = struct.pack(
        ">hiqqqhii", (h.attributes & ~7) | codec, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
        h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
    ) + payload
    return struct.pack(">qiibI", h.base_offset, len(after) + 9, h.partition_leader_epoch, 2, crc32c(after)) + after


def batches(log: Log, start: int | None = None) -> list[tuple[int, bytes]]:
    """(position-independent) every batch readable from ``start`` (default: log start) to the HW."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.high_watermark:
        data = log.read(offset, 1 << 30, log.high_watermark, True)
        if data.size == 0:
            break
        buf = region_bytes(data)
        got = list(iter_batches(buf))
        assert got
        for p, h in got:
            out.append((h.base_offset, buf[p : p + h.size]))
        offset = got[-1][1].next_offset
    return out


def records(log: Log) -> list[Record]:
    out: list[Record] = []
    for _base, b in batches(log):
        out.extend(decode_records(b))
    return out


def latest(recs: list[Record]) -> dict[bytes, bytes | None]:
    d: dict[bytes, bytes | None] = {}
    for r in recs:
        assert r.key is not None
        d[r.key] = r.value
    return d


def fill(log: Log, keys: int, rounds: int, *, now: int = NOW) -> dict[bytes, bytes]:
    """``rounds`` updates of each of ``keys`` keys, one record per batch; value = b"<key>@<offset>"."""
    expect: dict[bytes, bytes] = {}
    for r in range(rounds):
        for k in range(keys):
            key = f"k{k:03d}".encode()
            value = f"{key.decode()}@{log.log_end_offset}:{r}".encode() + b"x" * 40
            append(log, kv(key, value, ts=now), now=now)
            expect[key] = value
    return expect


def check_offsets(log: Log) -> None:
    """Offsets strictly increase, each record lies within its batch's [base, last] range, and the
    value written at an offset is still found at that offset."""
    prev = -1
    for _base, b in batches(log):
        h = read_header(b)
        assert crc32c(b[21:]) == h.crc
        for r in decode_records(b):
            assert h.base_offset <= r.offset <= h.base_offset + h.last_offset_delta
            assert r.offset > prev
            prev = r.offset
            if r.value is not None and b"@" in r.value:
                assert int(r.value.split(b"@")[1].split(b":")[0]) == r.offset


def leftovers(log: Log) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap")))


# ---------------------------------------------------------------------------------- basics


def test_compacts_to_latest_value_per_key(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    expect = fill(log, 20, 30)
    n_before = log.number_of_segments
    assert n_before > 10
    active = log.active_segment
    active_bytes = (log.dir / f"{active.base_offset:020d}.log").read_bytes()
    active_count = sum(h.record_count for _p, h in active.log.iter_headers())
    old_region = log.read(0, 1 << 20, log.high_watermark, False)
    old_bytes = region_bytes(old_region)

    cleaner = LogCleaner()
    stats = cleaner.clean_now([log], NOW)
    assert stats is not None
    assert stats.records_removed > 0 and stats.bytes_written < stats.bytes_read
    recs = records(log)
    assert latest(recs) == expect
    assert len(recs) <= 20 + active_count
    check_offsets(log)
    # the active segment is untouched (same object, same bytes), offsets and the log end unchanged
    assert log.active_segment is active
    assert (log.dir / f"{active.base_offset:020d}.log").read_bytes() == active_bytes
    assert log.log_end_offset == 600 and log.log_start_offset == 0
    assert log.number_of_segments == n_before  # groups are sized by the source segments (Kafka's rule)
    # a region handed out before the swap still reads the old bytes
    assert region_bytes(old_region) == old_bytes
    assert leftovers(log) == []
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    # cleaner checkpoint = base of the active segment
    ckpt = read_offset_checkpoint(tmp_path / CLEANER_CHECKPOINT)
    assert ckpt == {("t", 0): active.base_offset}
    # nothing more to do until there is new dirty data
    assert cleaner.clean_now([log], NOW) is None
    log.process_pending_deletes(NOW + 1000)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    # reads from every offset (inside gaps too) land on the next surviving batch
    for off in range(0, 600, 37):
        data = log.read(off, 1 << 20, log.high_watermark, True)
        h = read_header(region_bytes(data))
        assert h.base_offset + h.last_offset_delta >= off
    # the next clean merges the now small cleaned segments into groups of up to segment.bytes
    expect.update(fill(log, 20, 1))
    assert cleaner.clean_now([log], NOW) is not None
    assert log.number_of_segments < n_before // 2
    assert all(s.size <= COMPACT.segment_bytes for s in log.segments)
    assert latest(records(log)) == expect
    check_offsets(log)
    # survives a clean restart and a crash recovery (indexes, CRCs, next offset)
    log2 = reopen(log, clean=True)
    assert latest(records(log2)) == expect and log2.log_end_offset == 620
    log3 = reopen(log2, clean=False)
    for seg in log3.segments:
        assert seg.recover() == 0
    assert latest(records(log3)) == expect


def test_cleaned_segments_are_indexed_and_searchable(tmp_path: Path) -> None:
    cfg = COMPACT.replace(segment_bytes=8192)
    log = new_log(tmp_path, cfg)
    for i in range(400):
        key = f"k{i}" if i < 300 else f"k{i % 50}"
        append(log, kv(key.encode(), b"v" * 60, ts=NOW + i), now=NOW + i)
    LogCleaner().clean_now([log], NOW + 400)
    seg = log.segments[0]
    assert seg.offset_index.entries > 0
    seg.offset_index.sanity_check()
    seg.time_index.sanity_check()
    # time index: the last entry holds the segment's largest timestamp
    assert seg.max_timestamp == max(r.timestamp for r in records(log) if r.offset < log.segments[1].base_offset)
    # ListOffsets by timestamp: first surviving record with ts >= the query
    recs = records(log)
    for q in (NOW, NOW + 123, NOW + 360):
        want = next(r for r in recs if r.timestamp >= q)
        assert log.fetch_offset_by_timestamp(q) == (want.offset, want.timestamp)


def test_rewritten_batch_keeps_offsets_and_producer_fields(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    b = build_batch(
        [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")], timestamps=[NOW, NOW + 1, NOW + 2, NOW + 3],
        producer_id=7, producer_epoch=1, base_sequence=0,
    )
    append(log, b)
    append(log, kv(b"c", b"2", producer_id=7, producer_epoch=1, base_sequence=4))
    log.roll(NOW)
    append(log, kv(b"z", b"active"))
    LogCleaner().clean_now([log], NOW)
    (base, first), (_b2, second), _active = batches(log)
    h = read_header(first)
    assert (base, h.last_offset_delta, h.record_count) == (0, 3, 2)  # offsets 1 (b) and 2 (a) kept
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 1, 0)
    assert h.max_timestamp == NOW + 2 and h.base_timestamp == NOW
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(first)] == [
        (1, b"b", b"1", NOW + 1), (2, b"a", b"2", NOW + 2),
    ]
    assert read_header(second).base_offset == 4
    # the producer's sequence continues (state comes from the snapshot taken at the roll)
    append(log, kv(b"z", b"x", producer_id=7, producer_epoch=1, base_sequence=5))


# ---------------------------------------------------------------------------------- tombstones


def test_tombstones_kept_until_delete_retention(tmp_path: Path) -> None:
    cfg = COMPACT.replace(delete_retention_ms=10_000)
    log = new_log(tmp_path, cfg)
    fill(log, 5, 3)
    append(log, kv(b"k001", None, ts=NOW + 5))  # superseded by the values below
    fill(log, 5, 10)
    cleaner = LogCleaner()
    append(log, kv(b"k001", None, ts=NOW + 7))
    append(log, kv(b"k003", None, ts=NOW + 8))
    log.roll(NOW)
    append(log, kv(b"k000", b"active"))
    t1 = NOW + 1000
    assert cleaner.clean_now([log], t1) is not None
    recs = records(log)
    tombs = [r for r in recs if r.value is None]
    assert sorted(r.key for r in tombs if r.key) == [b"k001", b"k003"]
    assert [r.timestamp for r in tombs] == [NOW + 7, NOW + 8]  # record timestamps preserved
    for _base, b in batches(log):
        h = read_header(b)
        if any(r.value is None for r in decode_records(b)):
            assert h.attributes & DELETE_HORIZON_FLAG
            assert h.base_timestamp == t1 + 10_000
    # before the horizon: nothing to do (no dirty data, horizon not reached)
    assert cleaner.clean_now([log], t1 + 9_999) is None
    # after it: the horizon alone triggers a clean that drops them
    stats = cleaner.clean_now([log], t1 + 10_000)
    assert stats is not None and stats.tombstones_removed == 2
    recs = records(log)
    assert not [r for r in recs if r.value is None]
    assert b"k001" not in latest(recs) and b"k003" not in latest(recs)
    assert latest(recs)[b"k002"].startswith(b"k002@")  # type: ignore[union-attr]
    check_offsets(log)


def test_min_compaction_lag(tmp_path: Path) -> None:
    cfg = COMPACT.replace(min_compaction_lag_ms=60_000)
    log = new_log(tmp_path, cfg)
    fill(log, 10, 10)
    cleaner = LogCleaner()
    assert cleaner.cleanable_range(log, NOW + 1000) is None
    assert cleaner.clean_now([log], NOW + 59_000) is None
    assert cleaner.clean_now([log], NOW + 60_001) is not None
    # only segments whose records are all older than the lag are cleaned
    log2 = new_log(tmp_path / "b", cfg)
    fill(log2, 10, 5, now=NOW)
    boundary = log2.log_end_offset
    fill(log2, 10, 5, now=NOW + 50_000)
    rng = cleaner.cleanable_range(log2, NOW + 60_001)
    assert rng is not None and rng.end_offset <= boundary


def test_dirty_ratio_and_max_compaction_lag(tmp_path: Path) -> None:
    cfg = COMPACT.replace(min_cleanable_dirty_ratio=0.5)
    log = new_log(tmp_path, cfg)
    fill(log, 20, 10)
    cleaner = LogCleaner()
    assert cleaner.clean_now([log], NOW) is not None
    fill(log, 2, 2)  # a little dirty data: ratio below 0.5
    log.roll(NOW)
    rng = cleaner.cleanable_range(log, NOW)
    assert rng is not None and 0 < rng.ratio < 0.5 and not rng.needs_now
    assert cleaner.clean_now([log], NOW) is None
    log.update_config(cfg.replace(max_compaction_lag_ms=5_000))
    assert cleaner.clean_now([log], NOW + 4_000) is None
    assert cleaner.clean_now([log], NOW + 6_000) is not None


# ---------------------------------------------------------------------------------- codecs, keys


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_compressed_batches(tmp_path: Path, codec: int) -> None:
    log = new_log(tmp_path, COMPACT.replace(segment_bytes=1 << 20))
    expect: dict[bytes, bytes] = {}
    for r in range(5):
        recs = [(f"k{i}".encode(), f"v{r}-{i}".encode() * 5, (("h", b"x"),)) for i in range(20)]
        b = build_batch(recs, timestamp=NOW + r, compression=COMPRESSION_GZIP if codec == COMPRESSION_GZIP else 0)
        if codec != COMPRESSION_GZIP:
            b = recompress(b, codec)
        append(log, b)
        expect.update({k: v for k, v, _h in recs})
    append(log, build_batch([(b"k0", b"last", (("h", b"x"),))], timestamp=NOW))  # supersedes one record
    expect[b"k0"] = b"last"
    log.roll(NOW)
    append(log, kv(b"k0", b"active"))
    LogCleaner().clean_now([log], NOW)
    out = batches(log)
    assert len(out) == 3
    h = read_header(out[0][1])
    assert h.record_count == 19 and h.last_offset_delta == 19 and h.base_offset == 80
    # LZ4 is written uncompressed; the others keep their codec
    assert h.compression == (COMPRESSION_NONE if codec == COMPRESSION_LZ4 else codec)
    if codec == COMPRESSION_SNAPPY:
        assert out[0][1][BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    got = decode_records(out[0][1]) + decode_records(out[1][1])
    assert {r.key: r.value for r in got} == expect
    assert all(r.headers == (("h", b"x"),) for r in got)


def test_partially_kept_compressed_batch_is_recompressed(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT.replace(segment_bytes=1 << 20))
    append(log, build_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], timestamp=NOW, compression=COMPRESSION_GZIP))
    append(log, build_batch([(b"b", b"2")], timestamp=NOW))
    log.roll(NOW)
    append(log, kv(b"x", b"y"))
    LogCleaner().clean_now([log], NOW)
    (_b, first), (_b2, _second), _active = batches(log)
    h = read_header(first)
    assert h.compression == COMPRESSION_GZIP and h.record_count == 2 and h.last_offset_delta == 2
    assert [(r.offset, r.key) for r in decode_records(first)] == [(0, b"a"), (2, b"c")]
    assert batch_crc_ok(first, 0, h)


def test_keyless_records_rejected_on_compacted_topics(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    for batch in (kv(None, b"v"), build_batch([(b"k", b"v"), (None, b"v")], compression=COMPRESSION_GZIP)):
        with pytest.raises(InvalidRecordError) as e:
            append(log, batch)
        assert e.value.error_code == INVALID_RECORD
    assert log.log_end_offset == 0
    assert not has_keyless_record(kv(b"k", None), 0, read_header(kv(b"k", None)))
    plain = new_log(tmp_path / "plain")
    append(plain, kv(None, b"v"))  # fine with cleanup.policy=delete
    # keyless records written before the topic became compacted are dropped by the cleaner
    for i in range(30):
        append(plain, kv(None if i % 3 == 0 else f"k{i % 4}".encode(), b"v" * 80))
    plain.update_config(COMPACT)
    plain.roll(NOW)
    stats = LogCleaner().clean_now([plain], NOW)
    assert stats is not None and stats.keyless_removed == 11
    assert all(r.key is not None for r in records(plain))


# ---------------------------------------------------------------------------------- concurrency


def test_append_during_run_does_not_break_commit(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    expect = fill(log, 10, 20)
    cleaner = LogCleaner()
    task = cleaner.prepare(log, NOW)
    assert task is not None
    worker = threading.Thread(target=task.run)
    worker.start()
    expect.update(fill(log, 10, 10))  # rolls new segments meanwhile
    worker.join()
    assert cleaner.commit(log, task, NOW) is not None
    assert latest(records(log)) == expect
    check_offsets(log)
    assert log.log_end_offset == 300


def test_retention_between_prepare_and_commit_discards_the_task(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT.replace(cleanup_policy="compact,delete", retention_ms=1000))
    expect = fill(log, 10, 20)
    cleaner = LogCleaner()
    task = cleaner.prepare(log, NOW)
    assert task is not None
    task.run()
    assert any(n.endswith(".cleaned") for n in os.listdir(log.dir))
    log.delete_records_before(50, NOW)  # deletes the first segment(s)
    assert cleaner.commit(log, task, NOW) is None
    assert leftovers(log) == []
    assert latest(records(log)) == {k: v for k, v in expect.items()}
    assert cleaner.checkpoint_of(log) is None
    # a closed (deleted) log is not touched either
    task = cleaner.prepare(log, NOW)
    assert task is not None
    task.run()
    log.close()
    assert cleaner.commit(log, task, NOW) is None
    assert leftovers(log) == []


def test_manager_maybe_clean_uses_a_worker_thread(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], lambda topic: COMPACT, CleanerConfig(backoff_ms=10))
    mgr.startup()
    log = mgr.get_or_create_log("t", 0)
    expect = fill(log, 10, 20)
    done = threading.Event()
    assert mgr.maybe_clean(NOW, wake=done.set) is None  # started
    assert mgr.cleaner.busy
    assert done.wait(10)
    stats = mgr.maybe_clean(NOW)
    assert stats is not None and stats.records_kept <= 10 + 10
    assert latest(records(log)) == expect
    end = mgr.cleaner.checkpoint_of(log)
    mgr.shutdown()
    # the checkpoint survives a restart
    mgr2 = LogManager([tmp_path], lambda topic: COMPACT)
    mgr2.startup()
    log2 = mgr2.get_log("t", 0)
    assert log2 is not None and mgr2.cleaner.checkpoint_of(log2) == end
    assert latest(records(log2)) == expect
    # deleting the log drops its checkpoint
    mgr2.delete_log("t", 0)
    assert read_offset_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {}
    mgr2.shutdown()


def test_shutdown_aborts_a_running_clean(tmp_path: Path) -> None:
    mgr = LogManager([tmp_path], lambda topic: COMPACT)
    mgr.startup()
    log = mgr.get_or_create_log("t", 0)
    fill(log, 10, 20)
    mgr.maybe_clean(NOW)
    mgr.shutdown()
    assert leftovers(log) == []


def test_offset_map_limit_cleans_a_prefix(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    for i in range(300):
        append(log, kv(f"k{i}".encode(), b"v" * 50))  # all keys distinct
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=24 * 150))  # room for 135 keys
    assert cleaner.clean_now([log], NOW) is not None
    ckpt = cleaner.checkpoint_of(log)
    assert ckpt is not None and 0 < ckpt < log.active_segment.base_offset
    assert len(records(log)) == 300


# ---------------------------------------------------------------------------------- crash safety


def test_leftover_cleaned_files_are_deleted_on_load(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT)
    expect = fill(log, 10, 20)
    task = LogCleaner().prepare(log, NOW)
    assert task is not None
    task.run()
    assert leftovers(log)
    log2 = reopen(log, clean=False)
    assert leftovers(log2) == []
    assert latest(records(log2)) == expect
    assert len(records(log2)) == 200


@pytest.mark.parametrize("renamed_old", [0, 1, -1])
def test_interrupted_swap_is_completed_on_load(tmp_path: Path, renamed_old: int) -> None:
    log = new_log(tmp_path, COMPACT)
    expect = fill(log, 10, 20)
    task = LogCleaner().prepare(log, NOW)
    assert task is not None
    task.run()
    assert task.error is None
    # crash after ".cleaned -> .swap" and after renaming some of the old segments to .deleted
    for name in os.listdir(log.dir):
        if name.endswith(".cleaned"):
            os.replace(log.dir / name, log.dir / (name[: -len(".cleaned")] + ".swap"))
    old = task.segments if renamed_old < 0 else task.segments[:renamed_old]
    for seg in old:
        os.replace(seg.log.path, f"{seg.log.path}.deleted")
    log2 = reopen(log, clean=False)
    assert leftovers(log2) == []
    recs = records(log2)
    assert latest(recs) == expect
    assert len(recs) <= 10 + sum(h.record_count for _p, h in log2.active_segment.log.iter_headers())
    assert [s.base_offset for s in log2.segments[:-1]] == [o.base for o in task.outputs]
    check_offsets(log2)
