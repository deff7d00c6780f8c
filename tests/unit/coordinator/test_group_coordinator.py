from __future__ import annotations

import pytest

from odradek.coordinator import records as rec
from odradek.coordinator.group.classic import GroupState
from odradek.coordinator.group.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinResult,
    SyncResult,
    WriteError,
)
from odradek.protocol import errors

from .fakes import FakeClock


class Log:
    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self.fail: int | None = None

    def __call__(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.fail is not None:
            raise WriteError(self.fail)
        self.records += [(partition, k, v) for k, v in records]


def make(delay_ms: int = 0) -> tuple[GroupCoordinator, FakeClock, Log]:
    clock, wlog = FakeClock(), Log()
    coord = GroupCoordinator(
        GroupConfig(num_partitions=50, initial_rebalance_delay_ms=delay_ms), clock, wlog, lambda t, p: t == "t" and p < 6
    )
    return coord, clock, wlog


PROTOS = [("range", b"meta-r"), ("roundrobin", b"meta-rr")]


def join(coord: GroupCoordinator, member_id: str = "", instance: str | None = None, protos=PROTOS, ptype="consumer"):
    box: list[JoinResult] = []
    coord.join_group("g", member_id, instance, "client", "/127.0.0.1", 10000, 30000, ptype, protos, True, box.append)
    return box


def sync(coord: GroupCoordinator, gen: int, member_id: str, assignments=None, instance=None):
    box: list[SyncResult] = []
    coord.sync_group("g", gen, member_id, instance, None, None, assignments or {}, box.append)
    return box


def full_join(coord: GroupCoordinator, clock: FakeClock) -> JoinResult:
    first = join(coord)
    assert first[0].error_code == errors.MEMBER_ID_REQUIRED
    box = join(coord, first[0].member_id)
    clock.advance(0.01)
    assert box and box[0].error_code == 0
    return box[0]


def test_single_member_join_sync_heartbeat() -> None:
    coord, clock, wlog = make()
    r = full_join(coord, clock)
    assert r.generation_id == 1 and r.leader == r.member_id and r.protocol_name == "range"
    assert [m[0] for m in r.members] == [r.member_id]
    s = sync(coord, 1, r.member_id, {r.member_id: b"assign"})
    assert s[0].error_code == 0 and s[0].assignment == b"assign"
    assert coord.groups["g"].state == GroupState.STABLE
    assert coord.heartbeat("g", 1, r.member_id, None) == 0
    assert coord.heartbeat("g", 0, r.member_id, None) == errors.ILLEGAL_GENERATION
    assert coord.heartbeat("g", 1, "nobody", None) == errors.UNKNOWN_MEMBER_ID
    # the group metadata was persisted under the group key
    assert any(isinstance(rec.decode_key(k), rec.GroupKey) for _, k, _ in wlog.records)


def test_second_member_triggers_rebalance_and_leader_gets_all() -> None:
    coord, clock, _ = make()
    a = full_join(coord, clock)
    sync(coord, 1, a.member_id, {a.member_id: b"x"})
    first_b = join(coord)
    b_box = join(coord, first_b[0].member_id)
    assert coord.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert coord.heartbeat("g", 1, a.member_id, None) == errors.REBALANCE_IN_PROGRESS
    a_box = join(coord, a.member_id)
    clock.advance(0.01)
    assert a_box[0].generation_id == 2 == b_box[0].generation_id
    leader = a_box[0] if a_box[0].leader == a.member_id else b_box[0]
    follower = b_box[0] if leader is a_box[0] else a_box[0]
    assert len(leader.members) == 2 and follower.members == []
    fs = sync(coord, 2, follower.member_id)
    assert fs == []  # waits for the leader
    ls = sync(coord, 2, leader.member_id, {leader.member_id: b"L", follower.member_id: b"F"})
    assert ls[0].assignment == b"L" and fs[0].assignment == b"F"


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout() -> None:
    coord, clock, _ = make()
    a = full_join(coord, clock)
    sync(coord, 1, a.member_id, {})
    first_b = join(coord)
    b_box = join(coord, first_b[0].member_id)
    for _ in range(6):  # a keeps heartbeating but never rejoins; the rebalance timeout is 30 s
        clock.advance(5)
        assert coord.heartbeat("g", 1, a.member_id, None) == errors.REBALANCE_IN_PROGRESS
    clock.advance(1)
    assert b_box[0].error_code == 0 and b_box[0].generation_id == 2
    assert list(coord.groups["g"].members) == [first_b[0].member_id]


def test_session_expiry_and_leave() -> None:
    coord, clock, _ = make()
    a = full_join(coord, clock)
    sync(coord, 1, a.member_id, {})
    clock.advance(11)  # session timeout 10 s without heartbeats
    g = coord.groups["g"]
    assert not g.members and g.state == GroupState.EMPTY
    b = full_join(coord, clock)
    code, results = coord.leave_group("g", [(b.member_id, None), ("ghost", None)])
    assert results == [(b.member_id, None, 0), ("ghost", None, errors.UNKNOWN_MEMBER_ID)]


def test_protocol_and_session_errors() -> None:
    coord, clock, _ = make()
    full_join(coord, clock)
    assert join(coord, ptype="connect")[0].error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert join(coord, protos=[("sticky", b"")])[0].error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    box: list[JoinResult] = []
    coord.join_group("g2", "", None, "c", "h", 10, 10, "consumer", PROTOS, True, box.append)
    assert box[0].error_code == errors.INVALID_SESSION_TIMEOUT
    box.clear()
    coord.join_group("", "", None, "c", "h", 10000, 10, "consumer", PROTOS, True, box.append)
    assert box[0].error_code == errors.INVALID_GROUP_ID


def test_static_member_rejoins_without_rebalance_and_fences_old_id() -> None:
    coord, clock, _ = make()
    a_box = join(coord, instance="i-a")
    b_box = join(coord, instance="i-b")
    clock.advance(0.01)
    a, b = a_box[0], b_box[0]
    assert a.error_code == 0 and b.error_code == 0 and a.generation_id == 1
    leader = a if a.leader == a.member_id else b
    sync(coord, 1, leader.member_id, {a.member_id: b"A", b.member_id: b"B"})
    sync(coord, 1, b.member_id if leader is a else a.member_id)
    again = join(coord, instance="i-b")
    clock.advance(0)  # answered once the group record with the new member id is written
    assert again[0].error_code == 0 and again[0].generation_id == 1  # no new generation
    assert coord.groups["g"].state == GroupState.STABLE
    new_id = again[0].member_id
    assert new_id != b.member_id
    s = sync(coord, 1, new_id, instance="i-b")
    assert s[0].assignment == b"B"
    assert coord.heartbeat("g", 1, b.member_id, "i-b") == errors.FENCED_INSTANCE_ID


def test_initial_rebalance_delay_collects_members() -> None:
    coord, clock, _ = make(delay_ms=3000)
    first = join(coord)
    a_box = join(coord, first[0].member_id)
    clock.advance(1)
    first_b = join(coord)
    b_box = join(coord, first_b[0].member_id)
    assert not a_box and not b_box
    clock.advance(3)
    clock.advance(3)
    assert a_box[0].generation_id == 1 == b_box[0].generation_id


def test_offsets_commit_fetch_replay_and_delete() -> None:
    coord, clock, wlog = make()
    code, res = coord.commit_offsets("g", -1, "", None, {("t", 0): (42, 3, "meta"), ("nope", 0): (1, -1, "")})
    assert code == 0 and res == {("t", 0): 0, ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    _, got = coord.fetch_offsets("g", [("t", 0), ("t", 1)])
    assert got[("t", 0)].offset == 42 and got[("t", 0)].leader_epoch == 3 and got[("t", 1)] is None
    assert coord.commit_offsets("g", 5, "m", None, {("t", 0): (1, -1, "")})[0] == errors.UNKNOWN_MEMBER_ID
    assert coord.commit_offsets("g", -1, "", None, {("t", 1): (1, -1, "x" * 5000)})[1][("t", 1)] == errors.OFFSET_METADATA_TOO_LARGE
    # replay into a fresh coordinator
    fresh, _, _ = make()
    for _, k, v in wlog.records:
        fresh.replay(k, v)
    assert fresh.fetch_offsets("g", None)[1][("t", 0)].offset == 42
    assert coord.delete_groups(["g", "missing"]) == {"g": 0, "missing": errors.GROUP_ID_NOT_FOUND}
    fresh2, _, _ = make()
    for _, k, v in wlog.records:
        fresh2.replay(k, v)
    assert "g" not in fresh2.groups


def test_non_empty_group_cannot_be_deleted_and_write_failures_surface() -> None:
    coord, clock, wlog = make()
    a = full_join(coord, clock)
    sync(coord, 1, a.member_id, {})
    assert coord.delete_groups(["g"]) == {"g": errors.NON_EMPTY_GROUP}
    wlog.fail = errors.NOT_COORDINATOR
    code, res = coord.commit_offsets("g", 1, a.member_id, None, {("t", 0): (1, -1, "")})
    assert res[("t", 0)] == errors.NOT_COORDINATOR


def test_offset_expiry_for_empty_groups() -> None:
    coord, clock, wlog = make()
    coord.config.offsets_retention_ms = 1000
    coord.commit_offsets("g", -1, "", None, {("t", 0): (1, -1, "")})
    clock.advance(2)
    assert coord.expire_offsets(clock.now_ms()) == 1
    assert "g" not in coord.groups


@pytest.mark.parametrize("group", ["", "g", "a" * 300, "ünï"])
def test_records_round_trip(group: str) -> None:
    k = rec.decode_key(rec.encode_offset_key(group, "t", 7))
    assert k == rec.OffsetKey(group, "t", 7)
    v = rec.decode_offset_value(rec.encode_offset_value(rec.OffsetValue(5, 2, "m", 99)))
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (5, 2, "m", 99)
    gv = rec.GroupValue("consumer", 3, "range", "m1", 10, [rec.MemberValue("m1", "i", "c", "h", 1, 2, b"s", b"a")])
    assert rec.decode_group_value(rec.encode_group_value(gv)) == gv


def test_partition_for_matches_java_hash() -> None:
    assert rec.java_string_hash("hello") == 99162322
    assert rec.partition_for("my-group", 50) == abs(-1906497762) % 50
