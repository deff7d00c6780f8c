"""The in-memory RaftLog and Kafka's ReplicatedLog defaults over it: epochs' end offsets, validation, truncation."""

from __future__ import annotations

import pytest

from odradek.raft.log import (
    InMemoryRaftLog,
    LogEntry,
    OffsetAndEpoch,
    truncate_to_end_offset,
    validate_offset_and_epoch,
)


def log_of(*epochs: int) -> InMemoryRaftLog:
    return InMemoryRaftLog([LogEntry(i, e, f"{i}".encode()) for i, e in enumerate(epochs)])


def test_end_offset_for_epoch() -> None:
    log = log_of(1, 1, 3, 3, 3, 4)
    assert log.end_offset() == 6 and log.last_fetched_epoch() == 4
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(1, 2)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(1, 2)  # the largest epoch not above 2
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(4, 6)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert InMemoryRaftLog().last_fetched_epoch() == 0


def test_append_refuses_gaps_and_going_back_in_epochs() -> None:
    log = log_of(2)
    with pytest.raises(ValueError, match="ends at 1"):
        log.append([LogEntry(5, 2, b"x")])
    with pytest.raises(ValueError, match="epoch 1 after epoch 2"):
        log.append([LogEntry(1, 1, b"x")])


def test_truncate_drops_epochs_past_the_end() -> None:
    log = log_of(1, 1, 3, 3)
    log.truncate_to(2)
    assert log.end_offset() == 2 and log.end_offset_for_epoch(3) == OffsetAndEpoch(1, 2)
    log.append([LogEntry(2, 5, b"y")])
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 3)


def test_validate_offset_and_epoch() -> None:
    leader = log_of(1, 1, 3, 3, 3)
    assert validate_offset_and_epoch(leader, 0, 0).valid
    assert validate_offset_and_epoch(leader, 2, 1).valid
    assert validate_offset_and_epoch(leader, 5, 3).valid
    # a follower that wrote epoch 2 entries the leader never had
    diverging = validate_offset_and_epoch(leader, 4, 2)
    assert not diverging.valid and diverging.offset_and_epoch == OffsetAndEpoch(1, 2)
    # a follower with more of epoch 1 than the leader has
    longer = validate_offset_and_epoch(leader, 3, 1)
    assert not longer.valid and longer.offset_and_epoch == OffsetAndEpoch(1, 2)
    # past the leader's end
    assert not validate_offset_and_epoch(leader, 7, 3).valid


def test_truncate_to_end_offset() -> None:
    follower = log_of(1, 1, 2, 2)
    assert truncate_to_end_offset(follower, OffsetAndEpoch(1, 2)) == 2
    assert follower.end_offset() == 2
    other = log_of(1, 1, 1, 1)
    assert truncate_to_end_offset(other, OffsetAndEpoch(1, 3)) == 3
    unknown = log_of(2, 2)
    assert truncate_to_end_offset(unknown, OffsetAndEpoch(1, 5)) == 0  # no epoch 1 here: below epoch 2
    empty_epoch = log_of(1, 1)
    assert truncate_to_end_offset(empty_epoch, OffsetAndEpoch(0, 0)) == 0
