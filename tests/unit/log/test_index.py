from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.log.errors import CorruptIndexError
from odradek.log.offset_index import OffsetIndex
from odradek.log.time_index import TimeIndex


def test_offset_index_capacity_rounded_down_and_no_preallocation(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 100, 1003)
    assert os.path.getsize(idx.path) == 0  # the active index is kept in memory, not preallocated
    assert idx.max_entries == 125
    assert idx.entries == 0
    assert idx.lookup(150) == (100, 0)
    assert idx.last_offset == 100


def test_offset_index_append_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 1000, 800)
    for i in range(1, 51):
        idx.append(1000 + i * 10, i * 4096)
    assert idx.entries == 50
    assert idx.lookup(999) == (1000, 0)
    assert idx.lookup(1000) == (1000, 0)
    assert idx.lookup(1009) == (1000, 0)
    assert idx.lookup(1010) == (1010, 4096)
    assert idx.lookup(1015) == (1010, 4096)
    assert idx.lookup(1250) == (1250, 25 * 4096)
    assert idx.lookup(10**9) == (1500, 50 * 4096)
    assert idx.last_entry() == (1500, 50 * 4096)
    assert idx.entry(0) == (1010, 4096)
    with pytest.raises(CorruptIndexError):
        idx.append(1500, 10**6)  # not increasing
    with pytest.raises(CorruptIndexError):
        idx.append(1000 + 2**31, 10**6)  # relative offset overflow


def test_offset_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 8 * 4)
    for i in range(4):
        assert not idx.is_full()
        idx.append(i + 1, (i + 1) * 100)
    assert idx.is_full()
    with pytest.raises(CorruptIndexError):
        idx.append(10, 1000)


def test_offset_index_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, 800)
    for i in range(1, 11):
        idx.append(i * 10, i * 100)
    idx.truncate_to(55)  # removes entries >= 55
    assert idx.entries == 5
    assert idx.last_entry() == (50, 500)
    idx.truncate_to(50)
    assert idx.entries == 4
    idx.truncate_to(5)
    assert idx.entries == 0
    assert idx.lookup(1000) == (0, 0)
    idx.append(7, 70)
    assert idx.lookup(8) == (7, 70)


def test_offset_index_trim_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000042.index"
    idx = OffsetIndex(path, 42, 10 * 1024 * 1024)
    for i in range(1, 6):
        idx.append(42 + i, i * 1000)
    idx.close()
    assert os.path.getsize(path) == 40
    ro = OffsetIndex(path, 42, 10 * 1024 * 1024, writable=False)
    ro.sanity_check()
    assert ro.entries == 5
    assert ro.lookup(45) == (45, 3000)
    assert os.path.getsize(path) == 40
    ro.make_writable()  # becomes active again: entries kept, in memory
    assert os.path.getsize(path) == 40 and ro.max_entries == 10 * 1024 * 1024 // 8
    assert ro.entries == 5
    ro.append(100, 9000)
    ro.trim()
    assert os.path.getsize(path) == 48
    assert not ro.writable
    assert ro.lookup(1000) == (100, 9000)
    ro.truncate_to(100)  # a trimmed index shrinks with its entries
    assert os.path.getsize(path) == 40
    ro.close()


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1024)
    # untrimmed, zero-filled tail (as after a crash)
    idx = OffsetIndex(path.with_name("y.index"), 0, 64)
    idx.append(5, 100)
    idx.flush()
    with open(idx.path, "ab") as f:
        f.write(bytes(56))  # as an index preallocated by an older version and never trimmed
    reopened = OffsetIndex(idx.path, 0, 64)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()


def test_time_index(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 100, 12 * 10)
    assert idx.max_entries == 10
    assert idx.lookup(5) == (-1, 100)
    assert idx.maybe_append(1000, 105)
    assert not idx.maybe_append(1000, 110)  # timestamp did not grow
    assert not idx.maybe_append(999, 111)
    assert idx.maybe_append(2000, 120)
    assert idx.maybe_append(3000, 130)
    assert idx.entries == 3
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1000) == (1000, 105)
    assert idx.lookup(2500) == (2000, 120)
    assert idx.lookup(10**15) == (3000, 130)
    assert idx.last_entry() == (3000, 130)
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(4000, 129)  # offset went back
    idx.truncate_to(120)
    assert idx.entries == 1
    assert idx.last_entry() == (1000, 105)
    idx.close()
    assert os.path.getsize(idx.path) == 12
    ro = TimeIndex(idx.path, 100, 120, writable=False)
    ro.sanity_check()
    assert ro.lookup(1500) == (1000, 105)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 0, 12 * 3)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full()
    assert idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3


def test_time_index_sanity_check(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", 0, 12 * 4)
    idx.maybe_append(1000, 1)
    idx.flush()
    with open(idx.path, "ab") as f:
        f.write(bytes(36))  # as an index preallocated by an older version and never trimmed
    # reopened without trimming: 4 entries, the last ones zero -> timestamps go back
    with pytest.raises(CorruptIndexError):
        TimeIndex(idx.path, 0, 12 * 4).sanity_check()


def _open_files_under(folder: Path) -> list[str]:
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(str(folder)):
            held.append(target)
    return held


def test_active_index_is_written_on_flush_and_holds_no_descriptor(tmp_path: Path) -> None:
    idxs = [OffsetIndex(tmp_path / f"{i}.index", 0, 1 << 20) for i in range(50)]
    for idx in idxs:
        idx.append(7, 4096)
    # Which files this process holds open, not how many descriptors it has: other
    # tests' threads and the garbage collector open and close descriptors meanwhile.
    assert _open_files_under(tmp_path) == []
    assert os.path.getsize(idxs[0].path) == 0  # not written before a flush
    idxs[0].flush()
    assert os.path.getsize(idxs[0].path) == 8
    idxs[0].append(9, 8192)
    idxs[0].truncate_to(9)
    idxs[0].append(10, 9000)
    idxs[0].flush()
    assert OffsetIndex(idxs[0].path, 0, 64, writable=False).last_entry() == (10, 9000)
    idxs[0].truncate_to(8)
    idxs[0].close()
    assert os.path.getsize(idxs[0].path) == 8
    for idx in idxs[1:]:
        idx.close_handler()  # a crash: nothing written
        assert os.path.getsize(idx.path) == 0
