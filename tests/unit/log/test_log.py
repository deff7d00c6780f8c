from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from odradek.log import Log, LogConfig, OffsetOutOfRangeError
from odradek.log.log import parse_dir_name
from odradek.protocol.records import (
    InvalidRecordError,
    batch_crc_ok,
    build_batch,
    iter_batches,
    read_header,
    validate_batches,
)

from .log_helpers import NOW, append, make_batch, new_log, read_batches, region_bytes, reopen


def test_parse_dir_name() -> None:
    assert parse_dir_name("my-topic.v2-13") == ("my-topic.v2", 13)
    assert parse_dir_name("t-0") == ("t", 0)
    assert parse_dir_name("nopartition") is None
    assert parse_dir_name("t-x") is None


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()  # made on first use
    assert log.read(0, 1 << 20, log.high_watermark, False).size == 0
    info = append(log, make_batch(3), make_batch(2), leader_epoch=7)
    assert (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert (info.first_offset, info.last_offset, info.record_count, info.duplicate) == (0, 4, 5, False)
    assert info.log_append_time == -1
    info = append(log, make_batch(4))
    assert (info.first_offset, info.last_offset) == (5, 8)
    assert log.log_end_offset == 9
    data = log.read(0, 1 << 20, log.high_watermark, False)
    raw = region_bytes(data)
    hs = [h for _p, h in iter_batches(raw)]
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch) for h in hs] == [(0, 3, 7), (3, 2, 7), (5, 4, 0)]
    assert all(batch_crc_ok(raw, p, h) for p, h in iter_batches(raw))
    # fetching from an offset inside a batch starts at that batch
    assert read_header(region_bytes(log.read(4, 1 << 20, 9, False))).base_offset == 3
    assert log.read(9, 1000, 9, False).size == 0  # at the log end
    assert log.read(5, 1000, 5, False).size == 0  # at max_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 1000, 9, False)


