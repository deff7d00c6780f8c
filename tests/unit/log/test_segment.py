from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.log import LogConfig, LogSegment
from odradek.protocol.records import BatchHeader, iter_batches, read_header, set_base_offset, validate_batches

from .log_helpers import NOW, make_batch, region_bytes


def _batches(base: int, count: int, *, records: int = 3, value_size: int = 100, ts0: int = NOW) -> tuple[bytearray, list[BatchHeader]]:
    data = bytearray()
    off = base
    for i in range(count):
        b = bytearray(make_batch(records, value_size=value_size, ts=ts0 + i))
        set_base_offset(b, 0, off)
        data += b
        off += records
    return data, validate_batches(data)


def _segment(tmp_path: Path, base: int = 0, **cfg: int) -> LogSegment:
    return LogSegment.create(tmp_path, base, LogConfig(**cfg), NOW)  # type: ignore[arg-type]


def test_append_and_read_regions(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 100, index_interval_bytes=1000)
    data, headers = _batches(100, 50)
    seg.append(data, headers)
    assert seg.size == len(data)
    assert (tmp_path / "00000000000000000100.log").stat().st_size == len(data)
    # an index entry every > 1000 bytes
    size = headers[0].size
    expected, since = 0, 0
    for h in headers:  # Kafka's rule, simulated
        if since > 1000:
            expected, since = expected + 1, 0
        since += h.size
    assert seg.offset_index.entries == expected > 0
    for i in range(seg.offset_index.entries):
        off, pos = seg.offset_index.entry(i)
        h = read_header(data, pos)
        assert h.last_offset == off
    # read from every offset: region starts at the batch that contains it
    for off in range(100, 250, 7):
        fd = seg.read(off, 10**9)
        assert fd is not None
        got = region_bytes(fd)
        first = next(iter_batches(got))[1]
        assert first.base_offset <= off <= first.last_offset
        assert got == bytes(data[fd.position :])
    assert seg.read(250, 1000) is None  # beyond the segment
    # capped at max_size on a batch boundary, min_one_message returns a whole first batch
    fd = seg.read(100, size + 10)
    assert fd is not None and fd.size == size
    fd = seg.read(100, 7 * size - 1)
    assert fd is not None and fd.size == 6 * size
    fd = seg.read(100, 5, min_one_message=True)
    assert fd is not None and fd.size == size
    fd = seg.read(100, 5, min_one_message=False)
    assert fd is not None and fd.size == 0
    # max_position bounds the region
    fd = seg.read(100, 10**9, max_position=3 * size)
    assert fd is not None and fd.size == 3 * size
    seg.close()


def test_translate_and_timestamp_lookup(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0, index_interval_bytes=0)
    data, headers = _batches(0, 20, records=2)
    seg.append(data, headers)
    assert seg.max_timestamp == NOW + 19
    assert seg.offset_of_max_timestamp == 39
    pos, h = seg.translate_offset(7)  # type: ignore[misc]
    assert h.base_offset == 6 and pos == 3 * headers[0].size
    assert seg.find_offset_by_timestamp(NOW - 100) == (0, NOW)
    assert seg.find_offset_by_timestamp(NOW + 5) == (10, NOW + 5)
    assert seg.find_offset_by_timestamp(NOW + 5, starting_offset=11) == (11, NOW + 5)
    assert seg.find_offset_by_timestamp(NOW + 20) is None
    assert seg.time_index.entries > 5


def test_recover_torn_tail(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0, index_interval_bytes=500)
    data, headers = _batches(0, 30)
    seg.append(data, headers)
    seg.close()
    path = tmp_path / "00000000000000000000.log"
    cut = len(data) - headers[-1].size // 2
    os.truncate(path, cut)
    seg2 = LogSegment.open(tmp_path, 0, LogConfig(index_interval_bytes=500), cut, active=True, time_ms=NOW)
    truncated = seg2.recover()
    assert truncated == cut - (len(data) - headers[-1].size)
    assert seg2.size == len(data) - headers[-1].size
    assert seg2.read_next_offset() == headers[-1].base_offset
    assert seg2.max_timestamp == NOW + 28
    for i in range(seg2.offset_index.entries):
        off, pos = seg2.offset_index.entry(i)
        assert read_header(data, pos).last_offset == off


