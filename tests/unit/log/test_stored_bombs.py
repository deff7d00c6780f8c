"""Batches already in a log that inflate past any sane size (written by an older broker, or planted):
the read paths that inflate stored batches (ListOffsets by timestamp, the cleaner) stop at their bound
and report the batch instead of inflating it whole."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import crc32c
import pytest

from odradek.log.cleaner import LogCleaner
from odradek.protocol.errors import MESSAGE_TOO_LARGE
from odradek.protocol.records import (
    COMPRESSION_ZSTD,
    READ_INFLATE_LIMIT,
    InvalidRecordError,
    build_batch,
    read_inflate_limit,
    validate_batches,
)

from .log_helpers import NOW, append, new_log
from .test_cleaner import COMPACT


def zstd_bomb_batch(base_offset: int, inflated: int = 4 * READ_INFLATE_LIMIT) -> bytes:
    frame = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([7 << 3]))
    blocks = inflated // (128 * 1024)
    for i in range(blocks):
        frame += (((128 * 1024) << 3) | 2 | (i == blocks - 1)).to_bytes(3, "little") + b"\x00"
    after = struct.pack(">hiqqqhii", COMPRESSION_ZSTD, 1, NOW, NOW + 5, -1, -1, -1, 2) + bytes(frame)
    return struct.pack(">qiibI", base_offset, len(after) + 9, 0, 2, crc32c.crc32c(after)) + after


def plant(log, batch: bytes) -> None:  # type: ignore[no-untyped-def]
    """Append as a follower does: no validation (the leader's word is taken)."""
    log.append_as_follower(batch, validate_batches(batch, check_records=False), NOW)
    log.update_high_watermark(log.log_end_offset)


def test_read_limit_floor() -> None:
    assert read_inflate_limit(1000) == READ_INFLATE_LIMIT
    assert read_inflate_limit(READ_INFLATE_LIMIT * 2) == READ_INFLATE_LIMIT * 2


def test_list_offsets_by_timestamp_refuses_a_stored_bomb(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, build_batch([(b"k", b"v")], timestamp=NOW - 10))
    plant(log, zstd_bomb_batch(1))
    assert log.fetch_offset_by_timestamp(NOW - 10) == (0, NOW - 10)  # before the bomb: found
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError) as e:
            log.fetch_offset_by_timestamp(NOW + 1)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.error_code == MESSAGE_TOO_LARGE
    assert peak < READ_INFLATE_LIMIT * 2.5, peak  # at most the bound (plus its chunks), never 256 MiB


def test_the_cleaner_fails_the_clean_not_the_process(tmp_path: Path) -> None:
    log = new_log(tmp_path, COMPACT.replace(segment_bytes=1 << 20))
    append(log, build_batch([(b"a", b"1")], timestamp=NOW))
    plant(log, zstd_bomb_batch(1))
    append(log, build_batch([(b"a", b"2")], timestamp=NOW))
    log.roll(NOW)
    append(log, build_batch([(b"b", b"3")], timestamp=NOW))
    segments = list(log.segments)
    assert LogCleaner().clean_now([log], NOW) is None  # the clean failed: nothing installed, retried later
    assert list(log.segments) == segments
    assert [(h.base_offset, h.record_count) for h in log._headers_from(0)] == [(0, 1), (1, 2), (3, 1), (4, 1)]
    assert not list(tmp_path.rglob("*.cleaned")) and not list(tmp_path.rglob("*.swap"))


def test_group_replay_skips_a_stored_bomb(tmp_path: Path) -> None:
    """Loading groups from __consumer_offsets: the records around a bomb are replayed, the bomb skipped."""
    from types import SimpleNamespace

    from odradek.coordinator.runtime import GroupCoordinatorRuntime

    log = new_log(tmp_path, COMPACT.replace(segment_bytes=1 << 20), topic="__consumer_offsets")
    append(log, build_batch([(b"k1", b"v1")], timestamp=NOW))
    plant(log, zstd_bomb_batch(1))
    append(log, build_batch([(b"k2", b"v2")], timestamp=NOW))
    seen: list[tuple[bytes | None, bytes | None]] = []
    fake = SimpleNamespace(coordinator=SimpleNamespace(replay=lambda k, v: seen.append((k, v))))
    assert GroupCoordinatorRuntime._replay(fake, log) == 2  # type: ignore[arg-type]
    assert seen == [(b"k1", b"v1"), (b"k2", b"v2")]