def test_read_bounds(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for _ in range(5):
        append(log, make_batch(2, value_size=100))
    size = len(make_batch(2, value_size=100))
    # max_offset (high watermark / LSO) stops before the batch at or beyond it
    assert log.read(0, 1 << 20, 4, False).size == 2 * size
    log.update_high_watermark(6)
    assert log.high_watermark == 6
    assert log.read(2, 1 << 20, log.high_watermark, False).size == 2 * size
    # max_bytes ends the region at the last whole batch (no fragment); min_one_message returns the
    # whole first one; without it a first batch larger than max_bytes gives nothing
    assert log.read(0, size + 7, 10, False).size == size
    assert log.read(0, 3 * size - 1, 10, False).size == 2 * size
    assert log.read(0, 3 * size, 10, False).size == 3 * size
    assert log.read(0, 10, 10, True).size == size
    assert log.read(0, 10, 10, False).size == 0
    assert log.update_high_watermark(100) == 10
    assert log.update_high_watermark(-5) == 0


def test_read_ends_at_a_batch_boundary_found_through_the_index(tmp_path: Path) -> None:
    # small index interval: entries for most batches; the walk after the index entry is bounded
    log = new_log(tmp_path, LogConfig(index_interval_bytes=300))
    for _ in range(40):
        append(log, make_batch(2, value_size=100))
    size = len(make_batch(2, value_size=100))
    for start in (0, 2, 17, 40):
        for max_bytes in (size, size + 1, 5 * size - 3, 11 * size + size // 2, 30 * size):
            data = log.read(start, max_bytes, 80, True)
            remaining = (80 - start // 2 * 2) // 2
            assert data.size == min(max_bytes // size, remaining) * size, (start, max_bytes)
            # every region is a sequence of whole batches
            raw = region_bytes(data)
            pos = 0
            while pos < len(raw):
                h = read_header(raw[pos:])
                pos += h.batch_length + 12
            assert pos == len(raw)
    # the end of the data is no cut: a read up to the high watermark returns what is there
    assert log.read(76, 1 << 20, 80, True).size == 2 * size


def test_read_returns_one_segment_at_a_time(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=2000))
    for _ in range(20):
        append(log, make_batch(2, value_size=200))
    assert log.number_of_segments > 3
    seg1 = log.segments[1]
    data = log.read(0, 1 << 30, log.high_watermark, False)
    assert data.segment_base_offset == 0 and data.size == log.segments[0].size
    data = log.read(seg1.base_offset, 1 << 30, log.high_watermark, False)
    assert data.segment_base_offset == seg1.base_offset and data.size == seg1.size
    assert read_batches(log, 0) == [(i, 2) for i in range(0, 40, 2)]
    assert read_batches(log, 0, max_bytes=300) == [(i, 2) for i in range(0, 40, 2)]


def test_roll_on_size_time_and_index_full(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.log")
    log = new_log(tmp_path, LogConfig(segment_bytes=1000))
    b = make_batch(1, value_size=300)
    for _ in range(4):
        append(log, b)
    assert [s.base_offset for s in log.segments] == [0, 2]  # 2 batches of ~370 bytes fit
    assert "Rolled new log segment for t-0 at offset 2" in caplog.text
    assert all(s.size <= 1000 for s in log.segments)
    # segment.ms: first batch timestamp vs incoming batch timestamp
    log2 = new_log(tmp_path, LogConfig(segment_ms=1000), topic="time")
    append(log2, make_batch(1, ts=NOW))
    append(log2, make_batch(1, ts=NOW + 1000))
    assert log2.number_of_segments == 1
    append(log2, make_batch(1, ts=NOW + 1001))
    assert [s.base_offset for s in log2.segments] == [0, 2]
    # index full: 6 offset index entries of 8 bytes, one per batch after the first
    log3 = new_log(tmp_path, LogConfig(segment_index_bytes=48, index_interval_bytes=1), topic="idx")
    for _ in range(9):
        append(log3, make_batch(1))
    assert [s.base_offset for s in log3.segments] == [0, 7]
    assert read_batches(log3, 0) == [(i, 1) for i in range(9)]
    # rolled segments have trimmed indexes
    assert os.path.getsize(log3.segments[0].offset_index_path) == 48
    assert os.path.getsize(log3.segments[0].time_index_path) == 12


def test_explicit_roll_and_empty_roll_is_noop(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    assert log.roll(NOW) is log.active_segment
    append(log, make_batch(2))
    seg = log.roll(NOW)
    assert seg.base_offset == 2 and log.number_of_segments == 2
    assert log.roll(NOW) is seg
    assert (log.dir / "00000000000000000002.snapshot").exists()


def test_log_append_time_rewrites_crc(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = append(log, make_batch(3, ts=5), make_batch(1, ts=6), now=NOW + 42)
    assert info.log_append_time == NOW + 42
    raw = region_bytes(log.read(0, 1 << 20, 4, False))
    hs = validate_batches(raw)  # CRCs valid
    assert [h.max_timestamp for h in hs] == [NOW + 42, NOW + 42]
    assert all(h.timestamp_type == 1 for h in hs)
    assert log.fetch_offset_by_timestamp(NOW + 42) == (0, NOW + 42)


def test_append_validation(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(max_message_bytes=500, message_timestamp_before_max_ms=1000,
                                      message_timestamp_after_max_ms=1000))
    with pytest.raises(InvalidRecordError) as e:
        append(log, make_batch(1, value_size=600))
    assert e.value.error_code == 10
    with pytest.raises(InvalidRecordError) as e:
        append(log, make_batch(1, ts=NOW - 1001))
    assert e.value.error_code == 32
    with pytest.raises(InvalidRecordError) as e:
        append(log, make_batch(1, ts=NOW + 1001))
    assert e.value.error_code == 32
    control = build_batch([(b"k", b"v")], control=True, producer_id=1, producer_epoch=0, timestamp=NOW)
    with pytest.raises(InvalidRecordError) as e:
        append(log, control)
    assert e.value.error_code == 87
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    append(log, make_batch(1, ts=NOW + 999))
    # bytes input is copied, not mutated
    data = make_batch(2)
    log.append_as_leader(data, validate_batches(data), 0, NOW)
    assert read_header(data).base_offset == 0 and log.log_end_offset == 3


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1500, index_interval_bytes=100))
    assert log.fetch_offset_by_timestamp(-3) is None
    for i in range(30):
        append(log, make_batch(2, ts=NOW + i * 10, value_size=50))
    append(log, make_batch(1, ts=NOW + 5))  # out of order timestamp
    assert log.number_of_segments > 2
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (61, -1)
    assert log.fetch_offset_by_timestamp(-3) == (58, NOW + 290)
    assert log.fetch_offset_by_timestamp(0) == (0, NOW)
    assert log.fetch_offset_by_timestamp(NOW + 95) == (20, NOW + 100)
    assert log.fetch_offset_by_timestamp(NOW + 100) == (20, NOW + 100)
    assert log.fetch_offset_by_timestamp(NOW + 291) is None
    # still right after a clean reopen (indexes loaded lazily from disk)
    log2 = reopen(log, clean=True)
    assert log2.fetch_offset_by_timestamp(NOW + 155) == (32, NOW + 160)
    assert log2.fetch_offset_by_timestamp(-3) == (58, NOW + 290)


def test_clean_reopen_continues_offsets(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=2000, index_interval_bytes=300))
    for _ in range(20):
        append(log, make_batch(3, value_size=100))
    segs = log.number_of_segments
    log2 = reopen(log, clean=True)
    assert log2.log_end_offset == 60 and log2.number_of_segments == segs
    assert not any(s.indexes_loaded for s in log2.segments[:-1])
    assert append(log2, make_batch(2)).first_offset == 60
    log2.update_high_watermark(62)
    assert read_batches(log2, 0)[-2:] == [(57, 3), (60, 2)]


def test_unclean_reopen_recovers_torn_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.log")
    log = new_log(tmp_path, LogConfig(segment_bytes=3000, index_interval_bytes=200))
    for i in range(25):
        append(log, make_batch(2, value_size=100, ts=NOW + i))
    active = log.active_segment
    b = len(make_batch(2, value_size=100))
    os.truncate(active.log.path, active.size - b // 2)  # tear the last batch
    log2 = reopen(log, clean=False)
    assert log2.log_end_offset == 48
    assert "Recovered partition t-0" in caplog.text and f"{b - b // 2} bytes truncated" in caplog.text
    assert append(log2, make_batch(1, ts=NOW + 100)).first_offset == 48
    log2.update_high_watermark(49)
    got = read_batches(log2, 0)
    assert got[-1] == (48, 1) and len(got) == 25
    assert log2.fetch_offset_by_timestamp(NOW + 23) == (46 - 0, NOW + 23)
    assert log2.fetch_offset_by_timestamp(NOW + 50) == (48, NOW + 100)


def test_unclean_reopen_garbage_tail(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(index_interval_bytes=100))
    for i in range(10):
        append(log, make_batch(2, value_size=50, ts=NOW + i))
    path = log.active_segment.log.path
    b = len(make_batch(2, value_size=50))
    with open(path, "r+b") as f:
        f.seek(7 * b + 20)
        f.write(os.urandom(3 * b))
    log2 = reopen(log, clean=False)
    assert log2.log_end_offset == 14
    assert log2.active_segment.size == 7 * b
    log2.update_high_watermark(14)
    assert read_batches(log2, 0) == [(i, 2) for i in range(0, 14, 2)]
    assert log2.fetch_offset_by_timestamp(NOW + 6) == (12, NOW + 6)
    assert log2.fetch_offset_by_timestamp(NOW + 7) is None
    seg = log2.active_segment
    for i in range(seg.offset_index.entries):
        off, pos = seg.offset_index.entry(i)
        assert seg.log.read_header(pos).last_offset == off  # type: ignore[union-attr]


def test_unclean_reopen_truncation_drops_later_segments(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000))
    for _ in range(9):
        append(log, make_batch(1, value_size=300))
    assert log.number_of_segments >= 3
    first = log.segments[0]
    with open(first.log.path, "r+b") as f:
        f.seek(first.size - 10)
        f.write(b"XXXXXXXXXX")
    log2 = reopen(log, clean=False)
    assert log2.number_of_segments == 1
    assert log2.log_end_offset == 1


def test_retention_by_time(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, retention_ms=10_000, file_delete_delay_ms=5_000)
    log = new_log(tmp_path, cfg)
    for i in range(6):
        append(log, make_batch(1, value_size=300, ts=NOW + i * 1000))
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 2, 4]
    assert log.delete_old_segments(NOW + 10_500) == 0
    assert log.delete_old_segments(NOW + 11_001) == 1  # max ts of [0, 2) is NOW+1000
    assert log.log_start_offset == 2
    assert (log.dir / "00000000000000000000.log.deleted").exists()
    assert not (log.dir / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100, 6, False)
    # everything expired: the active segment is rolled first, then deleted
    assert log.delete_old_segments(NOW + 100_000) == 2
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == 6 == log.log_end_offset
    assert log.pending_deletes == 2  # the first one's delay had passed already
    assert log.process_pending_deletes(NOW + 100_000 + 4_999) == 0
    assert log.process_pending_deletes(NOW + 100_000 + 5_000) == 2
    assert not list(log.dir.glob("*.deleted"))
    assert append(log, make_batch(1)).first_offset == 6


def test_retention_respects_high_watermark(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000, retention_ms=1))
    for _ in range(6):
        data = bytearray(make_batch(1, value_size=300, ts=NOW))
        log.append_as_leader(data, validate_batches(data), 0, NOW)
    assert log.high_watermark == 0
    assert log.delete_old_segments(NOW + 10) == 0
    log.update_high_watermark(3)
    assert log.delete_old_segments(NOW + 10) == 1


def test_retention_by_size(tmp_path: Path) -> None:
    b = make_batch(1, value_size=300)
    cfg = LogConfig(segment_bytes=1000, retention_bytes=3 * len(b), retention_ms=-1)
    log = new_log(tmp_path, cfg)
    for _ in range(8):
        append(log, b)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    # 8 batches, keep >= 3: total - seg >= retention: drop [0,2), [2,4); [4,6) would leave 2 < 3
    assert log.delete_old_segments(NOW) == 2
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert log.log_start_offset == 4
    # compact-only topics keep everything
    log.update_config(cfg.replace(cleanup_policy="compact", retention_bytes=0))
    assert log.delete_old_segments(NOW) == 0


def test_delete_records_before(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000))
    for _ in range(8):
        append(log, make_batch(1, value_size=300))
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert log.delete_records_before(3, NOW) == 3
    assert [s.base_offset for s in log.segments] == [2, 4, 6]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100, 8, False)
    assert read_header(region_bytes(log.read(3, 1000, 8, False))).base_offset == 3
    assert log.fetch_offset_by_timestamp(-2) == (3, -1)
    log.update_high_watermark(5)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(6, NOW)
    assert log.delete_records_before(-1, NOW) == 5
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert log.delete_records_before(2, NOW) == 5  # never backwards
    log2 = reopen(log, clean=True)
    assert log2.log_start_offset == 5