def test_recover_reuses_a_crashed_full_size_index(tmp_path: Path) -> None:
    """After a crash the active segment's indexes hold what the last flush wrote, entries
    past the recovered data: recovery keeps the files (same inode), forgets those entries, and a
    clean close trims to the rebuilt ones."""
    cfg = LogConfig(index_interval_bytes=0)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW)
    data, headers = _batches(0, 40)
    seg.append(data, headers)
    assert seg.offset_index.entries == 39
    seg.offset_index.flush()  # written by a flush before the crash
    seg.time_index.flush()
    inode = os.stat(seg.offset_index_path).st_ino
    assert os.path.getsize(seg.offset_index_path) == 39 * 8
    keep = sum(h.size for h in headers[:25])
    os.truncate(tmp_path / "00000000000000000000.log", keep + 10)  # a torn 26th batch
    seg2 = LogSegment.open(tmp_path, 0, cfg, keep + 10, active=True, time_ms=NOW)
    assert seg2.recover() == 10
    assert os.stat(seg2.offset_index_path).st_ino == inode
    assert seg2.offset_index.entries == 24 and seg2.time_index.entries == 24
    assert seg2.read_next_offset() == 75
    assert seg2.offset_index.lookup(10**6)[0] == headers[24].last_offset == 74  # no stale entry beyond
    assert seg2.find_offset_by_timestamp(NOW + 30) is None  # nor in the time index
    more, hs = _batches(75, 3, ts0=NOW + 100)
    seg2.append(more, hs)
    seg2.close()
    assert os.path.getsize(seg2.offset_index_path) == 27 * 8
    seg3 = LogSegment.open(tmp_path, 0, cfg, keep + len(more), active=True, time_ms=NOW)
    assert seg3.read_next_offset() == 84
    assert seg3.offset_index.entry(26) == (83, keep + hs[0].size + hs[1].size)


def test_recover_garbage_tail(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0)
    data, headers = _batches(0, 10)
    seg.append(data, headers)
    seg.flush()
    path = tmp_path / "00000000000000000000.log"
    # overwrite the middle of batch 7 with garbage: CRC fails there
    pos7 = sum(h.size for h in headers[:7])
    with open(path, "r+b") as f:
        f.seek(pos7 + 70)
        f.write(b"\xde\xad\xbe\xef" * 8)
        f.seek(0, 2)
        f.write(b"garbage" * 50)
    seg2 = LogSegment.open(tmp_path, 0, LogConfig(), os.path.getsize(path), active=True, time_ms=NOW)
    assert seg2.recover() == len(data) - pos7 + 350
    assert seg2.size == pos7
    assert seg2.read_next_offset() == 21


def test_lazy_indexes_and_clean_reopen(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=200)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW)
    data, headers = _batches(0, 10)
    seg.append(data, headers)
    seg.close()
    assert os.path.getsize(seg.offset_index_path) % 8 == 0
    assert os.path.getsize(seg.offset_index_path) < 1024  # trimmed
    seg2 = LogSegment.open(tmp_path, 0, cfg, len(data), active=False, time_ms=NOW)
    assert not seg2.indexes_loaded
    assert seg2.read_next_offset() == 30
    assert not seg2.indexes_loaded  # peeked without mapping
    assert seg2.max_timestamp == NOW + 9  # from the final time index entry
    assert seg2.indexes_loaded


def test_new_segment_index_files_made_when_written_out(tmp_path: Path) -> None:
    """A new partition's first segment makes its index files on flush, roll or close, not on its first
    append; a rolled segment makes them on first use."""
    cfg = LogConfig(index_interval_bytes=200)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW, lazy=True)
    data, headers = _batches(0, 10)
    seg.append(data, headers)
    assert seg.offset_index.entries > 0
    assert not seg.offset_index_path.exists() and not seg.time_index_path.exists()
    seg.flush()
    assert os.path.getsize(seg.offset_index_path) == seg.offset_index.entries * 8
    assert os.path.getsize(seg.time_index_path) == seg.time_index.entries * 12
    # a segment with too little data for an entry still gets both (empty) files when closed
    (tmp_path / "p2").mkdir()
    seg2 = LogSegment.create(tmp_path / "p2", 30, cfg, NOW, lazy=True)
    small, small_headers = _batches(30, 1)
    seg2.append(small, small_headers)
    assert seg2.offset_index.entries == 0
    seg2.close()
    assert os.path.getsize(seg2.offset_index_path) == 0
    assert os.path.getsize(seg2.time_index_path) % 12 == 0  # closing adds the max timestamp entry
    seg3 = LogSegment.open(tmp_path / "p2", 30, cfg, len(small), active=False, time_ms=NOW)
    assert seg3.read_next_offset() == 33
    rolled = LogSegment.create(tmp_path, 40, cfg, NOW)  # not lazy: a roll
    more, more_headers = _batches(40, 1)
    rolled.append(more, more_headers)
    assert rolled.offset_index_path.exists() and rolled.time_index_path.exists()


