from pathlib import Path

import pytest

from odradek.log.config import LogConfig
from odradek.log.errors import LogError
from odradek.log.log import Log
from odradek.protocol.records import build_batch, read_header, validate_batches


def _batch(base: int, n: int, epoch: int, pid: int = -1, seq: int = -1) -> bytes:
    return build_batch([(b"k", b"v%d" % i) for i in range(n)], base_offset=base, partition_leader_epoch=epoch,
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)


def _hdrs(data: bytes) -> list:
    return validate_batches(data)


def test_follower_append_keeps_offsets_epochs_and_producer_state(tmp_path: Path) -> None:
    lg = Log.create(tmp_path, "t", 0, LogConfig(), None)
    data = _batch(0, 3, 1, pid=7, seq=0) + _batch(3, 2, 2, pid=7, seq=3)
    assert lg.append_as_follower(data, _hdrs(data), 1000) == 5
    assert lg.leader_epoch_cache.entries == [(1, 0), (2, 3)]
    entry = lg.producer_entry(7)
    assert entry is not None
    # a re-fetch of what we already have is skipped; the continuation appends
    more = _batch(3, 2, 2, pid=7, seq=3) + _batch(5, 1, 2)
    assert lg.append_as_follower(more, _hdrs(more), 1000) == 6
    got = lg.read(0, 1 << 20, 6, True)
    assert got.size == len(data) + len(_batch(5, 1, 2))
    region = got.regions[0]
    import os

    raw = os.pread(region.file.fileno(), region.length, region.position)
    assert read_header(raw).base_offset == 0


def test_gap_is_refused(tmp_path: Path) -> None:
    lg = Log.create(tmp_path, "t", 0, LogConfig(), None)
    gap = _batch(5, 1, 0)
    with pytest.raises(LogError):
        lg.append_as_follower(gap, _hdrs(gap), 1000)
    assert lg.log_end_offset == 0


def test_truncation_then_divergent_tail_replaced(tmp_path: Path) -> None:
    lg = Log.create(tmp_path, "t", 0, LogConfig(), None)
    data = _batch(0, 2, 1) + _batch(2, 3, 1)
    lg.append_as_follower(data, _hdrs(data), 1000)
    lg.truncate_to(2)  # the new leader's epoch 2 starts at 2
    assert lg.log_end_offset == 2 and lg.leader_epoch_cache.entries == [(1, 0)]
    new = _batch(2, 1, 2)
    assert lg.append_as_follower(new, _hdrs(new), 1000) == 3
    assert lg.leader_epoch_cache.end_offset_for(1, lg.log_end_offset) == (1, 2)


def test_a_batch_going_back_after_one_kept_is_refused(tmp_path: Path) -> None:
    """Batches below the log end are skipped only before the first one kept: a later one going back (a
    leader that lies) is refused, not written unindexed between the kept ones."""
    lg = Log.create(tmp_path, "t", 0, LogConfig(), None)
    first = _batch(0, 2, 1)
    lg.append_as_follower(first, _hdrs(first), 1000)
    lying = _batch(2, 2, 1) + _batch(0, 1, 1) + _batch(4, 1, 1)
    with pytest.raises(LogError):
        lg.append_as_follower(lying, _hdrs(lying), 1000)
    assert lg.log_end_offset == 2 and lg.active_segment.log.size == len(first)