def test_region_stays_readable_until_delayed_delete(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000, retention_ms=1, file_delete_delay_ms=60_000))
    for _ in range(4):
        append(log, make_batch(1, value_size=300, ts=NOW))
    data = log.read(0, 1 << 20, log.high_watermark, False)
    expected = region_bytes(data)
    assert log.delete_old_segments(NOW + 10) >= 1
    assert region_bytes(data) == expected  # same descriptor, renamed file
    log.process_pending_deletes(NOW + 10 + 60_000)
    with pytest.raises(ValueError, match="closed"):
        region_bytes(data)


def test_truncate_to(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1000))
    for _ in range(8):
        append(log, make_batch(1, value_size=300))
    assert log.truncate_to(3, NOW)
    assert log.log_end_offset == 3 and log.high_watermark == 3
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert append(log, make_batch(1, value_size=300)).first_offset == 3
    assert read_batches(log, 0) == [(i, 1) for i in range(4)]
    assert not log.truncate_to(10, NOW)
    log.truncate_fully_and_start_at(100, NOW)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert append(log, make_batch(1)).first_offset == 100


def test_flush_messages_advances_recovery_point(tmp_path: Path) -> None:
    log = new_log(tmp_path, LogConfig(flush_messages=3))
    append(log, make_batch(2))
    assert log.recovery_point == 0
    append(log, make_batch(2))
    assert log.recovery_point == 4
    log2 = new_log(tmp_path, LogConfig(segment_bytes=1000), topic="r")
    for _ in range(3):
        append(log2, make_batch(1, value_size=300))
    assert log2.recovery_point == 0
    assert log2.flush_rolled_segments()
    assert log2.recovery_point == log2.active_segment.base_offset == 2
    assert log2.maybe_flush(NOW) is False


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, make_batch(1))
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_create_opens_existing_dir(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, make_batch(2))
    log.close()
    log2 = Log.create(tmp_path, "t", 0, LogConfig())
    assert log2.log_end_offset == 2


