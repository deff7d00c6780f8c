"""Membership operations of a classic group cost O(1) (or O(log n) for timers) per member, not a
scan of the group; the group record is written once per rebalance or per loop turn of static
rejoins, not once per member; group.max.size as Kafka's GroupMetadataManager applies it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from odradek.coordinator import records as rec
from odradek.coordinator.group.classic import GroupState
from odradek.coordinator.group.coordinator import (
    SYNC_ANSWER_SLICE,
    GroupConfig,
    GroupCoordinator,
    JoinResult,
    SyncResult,
    make_scheduler,
)
from odradek.protocol import errors

from .fakes import FakeClock
from .test_group_coordinator import Log

PROTOS = [("range", b"meta-r")]


class ScanCountingDict(dict[str, Any]):
    """A members dict that counts whole-group scans (values/items/iteration)."""

    scans = 0

    def values(self) -> Any:
        ScanCountingDict.scans += 1
        return super().values()

    def items(self) -> Any:
        ScanCountingDict.scans += 1
        return super().items()


def make(max_size: int = 2**31 - 1, delay_ms: int = 3000) -> tuple[GroupCoordinator, FakeClock, Log]:
    clock, wlog = FakeClock(), Log()
    coord = GroupCoordinator(
        GroupConfig(num_partitions=50, initial_rebalance_delay_ms=delay_ms, max_size=max_size),
        clock, wlog, lambda t, p: True,
    )
    return coord, clock, wlog


def join(coord: GroupCoordinator, instance: str | None, member_id: str = "") -> list[JoinResult]:
    box: list[JoinResult] = []
    coord.join_group("g", member_id, instance, "c", "/h", 30000, 60000, "consumer", PROTOS, True, box.append)
    return box


def group_writes(wlog: Log) -> int:
    return sum(1 for _, k, v in wlog.records if v is not None and isinstance(rec.decode_key(k), rec.GroupKey))


def stable_group(coord: GroupCoordinator, clock: FakeClock, n: int) -> dict[str, JoinResult]:
    boxes = {f"i{i}": join(coord, f"i{i}") for i in range(n)}
    clock.advance(10)
    results = {iid: box[0] for iid, box in boxes.items()}
    g = coord.groups["g"]
    assert all(r.error_code == 0 and r.generation_id == 1 for r in results.values())
    leader = g.leader_id
    assert leader is not None
    coord.sync_group("g", 1, leader, None, None, None, {m: b"a" for m in g.members}, lambda r: None)
    assert g.state == GroupState.STABLE
    return results


def test_joins_do_not_scan_the_group() -> None:
    coord, clock, _ = make()
    join(coord, "i0")
    g = coord.groups["g"]
    g.members = ScanCountingDict(g.members)
    ScanCountingDict.scans = 0
    for i in range(1, 2000):
        join(coord, f"i{i}")
    # 1,999 joins into a group preparing its rebalance: no scan of the members for any of them
    # (Kafka keeps numMembersAwaitingJoinResponse and supportedProtocols counts for this)
    assert ScanCountingDict.scans == 0
    clock.advance(10)
    assert g.state == GroupState.COMPLETING_REBALANCE and len(g.members) == 2000
    # completing the rebalance walks the group a bounded number of times, not once per member
    assert ScanCountingDict.scans < 20


def test_leaves_during_a_rebalance_do_not_scan_the_group() -> None:
    coord, clock, _ = make()
    stable_group(coord, clock, 1000)
    g = coord.groups["g"]
    g.members = ScanCountingDict(g.members)
    ScanCountingDict.scans = 0
    code, _ = coord.leave_group("g", [("", f"i{i}") for i in range(999)])
    assert code == 0 and len(g.members) == 1
    # the first leave starts the rebalance (one walk); the other 998 are O(1) each
    assert ScanCountingDict.scans < 10


def test_static_rejoins_of_one_loop_turn_share_one_group_record() -> None:
    coord, clock, wlog = make()
    first = stable_group(coord, clock, 500)
    before = group_writes(wlog)
    boxes = {f"i{i}": join(coord, f"i{i}") for i in range(500)}
    assert not any(boxes.values())  # answered once the record holding the new ids is written
    clock.advance(0)
    assert group_writes(wlog) == before + 1
    g = coord.groups["g"]
    assert g.state == GroupState.STABLE and g.generation_id == 1
    for iid, box in boxes.items():
        r = box[0]
        assert r.error_code == 0 and r.generation_id == 1 and r.member_id != first[iid].member_id
        assert g.static_members[iid] == r.member_id
    # the record on the log holds every new member id
    _, key, value = [x for x in wlog.records if x[2] is not None][-1]
    assert value is not None
    written = {m.member_id for m in rec.decode_group_value(value).members}
    assert written == {box[0].member_id for box in boxes.values()}


def test_failed_write_of_static_rejoins_restores_the_old_member_ids() -> None:
    coord, clock, wlog = make()
    first = stable_group(coord, clock, 3)
    wlog.fail = errors.NOT_COORDINATOR
    boxes = {f"i{i}": join(coord, f"i{i}") for i in range(3)}
    clock.advance(0)
    g = coord.groups["g"]
    for iid, box in boxes.items():
        assert box[0].error_code == errors.NOT_COORDINATOR
        assert g.static_members[iid] == first[iid].member_id
    assert set(g.members) == {r.member_id for r in first.values()}


def test_group_max_size_refuses_new_members_of_a_full_stable_group() -> None:
    coord, clock, _ = make(max_size=3)
    first = stable_group(coord, clock, 3)
    box = join(coord, None)
    assert box[0].error_code == errors.GROUP_MAX_SIZE_REACHED and box[0].member_id == ""
    # an existing member may rejoin
    follower = next(iid for iid, r in first.items() if r.member_id != coord.groups["g"].leader_id)
    again = join(coord, follower, first[follower].member_id)
    assert again and again[0].error_code == 0
    assert len(coord.groups["g"].members) == 3


def test_group_max_size_while_preparing_a_rebalance_leaves_out_the_last_to_rejoin() -> None:
    coord, clock, _ = make(max_size=2)
    boxes = [join(coord, None) for _ in range(3)]
    # the first JoinGroup (v4+) gets MEMBER_ID_REQUIRED; the group is Empty, so nobody is refused yet
    ids = [b[0].member_id for b in boxes]
    assert all(b[0].error_code == errors.MEMBER_ID_REQUIRED for b in boxes)
    joined = [join(coord, None, mid) for mid in ids]
    # the group prepares its rebalance with two members waiting: the third is refused
    assert joined[2][0].error_code == errors.GROUP_MAX_SIZE_REACHED
    clock.advance(10)
    g = coord.groups["g"]
    assert set(g.members) == set(ids[:2]) and g.state == GroupState.COMPLETING_REBALANCE


def test_group_over_capacity_when_loaded_rebalances_and_kicks_the_excess() -> None:
    coord, clock, wlog = make()
    first = stable_group(coord, clock, 3)
    loaded, lclock, _ = make(max_size=2)
    for _, k, v in wlog.records:
        loaded.replay(k, v)
    loaded.finish_loading()
    g = loaded.groups["g"]
    assert g.state == GroupState.PREPARING_REBALANCE  # Kafka's onLoaded: over capacity -> rebalance
    boxes: list[list[JoinResult]] = []
    for iid in ("i0", "i1", "i2"):
        box: list[JoinResult] = []
        loaded.join_group("g", first[iid].member_id, iid, "c", "/h", 30000, 60000, "consumer", PROTOS, True,
                          box.append)
        boxes.append(box)
    # two members are awaiting the join: the third rejoining member is removed from the group
    assert boxes[2][0].error_code == errors.GROUP_MAX_SIZE_REACHED
    lclock.advance(0.01)
    assert len(g.members) == 2 and first["i2"].member_id not in g.members
    assert all(b[0].error_code == 0 and b[0].generation_id == 2 for b in boxes[:2])
    sync_box: list[SyncResult] = []
    loaded.sync_group("g", 2, first["i2"].member_id, "i2", None, None, {}, sync_box.append)
    assert sync_box[0].error_code == errors.UNKNOWN_MEMBER_ID


def test_a_waiting_member_costs_the_garbage_collector_few_objects() -> None:
    """Every full collection walks every tracked object with the event loop held: 10,000 members
    waiting in one group made it hundreds of ms. A member waiting for its JoinGroup's answer holds
    its Member, its protocols and its heartbeat timer (one partial of one bound method, in the
    scheduler's one context), not a closure with cells and a context copy per timer."""

    async def per_member() -> float:
        loop = asyncio.get_running_loop()
        coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=60000), make_scheduler(loop, lambda: 0),
                                 lambda p, r: None, lambda t, p: True)
        answers: list[JoinResult] = []
        coord.join_group("g", "", "first", "c", "/h", 30000, 60000, "consumer", PROTOS, True, answers.append)
        gc.collect()
        before = len(gc.get_objects())
        n = 2000
        for i in range(n):
            coord.join_group("g", "", f"i{i}", "c", "/h", 30000, 60000, "consumer", [("range", b"m")], True,
                             answers.append)
        gc.collect()
        assert len(coord.groups["g"].members) == n + 1 and not answers
        return (len(gc.get_objects()) - before) / n

    # Member, its protocols list, the timer, the timer's partial (10 before: a lambda, its three
    # cells and their tuple, and a context copied for the timer)
    assert asyncio.run(per_member()) <= 5.5