def test_recovery_of_a_never_flushed_segment_makes_its_index_files_on_flush(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=200)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW, lazy=True)
    data, headers = _batches(0, 10)
    seg.append(data, headers)
    entries = seg.offset_index.entries
    seg.close_handlers()  # a kill -9: nothing written out, no index file was ever made
    assert not seg.offset_index_path.exists()
    seg2 = LogSegment.open(tmp_path, 0, cfg, len(data), active=True, time_ms=NOW, indexes_present=False)
    assert seg2.recover() == 0
    assert seg2.offset_index.entries == entries and seg2.read_next_offset() == 30
    assert not seg2.offset_index_path.exists()  # made at the next flush, not by the recovery
    seg2.flush()
    assert os.path.getsize(seg2.offset_index_path) == entries * 8
    # a stale file the listing missed is cut to the recovered entries when written out
    seg2.close()
    with open(seg2.time_index_path, "ab") as f:
        f.write(bytes(12 * 5))
    seg3 = LogSegment.open(tmp_path, 0, cfg, len(data), active=True, time_ms=NOW, indexes_present=False)
    seg3.recover()
    n = seg3.time_index.entries
    seg3.close()
    assert os.path.getsize(seg3.time_index_path) == n * 12  # the 5 stale entries cut
    seg4 = LogSegment.open(tmp_path, 0, cfg, len(data), active=False, time_ms=NOW)
    assert seg4.find_offset_by_timestamp(NOW + 4) == (12, NOW + 4)
    assert seg4.offset_index.entries == entries


def test_missing_index_rebuilt_lazily(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=200)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW)
    data, headers = _batches(0, 10)
    seg.append(data, headers)
    entries = seg.offset_index.entries
    seg.close()
    os.unlink(seg.offset_index_path)
    seg2 = LogSegment.open(tmp_path, 0, cfg, len(data), active=False, time_ms=NOW, indexes_present=False)
    assert seg2.offset_index.entries == entries
    assert seg2.find_offset_by_timestamp(NOW + 4) == (12, NOW + 4)


def test_truncate_to(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0, index_interval_bytes=0)
    data, headers = _batches(0, 10, records=2)
    seg.append(data, headers)
    removed = seg.truncate_to(7, NOW)  # batch [6, 7] goes too
    assert removed == sum(h.size for h in headers[3:])
    assert seg.read_next_offset() == 6
    assert seg.offset_index.last_offset < 6
    assert seg.max_timestamp == NOW + 2
    more, mh = _batches(6, 2, records=2, ts0=NOW + 100)
    seg.append(more, mh)
    assert seg.read_next_offset() == 10
    assert seg.max_timestamp == NOW + 101


def test_should_roll(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, segment_ms=1000)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW)
    assert not seg.should_roll(900, NOW, 0, NOW)
    data, headers = _batches(0, 1)
    seg.append(data, headers)
    assert seg.should_roll(1000 - seg.size + 1, NOW, 10, NOW)
    assert not seg.should_roll(10, NOW + 1000, 10, NOW)
    assert seg.should_roll(10, NOW + 1001, 10, NOW)  # message timestamps drive segment.ms
    assert seg.should_roll(10, NOW, 2**31, NOW)  # relative offset overflow


def test_preallocate_trimmed_on_close(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1 << 20, preallocate=True)
    seg = LogSegment.create(tmp_path, 0, cfg, NOW)
    data, headers = _batches(0, 3)
    seg.append(data, headers)
    assert os.path.getsize(seg.log.path) == 1 << 20
    assert seg.size == len(data)
    seg.close()
    assert os.path.getsize(seg.log.path) == len(data)


def _index_state(seg: LogSegment) -> tuple[object, ...]:
    oi, ti = seg.offset_index, seg.time_index
    return (
        seg.size, seg.read_next_offset(), seg.max_timestamp, seg.offset_of_max_timestamp,
        seg._bytes_since_last_index_entry,
        [oi.entry(i) for i in range(oi.entries)], [ti.entry(i) for i in range(ti.entries)],
    )


def _crashed_copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _crashed_segment(tmp_path: Path, *, active: bool) -> tuple[Path, LogConfig, int, int, list[BatchHeader]]:
    """A segment of 60 batches whose timestamps go up and down, flushed after batch 35 (the recovery
    point), then 25 more batches appended and the last one torn, with no close."""
    cfg = LogConfig(index_interval_bytes=700)
    d = tmp_path / "live"
    d.mkdir()
    seg = LogSegment.create(d, 0, cfg, NOW)
    ts = [NOW + (i * 37) % 23 for i in range(60)]  # the largest timestamp is met again and again
    data = bytearray()
    headers: list[BatchHeader] = []
    for i in range(60):
        b, hs = _batches(3 * i, 1, ts0=ts[i])
        seg.append(b, hs)
        data += b
        headers += hs
        if i == 35:
            seg.flush()
    if not active:
        seg.on_become_inactive()  # rolled; its index written out in full but not synced: no matter
    recovery_point = headers[35].last_offset + 1
    size = len(data) - headers[-1].size // 2
    os.truncate(seg.log.path, size)
    return d, cfg, recovery_point, size, headers


