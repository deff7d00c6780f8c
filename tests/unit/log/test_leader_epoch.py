import os
from pathlib import Path

import pytest

from odradek.log.leader_epoch import EpochEntry, LeaderEpochCache


def test_assign_and_end_offsets(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path)
    assert c.end_offset_for(0, 10) == (-1, -1)
    assert c.assign(0, 0) and c.assign(2, 10) and c.assign(5, 30)
    assert not c.assign(4, 40)  # older than the latest
    assert c.end_offset_for(5, 50) == (5, 50)  # latest epoch: the log end
    assert c.end_offset_for(2, 50) == (2, 30)
    assert c.end_offset_for(3, 50) == (2, 30)  # unknown epoch between: the largest ≤ it
    assert c.end_offset_for(0, 50) == (0, 10)
    assert c.end_offset_for(7, 50) == (5, 50)
    assert c.epoch_for_offset(15) == 2 and c.epoch_for_offset(0) == 0
    c.sync()  # the log's flush
    reloaded = LeaderEpochCache(tmp_path)
    assert reloaded.entries == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 30)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"


def test_truncation(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path)
    for e, o in ((0, 0), (1, 10), (2, 20)):
        c.assign(e, o)
    c.truncate_from_end(15)
    assert c.entries == [EpochEntry(0, 0), EpochEntry(1, 10)]
    c.truncate_from_start(12)
    assert c.entries == [EpochEntry(1, 12)]
    c.truncate_from_start(5)  # before the first epoch: nothing to do
    assert c.entries == [EpochEntry(1, 12)]
    # a new leader epoch starting below existing entries replaces them
    c.assign(3, 11)
    assert c.entries == [EpochEntry(3, 11)]


def test_epochs_lost_with_an_unsynced_checkpoint_come_back_from_recovery(tmp_path: Path) -> None:
    from tests.unit.log.log_helpers import append, make_batch, new_log, reopen

    lg = new_log(tmp_path)
    append(lg, make_batch(2), leader_epoch=1)
    append(lg, make_batch(3), leader_epoch=1)
    append(lg, make_batch(1), leader_epoch=4)
    assert lg.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 5)]
    # a crash lost the checkpoint that assign wrote without fsync (and left an unreadable one)
    (lg.dir / "leader-epoch-checkpoint").write_text("0\n")
    crashed = reopen(lg, clean=False)
    assert crashed.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(4, 5)]
    assert crashed.leader_epoch_cache.end_offset_for(1, crashed.log_end_offset) == (1, 5)


def test_assign_is_written_by_sync(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path)
    c.assign(3, 0)
    assert not (tmp_path / "leader-epoch-checkpoint").exists()
    c.sync()
    assert LeaderEpochCache(tmp_path).entries == [EpochEntry(3, 0)]


def test_what_each_write_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's flush (sync): the file and the directory, as Kafka's CheckpointFile.write; a
    truncation: the file only, at once (Kafka writes it in full on its scheduler, KAFKA-15046)."""
    c = LeaderEpochCache(tmp_path)
    for e, o in ((0, 0), (1, 10), (2, 20)):
        c.assign(e, o)
    real_fsync = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append("dir" if os.path.isdir(f"/proc/self/fd/{fd}") else os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    c.sync()
    assert synced == ["leader-epoch-checkpoint.tmp", "dir"]
    synced.clear()
    c.truncate_from_end(15)
    assert synced == ["leader-epoch-checkpoint.tmp"]
    assert LeaderEpochCache(tmp_path).entries == [EpochEntry(0, 0), EpochEntry(1, 10)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]