def test_sync_answers_are_given_a_slice_per_loop_turn_the_leaders_first() -> None:
    """Once the leader's assignment is stored, 10,000 SyncGroup answers in one loop turn held every
    other client; they are decided at once (Kafka's propagateAssignment) and given SYNC_ANSWER_SLICE
    per turn. A rebalance started in between does not change an answer already decided."""
    coord, clock, _ = make()
    n = 2 * SYNC_ANSWER_SLICE + 50
    boxes = {f"i{i}": join(coord, f"i{i}") for i in range(n)}
    clock.advance(10)
    g = coord.groups["g"]
    leader = g.leader_id
    assert leader is not None and g.is_in(GroupState.COMPLETING_REBALANCE)
    synced: dict[str, list[SyncResult]] = {m: [] for m in g.members}
    for mid in g.members:
        if mid != leader:
            coord.sync_group("g", 1, mid, None, None, None, {}, synced[mid].append)
    assert not any(synced.values())
    coord.sync_group("g", 1, leader, None, None, None, {m: m.encode() for m in g.members}, synced[leader].append)
    assert g.is_in(GroupState.STABLE)
    answered = [m for m, box in synced.items() if box]
    assert len(answered) == SYNC_ANSWER_SLICE and leader in answered
    # a member leaves before the rest are answered: the group rebalances, the answers stand
    gone = next(m for m, box in synced.items() if not box)
    coord.leave_group("g", [(gone, None)])
    assert g.is_in(GroupState.PREPARING_REBALANCE)
    clock.advance(0)
    assert all(box == [SyncResult(0, "consumer", "range", m.encode())] for m, box in synced.items())
    assert len(boxes) == n