@pytest.mark.parametrize("active", [True, False])
def test_recover_from_the_recovery_point_equals_a_whole_check(tmp_path: Path, active: bool) -> None:
    d, cfg, rp, size, headers = _crashed_segment(tmp_path, active=active)
    whole = LogSegment.open(_crashed_copy(d, tmp_path / "whole"), 0, cfg, size, active=active, time_ms=NOW)
    part = LogSegment.open(_crashed_copy(d, tmp_path / "part"), 0, cfg, size, active=active, time_ms=NOW)
    assert whole.recover() == part.recover(rp) == size - (sum(h.size for h in headers) - headers[-1].size)
    assert whole.recovered_from == whole.checked_from == 0
    assert 0 < part.checked_from < rp  # from the batch of the last index entry below the point
    assert part.recovered_from == rp  # the transaction index below it is kept
    assert _index_state(part) == _index_state(whole)
    assert part.read_next_offset() == headers[-1].base_offset
    # appends after the recovery go on as after a whole check, and survive a clean reopen
    for seg in (whole, part):
        if not seg.is_active:
            seg.make_active()
        more, hs = _batches(headers[-1].base_offset, 6, ts0=NOW + 50)
        seg.append(more, hs)
    assert _index_state(part) == _index_state(whole)
    part.close()
    again = LogSegment.open(tmp_path / "part", 0, cfg, part.size, active=True, time_ms=NOW)
    skip = 4  # bytes since the last index entry: 0 after any open, as in Kafka
    assert [v for i, v in enumerate(_index_state(again)) if i != skip] == \
        [v for i, v in enumerate(_index_state(whole)) if i != skip]


def test_recover_from_the_recovery_point_does_not_read_below_it(tmp_path: Path) -> None:
    """A byte flipped in a batch below the recovery point: not checked (it was flushed), where a whole
    check truncates there; the batches past the point are checked."""
    d, cfg, rp, size, headers = _crashed_segment(tmp_path, active=True)
    with open(d / "00000000000000000000.log", "r+b") as f:
        f.seek(sum(h.size for h in headers[:5]) + 70)
        f.write(b"\xff")
    whole = LogSegment.open(_crashed_copy(d, tmp_path / "whole"), 0, cfg, size, active=True, time_ms=NOW)
    whole.recover()
    assert whole.read_next_offset() == headers[5].base_offset
    part = LogSegment.open(d, 0, cfg, size, active=True, time_ms=NOW)
    part.recover(rp)
    assert part.read_next_offset() == headers[-1].base_offset


def test_recover_checks_the_whole_segment_when_the_index_disagrees(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    d, cfg, rp, size, headers = _crashed_segment(tmp_path, active=True)
    whole = LogSegment.open(_crashed_copy(d, tmp_path / "whole"), 0, cfg, size, active=True, time_ms=NOW)
    whole.recover()
    index = d / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    raw[-4:] = (int.from_bytes(raw[-4:], "big") + 1).to_bytes(4, "big")  # the last entry points inside a batch
    index.write_bytes(raw)
    part = LogSegment.open(d, 0, cfg, size, active=True, time_ms=NOW)
    part.recover(rp)
    assert part.recovered_from == part.checked_from == 0
    assert "does not match its batch" in caplog.text
    assert _index_state(part) == _index_state(whole)
    # no index file at all (never flushed): the whole segment
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "00000000000000000000.log").write_bytes((d / "00000000000000000000.log").read_bytes())
    bare = LogSegment.open(tmp_path / "none", 0, cfg, size, active=True, time_ms=NOW, indexes_present=False)
    bare.recover(rp)
    assert bare.checked_from == 0 and _index_state(bare) == _index_state(whole)


@pytest.mark.parametrize("interval", [0, 500, 4096, 1 << 20])
def test_translate_offset_finds_every_batch_whatever_the_chunk(tmp_path: Path, interval: int) -> None:
    # batches of varied sizes (one record to many), each offset looked up against a walk of the headers;
    # the header scan reads the file a chunk at a time, so headers straddle chunk boundaries here
    seg = _segment(tmp_path, 0, index_interval_bytes=interval)
    expect: list[tuple[int, int, int]] = []  # (base offset, last offset, position)
    pos, base = 0, 0
    for i in range(60):
        data, headers = _batches(base, 1, records=1 + (i * 7) % 23)
        seg.append(data, headers)
        expect.append((base, headers[0].last_offset, pos))
        pos += len(data)
        base = headers[0].last_offset + 1
    for offset in range(base):
        want = next(e for e in expect if e[1] >= offset)
        found = seg.translate_offset(offset)
        assert found is not None and (found[0], found[1].base_offset) == (want[2], want[0]), offset
        later = seg.translate_offset(offset, starting_position=want[2])
        assert later is not None and later[0] == want[2]
    assert seg.translate_offset(base) is None  # past the last batch
    seg.close()
