from pathlib import Path

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
