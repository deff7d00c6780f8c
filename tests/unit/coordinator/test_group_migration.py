"""KIP-848's online migration (group.consumer.migration.policy): a classic group becomes a
consumer group when a consumer-protocol member joins it, its classic members keep being served
through JoinGroup / SyncGroup / Heartbeat from the consumer group's target assignment, and the
group becomes a classic group again when the last consumer-protocol member leaves."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from odradek.coordinator.group.classic import GroupState
from odradek.coordinator.group.consumer_group import ConsumerGroupCoordinator
from odradek.coordinator.group.consumer_model import ConsumerGroupConfig, MemberState
from odradek.coordinator.group.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    metadata_version,
)
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator, JoinResult, SyncResult
from odradek.coordinator.group.migration import GroupMigration, MigrationPolicy
from odradek.protocol import errors

from .fakes import FakeClock
from .test_consumer_group import Topics, hb, join, parts


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None, version: int = 1) -> bytes:
    """ConsumerProtocolSubscription v0 to v3 (owned partitions, generation -1, null rack), as a client writes it."""
    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    out = struct.pack(">hi", version, len(topics)) + b"".join(s(t) for t in topics) + struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for t, ps in owned.items():
            out += s(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    if version >= 2:
        out += struct.pack(">i", -1)
    if version >= 3:
        out += struct.pack(">h", -1)
    return out


class World:
    def __init__(self, policy: str = "bidirectional", session_ms: int = 10000) -> None:
        self.clock, self.topics = FakeClock(), Topics()
        self.written: list[tuple[int, bytes, bytes | None]] = []
        self.session_ms = session_ms
        self.classic = GroupCoordinator(
            GroupConfig(num_partitions=5, initial_rebalance_delay_ms=0), self.clock,
            lambda p, recs: self.written.extend((p, k, v) for k, v in recs), lambda t, p: t == "t" and p < 6,
        )
        self.consumer = ConsumerGroupCoordinator(
            ConsumerGroupConfig(), self.clock, self.topics,
            classic_group_active=lambda g: g in self.classic.groups and not self.classic.groups[g].is_empty,
        )
        self.classic.modern = self.consumer
        self.consumer.migration = GroupMigration(
            MigrationPolicy.parse(policy), self.classic, self.consumer, 100, 100, self.clock.now_ms,
        )

    def join(self, member_id: str, meta: bytes, protocol: str = "range", require_known: bool = False) -> JoinResult:
        box: list[JoinResult] = []
        self.classic.join_group("g", member_id, None, "c", "/h", self.session_ms, 30000, "consumer",
                                [(protocol, meta)], require_known, box.append)
        if not box:
            self.clock.advance(0)  # a classic group completes its join on a timer
        assert box, "JoinGroup was not answered"
        return box[0]

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> SyncResult:
        box: list[SyncResult] = []
        self.classic.sync_group("g", generation, member_id, None, "consumer", None, assignments or {}, box.append)
        assert box, "SyncGroup was not answered"
        return box[0]

    def heartbeat(self, member_id: str, generation: int) -> int:
        return self.classic.heartbeat("g", generation, member_id, None)

    def stable_classic_member(self, meta: bytes | None = None) -> tuple[str, int]:
        """One classic member holding every partition of t, Stable."""
        r = self.join("", meta or subscription(["t"]))
        assert r.error_code == errors.NONE, r
        mid, gen = r.member_id, r.generation_id
        s = self.sync(mid, gen, {mid: encode_assignment({"t": range(6)})})
        assert s.error_code == errors.NONE
        assert self.classic.groups["g"].state == GroupState.STABLE
        return mid, gen


def owned_of(s: SyncResult) -> dict[str, list[int]]:
    return assignment_partitions(s.assignment)


def test_eager_classic_member_and_consumer_member_share_the_group() -> None:
    w = World()
    c1, gen = w.stable_classic_member()
    r2 = join(w.consumer, "m2")  # a consumer-protocol member joins: the group is upgraded
    assert r2.error_code == errors.NONE
    g = w.consumer.groups["g"]
    assert set(g.members) == {c1, "m2"} and g.members[c1].uses_classic_protocol
    assert g.members[c1].member_epoch == gen and g.group_epoch == gen + 1
    assert parts(r2) == set()  # everything is still the classic member's
    # the classic group holds the offsets only, and the group is described as a consumer group
    assert w.classic.groups["g"].is_empty and w.classic.describe("g") is None
    assert [x.group_id for x in w.consumer.list_groups()] == ["g"]
    # the classic member is told to rejoin, revokes everything (eager) and gets its share
    assert w.heartbeat(c1, gen) == errors.REBALANCE_IN_PROGRESS
    j = w.join(c1, subscription(["t"]))
    assert j.error_code == errors.NONE and j.leader == "" and j.members == []
    assert j.generation_id == g.group_epoch and j.protocol_name == "range"
    s = w.sync(c1, j.generation_id)
    assert s.error_code == errors.NONE
    mine = set(owned_of(s)["t"])
    assert len(mine) == 3
    assert w.heartbeat(c1, j.generation_id) == errors.NONE
    # the consumer member gets the partitions the classic member let go
    r = hb(w.consumer, "m2", r2.member_epoch, owned={})
    assert parts(r) == set(range(6)) - mine
    assert all(m.state == MemberState.STABLE for m in g.members.values())


def test_cooperative_classic_member_revokes_before_the_consumer_member_gets_them() -> None:
    w = World()
    c1, gen = w.stable_classic_member(subscription(["t"], {"t": list(range(6))}))
    r2 = join(w.consumer, "m2")
    assert w.heartbeat(c1, gen) == errors.REBALANCE_IN_PROGRESS
    # rejoins still owning everything: it is given what it keeps, and must revoke the rest
    j = w.join(c1, subscription(["t"], {"t": list(range(6))}))
    g = w.consumer.groups["g"]
    assert g.members[c1].state == MemberState.UNREVOKED_PARTITIONS
    keep = set(owned_of(w.sync(c1, j.generation_id))["t"])
    assert len(keep) == 3
    hb(w.consumer, "m2", r2.member_epoch, owned={})
    assert not g.members["m2"].assigned  # not released yet
    assert w.heartbeat(c1, j.generation_id) == errors.REBALANCE_IN_PROGRESS
    # revoked: rejoins owning only what it keeps
    j2 = w.join(c1, subscription(["t"], {"t": sorted(keep)}))
    assert g.members[c1].state == MemberState.STABLE
    assert set(owned_of(w.sync(c1, j2.generation_id))["t"]) == keep
    r = hb(w.consumer, "m2", r2.member_epoch, owned={})
    assert parts(r) == set(range(6)) - keep


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    w = World()
    c1, _ = w.stable_classic_member()
    r2 = join(w.consumer, "m2")
    j = w.join(c1, subscription(["t"]))
    mine = owned_of(w.sync(c1, j.generation_id))
    epoch = w.consumer.groups["g"].group_epoch
    hb(w.consumer, "m2", r2.member_epoch, owned={})
    assert hb(w.consumer, "m2", -1).error_code == errors.NONE  # leaves
    assert "g" not in w.consumer.groups
    cg = w.classic.groups["g"]
    assert list(cg.members) == [c1] and cg.protocol_type == "consumer" and cg.protocol_name == "range"
    assert cg.generation_id == epoch and cg.state == GroupState.PREPARING_REBALANCE
    # its target in the consumer group, until it rejoins
    assert assignment_partitions(cg.members[c1].assignment) == mine and len(mine["t"]) == 3
    # the classic member rejoins and, alone, leads the new generation
    assert w.heartbeat(c1, j.generation_id) == errors.REBALANCE_IN_PROGRESS
    j2 = w.join(c1, subscription(["t"]))
    assert j2.error_code == errors.NONE and j2.leader == c1 and j2.generation_id == epoch + 1
    s = w.sync(c1, j2.generation_id, {c1: encode_assignment({"t": range(6)})})
    assert s.error_code == errors.NONE and owned_of(s) == {"t": list(range(6))}
    assert cg.state == GroupState.STABLE


def test_downgraded_members_keep_their_target_assignment_until_they_rejoin() -> None:
    w = World()
    c1, _ = w.stable_classic_member()
    r2 = join(w.consumer, "m2")
    j = w.join(c1, subscription(["t"], version=3))
    mine = owned_of(w.sync(c1, j.generation_id))["t"]
    hb(w.consumer, "m2", r2.member_epoch, owned={})
    hb(w.consumer, "m2", -1)
    m = w.classic.groups["g"].members[c1]
    assert assignment_partitions(m.assignment) == {"t": mine}
    assert metadata_version(m.assignment) == 3  # the version of the member's subscription


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "DISABLED"])
def test_upgrade_refused_by_the_policy(policy: str) -> None:
    w = World(policy)
    w.stable_classic_member()
    assert join(w.consumer, "m2").error_code == errors.GROUP_ID_NOT_FOUND
    assert "g" not in w.consumer.groups and len(w.classic.groups["g"].members) == 1


def test_upgrade_only_policy_keeps_a_consumer_group_of_classic_members() -> None:
    w = World("upgrade")
    c1, _ = w.stable_classic_member()
    r2 = join(w.consumer, "m2")
    hb(w.consumer, "m2", -1)
    g = w.consumer.groups["g"]
    assert list(g.members) == [c1] and w.classic.groups["g"].is_empty
    # still served as a classic member of the consumer group
    j = w.join(c1, subscription(["t"]))
    assert j.error_code == errors.NONE and j.leader == ""
    assert set(owned_of(w.sync(c1, j.generation_id))["t"]) == set(range(6))
    del r2


def test_a_group_of_another_protocol_type_is_not_upgraded() -> None:
    w = World()
    box: list[Any] = []
    w.classic.join_group("g", "", None, "c", "/h", 10000, 30000, "connect", [("sessioned", b"x")], False, box.append)
    w.clock.advance(0)
    assert box[0].error_code == errors.NONE
    assert join(w.consumer, "m2").error_code == errors.GROUP_ID_NOT_FOUND


def test_waiting_classic_joins_are_answered_rebalance_in_progress_on_upgrade() -> None:
    w = World()
    c1, gen = w.stable_classic_member()
    box: list[JoinResult] = []
    # a second classic member starts a rebalance: the first member's rejoin waits
    w.classic.join_group("g", "", None, "c", "/h", 10000, 30000, "consumer", [("range", subscription(["t"]))],
                         False, box.append)
    assert not box and w.classic.groups["g"].state == GroupState.PREPARING_REBALANCE
    join(w.consumer, "m3")
    assert [r.error_code for r in box] == [errors.REBALANCE_IN_PROGRESS]
    # both classic members are in the consumer group now
    assert len(w.consumer.groups["g"].members) == 3


def test_classic_member_session_timeout_in_a_consumer_group() -> None:
    w = World(session_ms=8000)
    c1, _ = w.stable_classic_member()
    r2 = join(w.consumer, "m2")
    for _ in range(10):  # the consumer member heartbeats, the classic one falls silent
        w.clock.advance(2)
        hb(w.consumer, "m2", w.consumer.groups["g"].members["m2"].member_epoch, owned={})
    # the classic member was fenced after its own 8 s session timeout; the downgrade did not apply
    # (the remaining member speaks the consumer protocol)
    g = w.consumer.groups["g"]
    assert list(g.members) == ["m2"]
    r = hb(w.consumer, "m2", g.members["m2"].member_epoch, owned={})
    assert r.error_code == errors.NONE
    del r2


def test_classic_member_that_never_syncs_is_fenced_after_its_rebalance_timeout() -> None:
    w = World(session_ms=60000)
    c1, gen = w.stable_classic_member()
    join(w.consumer, "m2")
    j = w.join(c1, subscription(["t"]))
    assert j.error_code == errors.NONE
    w.clock.advance(29)
    hb(w.consumer, "m2", w.consumer.groups["g"].members["m2"].member_epoch, owned={})
    assert c1 in w.consumer.groups["g"].members
    w.clock.advance(2)  # 30 s after its JoinGroup
    assert c1 not in w.consumer.groups["g"].members


def test_offsets_committed_by_a_classic_member_of_a_consumer_group() -> None:
    w = World()
    c1, gen = w.stable_classic_member()
    join(w.consumer, "m2")
    assert w.classic.commit_offsets("g", gen, c1, None, {("t", 0): (5, -1, "")})[0] == errors.NONE
    assert w.classic.commit_offsets("g", gen + 7, c1, None, {("t", 0): (5, -1, "")})[0] == errors.ILLEGAL_GENERATION


def test_classic_requests_to_a_consumer_group_are_validated() -> None:
    w = World()
    c1, gen = w.stable_classic_member()
    r2 = join(w.consumer, "m2")
    assert w.heartbeat(c1, gen + 5) == errors.ILLEGAL_GENERATION
    assert w.heartbeat("nobody", gen) == errors.UNKNOWN_MEMBER_ID
    assert w.heartbeat("m2", r2.member_epoch) == errors.UNKNOWN_MEMBER_ID  # not a classic member
    assert w.sync(c1, gen).error_code == errors.REBALANCE_IN_PROGRESS  # must rejoin first
    # a protocol the classic members do not share, or another protocol type, is refused
    assert w.join("", subscription(["t"]), protocol="roundrobin").error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert w.join("", b"\x00").error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    # v4+: a new member gets a member id first
    r = w.join("", subscription(["t"]), require_known=True)
    assert r.error_code == errors.MEMBER_ID_REQUIRED and r.member_id
    r = w.join(r.member_id, subscription(["t"]))
    assert r.error_code == errors.NONE and len(w.consumer.groups["g"].members) == 3
    # LeaveGroup removes a classic member and bumps the group epoch
    epoch = w.consumer.groups["g"].group_epoch
    code, res = w.classic.leave_group("g", [(r.member_id, None), ("m2", None)])
    assert code == errors.NONE and [x[2] for x in res] == [errors.NONE, errors.UNKNOWN_MEMBER_ID]
    assert w.consumer.groups["g"].group_epoch == epoch + 1
