"""Share groups' membership (ShareGroupHeartbeat) on a fake clock: joining, the simple assignor, epochs, fencing,
session timeouts, leaving, the size limit and deletion."""

from __future__ import annotations

import uuid

from odradek.coordinator.share.share_group import (
    ShareGroups,
    ShareGroupSettings,
    simple_assign,
)
from odradek.protocol import errors

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(topics: dict[str, tuple[uuid.UUID, int]] | None = None, max_size: int = 200,
         removed: list[tuple[str, str, bool]] | None = None) -> tuple[ShareGroups, Clock, dict[str, tuple[uuid.UUID, int]]]:
    clock = Clock()
    known = dict(topics or {"t1": (T1, 1)})
    groups = ShareGroups(clock, known.get, lambda _g: ShareGroupSettings(45_000, 5_000), max_size,
                         on_member_removed=(lambda g, m, e: removed.append((g, m, e))) if removed is not None else None)
    return groups, clock, known


def test_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    subs = {"a": ("t1",), "b": ("t1",), "c": ("t1",)}
    out = simple_assign(subs, {"t1": (T1, 1)}, subs)
    assert out == {"a": {T1: frozenset({0})}, "b": {T1: frozenset({0})}, "c": {T1: frozenset({0})}}
    out = simple_assign(["a", "b"], {"t1": (T1, 4), "t2": (T2, 1)}, {"a": ("t1", "t2"), "b": ("t1",)})
    assert out == {"a": {T1: frozenset({0, 2}), T2: frozenset({0})}, "b": {T1: frozenset({1, 3})}}


def test_join_heartbeat_and_a_second_member() -> None:
    groups, _, _ = make()
    r = groups.heartbeat("g", "m1", 0, None, ["t1"])
    assert (r.error_code, r.member_epoch, r.heartbeat_interval_ms, r.assignment) == (0, 2, 5_000, {T1: frozenset({0})})
    same = groups.heartbeat("g", "m1", 2, None, None)
    assert (same.error_code, same.member_epoch, same.assignment) == (0, 2, None)  # unchanged: not sent again
    r2 = groups.heartbeat("g", "m2", 0, None, ["t1"])
    assert (r2.member_epoch, r2.assignment) == (3, {T1: frozenset({0})})  # the partition is shared
    again = groups.heartbeat("g", "m1", 2, None, None)
    # a new epoch is a changed member: its assignment is sent with it (Kafka's shareGroupHeartbeat)
    assert (again.member_epoch, again.assignment) == (3, {T1: frozenset({0})})
    g = groups.groups["g"]
    assert (g.state, g.group_epoch, g.assignment_epoch, sorted(g.members)) == ("Stable", 3, 3, ["m1", "m2"])


def test_a_new_topic_partition_bumps_the_epoch_and_is_assigned() -> None:
    groups, _, known = make()
    groups.heartbeat("g", "m1", 0, None, ["t1"])
    known["t1"] = (T1, 2)
    r = groups.heartbeat("g", "m1", 2, None, None)
    assert (r.member_epoch, r.assignment) == (3, {T1: frozenset({0, 1})})


def test_request_errors() -> None:
    groups, _, _ = make(max_size=1)
    assert groups.heartbeat("g", "", 0, None, ["t1"]).error_code == errors.INVALID_REQUEST
    assert groups.heartbeat("g", "m1", 0, None, None).error_code == errors.INVALID_REQUEST
    assert groups.heartbeat("g", "m1", -2, None, ["t1"]).error_code == errors.INVALID_REQUEST
    assert groups.heartbeat("g", "m1", 3, None, None).error_code == errors.UNKNOWN_MEMBER_ID
    r = groups.heartbeat("g", "m1", 0, None, ["t1"])
    assert groups.heartbeat("g", "m1", r.member_epoch + 1, None, None).error_code == errors.FENCED_MEMBER_EPOCH
    assert groups.heartbeat("g", "m1", r.member_epoch - 1, None, None).error_code == errors.FENCED_MEMBER_EPOCH
    assert groups.heartbeat("g", "m2", 0, None, ["t1"]).error_code == errors.GROUP_MAX_SIZE_REACHED
    assert groups.heartbeat("g", "m3", -1, None, None).error_code == errors.UNKNOWN_MEMBER_ID


def test_session_timeout_and_leaving() -> None:
    removed: list[tuple[str, str, bool]] = []
    groups, clock, _ = make(removed=removed)
    groups.heartbeat("g", "m1", 0, None, ["t1"])
    r2 = groups.heartbeat("g", "m2", 0, None, ["t1"])
    clock.now += 30_000
    groups.heartbeat("g", "m2", r2.member_epoch, None, None)
    clock.now += 15_000  # m1 silent for the session timeout, m2 heartbeated 15 s ago
    assert groups.expire_members() == [("g", "m1")]
    assert removed == [("g", "m1", True)]
    assert groups.heartbeat("g", "m1", 2, None, None).error_code == errors.UNKNOWN_MEMBER_ID
    assert groups.delete_group("g") == errors.NON_EMPTY_GROUP
    left = groups.heartbeat("g", "m2", 4, None, None)
    assert left.error_code == 0 or left.error_code == errors.FENCED_MEMBER_EPOCH
    epoch = groups.groups["g"].members["m2"].member_epoch
    assert groups.heartbeat("g", "m2", -1, None, None).member_epoch == -1
    assert epoch > 0 and removed[-1] == ("g", "m2", False)
    assert groups.groups["g"].state == "Empty"
    assert [g.group_id for g in groups.list_groups({"empty"})] == ["g"]
    assert groups.delete_group("g") == errors.NONE and groups.delete_group("g") == errors.GROUP_ID_NOT_FOUND
