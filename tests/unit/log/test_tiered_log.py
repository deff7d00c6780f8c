"""A tiered log (remote.storage.enable, KIP-405): local retention deletes only what the remote tier holds,
the local log start offset moves apart from the log start offset (Kafka's UnifiedLog.localLogStartOffset),
reads below the local start are out of the local range, ListOffsets -4 answers the local start, and remote
retention moves the log start offset. Time comes from the test (``now_ms``), never from the clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log import LogConfig
from odradek.log.errors import OffsetOutOfRangeError
from odradek.log.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP

from .log_helpers import NOW, append, make_batch, new_log, reopen

BATCH = make_batch(10, value_size=100)
TIERED = LogConfig(segment_bytes=len(BATCH) * 2, retention_ms=-1, retention_bytes=-1, remote_storage_enable=True,
                   local_retention_bytes=len(BATCH) * 4, file_delete_delay_ms=0)


def _filled(tmp_path: Path, config: LogConfig = TIERED, batches: int = 10) -> object:
    log = new_log(tmp_path, config)
    for i in range(batches):
        append(log, BATCH, now=NOW + i)
    return log


def test_local_retention_waits_for_the_remote_copy(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    assert log.number_of_segments == 5  # 4 closed segments of 20 offsets, the active one
    assert log.delete_old_segments(NOW + 100) == 0  # nothing copied: nothing deleted, whatever the size
    log.highest_offset_in_remote_storage = 19  # the first segment is in the remote tier
    assert log.delete_old_segments(NOW + 100) == 1
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 20)
    log.highest_offset_in_remote_storage = 79  # all closed segments copied: local.retention.bytes keeps 4 batches
    log.delete_old_segments(NOW + 100)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 60)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == (60, -1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 1 << 20, log.high_watermark, True)  # below the local start: the remote tier's
    assert log.read(60, 1 << 20, log.high_watermark, True).size > 0


def test_local_retention_by_time_uses_local_retention_ms(tmp_path: Path) -> None:
    cfg = TIERED.replace(local_retention_bytes=-2, retention_ms=10_000, local_retention_ms=1_000)
    log = _filled(tmp_path, cfg)
    log.highest_offset_in_remote_storage = 39
    assert log.delete_old_segments(NOW + 1_000) == 0  # every record's timestamp is NOW
    assert log.delete_old_segments(NOW + 1_001) == 2  # only the two copied ones, though 4 are that old
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 40)


def test_without_remote_storage_both_starts_move_together(tmp_path: Path) -> None:
    log = _filled(tmp_path, TIERED.replace(remote_storage_enable=False, retention_bytes=len(BATCH) * 4))
    assert log.delete_old_segments(NOW + 100) == 3
    assert log.log_start_offset == log.local_log_start_offset == 60


def test_remote_retention_moves_the_log_start(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    log.highest_offset_in_remote_storage = 79
    log.delete_old_segments(NOW + 100)
    assert log.advance_log_start_offset(20)  # the remote segment 0-19 was deleted
    assert (log.log_start_offset, log.local_log_start_offset) == (20, 60)
    assert not log.advance_log_start_offset(10)
    assert log.advance_log_start_offset(70)  # past the local start: the local one follows
    assert (log.log_start_offset, log.local_log_start_offset) == (70, 70)


def test_the_log_start_survives_a_restart_below_the_first_segment(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    log.highest_offset_in_remote_storage = 79
    log.delete_old_segments(NOW + 100)
    again = reopen(log, clean=True)
    assert (again.log_start_offset, again.local_log_start_offset) == (0, 60)
    plain = reopen(again, clean=True, config=TIERED.replace(remote_storage_enable=False))
    assert plain.log_start_offset == plain.local_log_start_offset == 60  # an untiered log starts locally


def test_remote_log_copy_disable_deletes_locally_by_retention(tmp_path: Path) -> None:
    """KIP-950's remote.log.copy.disable (Kafka's UnifiedLog.remoteLogEnabledAndRemoteCopyEnabled): nothing more
    is copied, so local segments go by retention.* (not local.retention.*) whether copied or not, and the log
    start offset moves with them."""
    cfg = TIERED.replace(remote_log_copy_disable=True, retention_bytes=len(BATCH) * 6)
    log = _filled(tmp_path, cfg)
    log.highest_offset_in_remote_storage = 19
    log.delete_old_segments(NOW + 100)
    assert (log.log_start_offset, log.local_log_start_offset) == (40, 40)