def test_fetch_offset_by_timestamp_is_record_exact(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    recs = [(None, b"v%d" % i) for i in range(5)]
    append(log, build_batch(recs, timestamps=[NOW + 10 * i for i in range(5)]))  # offsets 0-4
    append(log, build_batch(recs, timestamps=[NOW + 100 + 10 * i for i in range(5)], compression=1))  # 5-9
    append(log, build_batch(recs[:3], timestamps=[NOW + 500, NOW + 990, NOW + 300]))  # 10-12
    assert log.fetch_offset_by_timestamp(NOW + 10) == (1, NOW + 10)
    assert log.fetch_offset_by_timestamp(NOW + 11) == (2, NOW + 20)
    assert log.fetch_offset_by_timestamp(NOW + 41) == (5, NOW + 100)
    assert log.fetch_offset_by_timestamp(NOW + 125) == (8, NOW + 130)
    assert log.fetch_offset_by_timestamp(NOW + 600) == (11, NOW + 990)
    assert log.fetch_offset_by_timestamp(-3) == (11, NOW + 990)
    log.update_high_watermark(13)
    log.delete_records_before(3, NOW)
    assert log.fetch_offset_by_timestamp(NOW) == (3, NOW + 30)


def test_a_log_never_written_has_no_index_files_and_reopens_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = new_log(tmp_path)
    assert sorted(p.suffix for p in log.dir.iterdir()) == []  # the segment files are made on first use
    with caplog.at_level("WARNING", logger="odradek.log"):
        again = reopen(log, clean=True)
    assert ".log" not in [p.suffix for p in again.dir.iterdir()]  # nor by a restart
    assert not [r for r in caplog.records if "inconsistent" in r.getMessage() or "Rebuilding" in r.getMessage()]
    append(again, make_batch(3))
    assert again.log_end_offset == 3 and again.read(0, 1 << 20, 3, True).size > 0


def test_parse_dir_name_refuses_what_is_not_a_legal_topic_and_an_ascii_partition() -> None:
    for name in ["evil\n-0", "t-0\n", "-3", "bad name-0", "t-\u0663", "t-99999999999", "a" * 250 + "-0"]:
        assert parse_dir_name(name) is None, name
    assert parse_dir_name("a" * 249 + "-2147483647") == ("a" * 249, 2147483647)
