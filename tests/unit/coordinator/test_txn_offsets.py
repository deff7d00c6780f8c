"""Offsets committed inside transactions: pending until the marker, KIP-447 fencing."""

from __future__ import annotations

from odradek.coordinator.group.classic import ClassicGroup, GroupState, Member, OffsetAndMetadata
from odradek.coordinator.group.txn_offsets import PendingTxnOffsets, validate_txn_commit
from odradek.protocol import errors


def _om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 1000)


def _everywhere(_: str) -> bool:
    return True


def test_commit_returns_the_pending_offsets_and_abort_drops_them() -> None:
    p = PendingTxnOffsets()
    p.add(7, "g", {("t", 0): _om(5)})
    p.add(7, "g", {("t", 1): _om(9), ("t", 0): _om(6)})  # a later commit in the same transaction wins
    p.add(8, "g", {("t", 0): _om(100)})
    assert p.has_pending("g", ("t", 0)) and p.has_pending("g") and not p.has_pending("other")
    assert p.complete(7, True, _everywhere) == {"g": {("t", 0): _om(6), ("t", 1): _om(9)}}
    assert p.has_pending("g", ("t", 0))  # producer 8's transaction is still open
    assert not p.has_pending("g", ("t", 1))
    assert p.complete(8, False, _everywhere) == {}
    assert not p.has_pending("g")
    assert p.complete(8, True, _everywhere) == {}  # nothing left: a repeated marker changes nothing


def test_a_marker_ends_only_the_groups_of_its_partition() -> None:
    p = PendingTxnOffsets()
    p.add(1, "in-p0", {("t", 0): _om(1)})
    p.add(1, "in-p1", {("t", 0): _om(2)})
    assert p.complete(1, True, lambda g: g == "in-p0") == {"in-p0": {("t", 0): _om(1)}}
    assert p.has_pending("in-p1")
    p.drop(lambda g: g == "in-p1")  # the partition was unloaded
    assert not p.has_pending("in-p1")


def _group(generation: int, members: dict[str, str | None]) -> ClassicGroup:
    g = ClassicGroup("g", GroupState.STABLE, "consumer", "range", generation)
    for mid, iid in members.items():
        g.members[mid] = Member(mid, iid, "c", "/h", 1000, 1000, "consumer", [("range", b"")])
        if iid is not None:
            g.static_members[iid] = mid
    return g


def test_kip447_fencing() -> None:
    g = _group(3, {"m1": None, "m2": "inst-2"})
    assert validate_txn_commit(g, "m1", 3, None) == errors.NONE
    assert validate_txn_commit(g, "m1", 2, None) == errors.ILLEGAL_GENERATION  # a rebalance happened since
    assert validate_txn_commit(g, "gone", 3, None) == errors.UNKNOWN_MEMBER_ID
    assert validate_txn_commit(g, "m-new", 3, "inst-2") == errors.FENCED_INSTANCE_ID
    assert validate_txn_commit(g, "", -1, None) == errors.NONE  # no consumer metadata given
    assert validate_txn_commit(None, "", -1, None) == errors.NONE
    assert validate_txn_commit(None, "m1", 1, None) == errors.ILLEGAL_GENERATION
    g.state = GroupState.DEAD
    assert validate_txn_commit(g, "m1", 3, None) == errors.COORDINATOR_NOT_AVAILABLE
