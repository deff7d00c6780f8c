from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from odradek.coordinator import records as rec
from odradek.coordinator.group.consumer_group import ConsumerGroupCoordinator
from odradek.coordinator.group.consumer_model import (
    ConsumerGroupConfig,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from odradek.protocol import errors

from .fakes import FakeClock

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


class Topics:
    def __init__(self) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"t": (T, 6), "u": (U, 2)}

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.topics.get(name)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, (i, _) in self.topics.items() if i == topic_id), None)

    def names(self) -> Iterable[str]:
        return list(self.topics)


def make(**cfg: object) -> tuple[ConsumerGroupCoordinator, FakeClock, Topics]:
    clock, topics = FakeClock(), Topics()
    emptied: list[str] = []
    c = ConsumerGroupCoordinator(
        ConsumerGroupConfig(**cfg),  # type: ignore[arg-type]
        clock, topics, on_empty=lambda g, _t: emptied.append(g),
    )
    return c, clock, topics


def hb(
    c: ConsumerGroupCoordinator,
    member_id: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    owned: dict[uuid.UUID, Iterable[int]] | None = None,
    instance: str | None = None,
    rebalance: int = -1,
    assignor: str | None = None,
    version: int = 1,
    group: str = "g",
) -> HeartbeatResult:
    req = HeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance,
        rebalance_timeout_ms=rebalance,
        subscribed_topic_names=topics,
        server_assignor=assignor,
        topic_partitions=[(t, sorted(ps)) for t, ps in owned.items()] if owned is not None else None,
    )
    return c.heartbeat(req, version, "client", "/127.0.0.1")


def join(c: ConsumerGroupCoordinator, member_id: str, topics: list[str] | None = None, **kw: object) -> HeartbeatResult:
    return hb(c, member_id, 0, topics=topics or ["t"], owned={}, rebalance=30000, **kw)  # type: ignore[arg-type]


def parts(r: HeartbeatResult, topic: uuid.UUID = T) -> set[int]:
    assert r.assignment is not None, r
    return set(r.assignment.get(topic, ()))


def test_first_member_gets_everything() -> None:
    c, _, _ = make()
    r = join(c, "m1")
    assert r.error_code == errors.NONE
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert parts(r) == set(range(6))
    g = c.groups["g"]
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    # a plain heartbeat carries no assignment when nothing changed
    r = hb(c, "m1", 1)
    assert r.error_code == errors.NONE and r.assignment is None and r.member_epoch == 1


def test_v0_assigns_member_id_v1_requires_one() -> None:
    c, _, _ = make()
    r = hb(c, "", 0, topics=["t"], owned={}, rebalance=1000, version=0)
    assert r.error_code == errors.NONE and r.member_id and len(r.member_id) == 22
    r = hb(c, "", 0, topics=["t"], owned={}, rebalance=1000, version=1)
    assert r.error_code == errors.INVALID_REQUEST


def test_revocation_before_reassignment() -> None:
    c, _, _ = make()
    r1 = join(c, "m1")
    assert parts(r1) == set(range(6))
    r2 = join(c, "m2")
    # m2 is at the new epoch but gets nothing yet: its partitions are still owned by m1
    assert r2.member_epoch == 2 and parts(r2) == set()
    assert c.groups["g"].members["m2"].state == MemberState.UNRELEASED_PARTITIONS
    assert c.groups["g"].state == ConsumerGroupState.RECONCILING
    # m1 is told to keep only its share, at its old epoch
    r1 = hb(c, "m1", 1)
    kept = parts(r1)
    assert r1.member_epoch == 1 and len(kept) == 3
    assert c.groups["g"].members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    # while m1 still reports the revoked partitions, nothing moves
    r1 = hb(c, "m1", 1, owned={T: range(6)})
    assert r1.member_epoch == 1 and r1.assignment is None
    assert hb(c, "m2", 2).assignment is None
    # m1 acknowledges the revocation: it moves to epoch 2
    r1 = hb(c, "m1", 1, owned={T: kept})
    assert r1.member_epoch == 2 and r1.assignment is None
    # now m2 gets the released partitions
    r2 = hb(c, "m2", 2)
    assert parts(r2) == set(range(6)) - kept
    assert c.groups["g"].state == ConsumerGroupState.STABLE


def stable_pair(c: ConsumerGroupCoordinator) -> tuple[set[int], set[int]]:
    join(c, "m1")
    join(c, "m2")
    kept = parts(hb(c, "m1", 1))
    hb(c, "m1", 1, owned={T: kept})
    other = parts(hb(c, "m2", 2))
    return kept, other


def test_leave_gives_partitions_to_the_others_without_revoking() -> None:
    c, _, _ = make()
    p1, p2 = stable_pair(c)
    r = hb(c, "m2", -1)
    assert (r.error_code, r.member_epoch) == (errors.NONE, -1)
    g = c.groups["g"]
    assert "m2" not in g.members and g.group_epoch == 3
    r = hb(c, "m1", 2)
    assert r.member_epoch == 3 and parts(r) == p1 | p2
    assert g.members["m1"].state == MemberState.STABLE


def test_session_timeout_fences_member() -> None:
    c, clock, _ = make(session_timeout_ms=10000)
    stable_pair(c)
    epoch = 2
    for _ in range(3):
        clock.advance(4)
        epoch = hb(c, "m1", epoch).member_epoch
    assert "m2" not in c.groups["g"].members
    assert hb(c, "m2", 2).error_code == errors.UNKNOWN_MEMBER_ID
    assert epoch == 3 and c.groups["g"].members["m1"].assigned == {T: frozenset(range(6))}
    clock.advance(11)
    assert c.groups["g"].state == ConsumerGroupState.EMPTY


def test_rebalance_timeout_fences_member_that_does_not_revoke() -> None:
    c, clock, _ = make(session_timeout_ms=60000)
    join(c, "m1")
    c.groups["g"].members["m1"].rebalance_timeout_ms = 5000
    join(c, "m2")
    hb(c, "m1", 1)  # told to revoke
    clock.advance(3)
    hb(c, "m1", 1)
    clock.advance(3)
    assert "m1" not in c.groups["g"].members
    assert hb(c, "m1", 1).error_code == errors.UNKNOWN_MEMBER_ID


def test_fenced_epochs() -> None:
    c, _, _ = make()
    p1, _ = stable_pair(c)
    assert hb(c, "m1", 3).error_code == errors.FENCED_MEMBER_EPOCH  # from the future
    assert hb(c, "m1", 0, topics=["t"], owned={}, rebalance=1).error_code == errors.NONE  # rejoin is fine
    # the previous epoch is accepted with owned partitions within the assignment (lost response)
    m1 = c.groups["g"].members["m1"]
    assert m1.previous_member_epoch == 1 and m1.member_epoch == 2
    assert hb(c, "m1", 1, owned={T: p1}).error_code == errors.NONE
    assert hb(c, "m1", 1).error_code == errors.FENCED_MEMBER_EPOCH  # no owned partitions given
    assert hb(c, "nobody", 2).error_code == errors.UNKNOWN_MEMBER_ID
    assert hb(c, "x", 1, group="other").error_code == errors.UNKNOWN_MEMBER_ID


def test_invalid_first_heartbeats() -> None:
    c, _, _ = make()
    assert hb(c, "m", 0, topics=["t"], owned={}).error_code == errors.INVALID_REQUEST  # no rebalance timeout
    assert hb(c, "m", 0, topics=["t"], rebalance=1).error_code == errors.INVALID_REQUEST  # null partitions
    assert hb(c, "m", 0, topics=["t"], owned={T: [0]}, rebalance=1).error_code == errors.INVALID_REQUEST
    assert hb(c, "m", 0, owned={}, rebalance=1).error_code == errors.INVALID_REQUEST  # no subscription
    assert hb(c, "m", -3).error_code == errors.INVALID_REQUEST
    assert hb(c, "m", -2).error_code == errors.INVALID_REQUEST  # static leave without an instance id
    assert hb(c, "m", 0, topics=["t"], owned={}, rebalance=1, group="").error_code == errors.INVALID_GROUP_ID
    r = join(c, "m", assignor="sticky")
    assert r.error_code == errors.UNSUPPORTED_ASSIGNOR and r.error_message
    assert "g" not in c.groups


def test_max_size() -> None:
    c, _, _ = make(max_size=1)
    join(c, "m1")
    assert join(c, "m2").error_code == errors.GROUP_MAX_SIZE_REACHED
    assert hb(c, "m1", 1).error_code == errors.NONE


def test_static_member_leaves_and_returns_with_its_partitions() -> None:
    c, _, _ = make()
    join(c, "s1", instance="i1")
    join(c, "m2")
    kept = parts(hb(c, "s1", 1, instance="i1"))
    hb(c, "s1", 1, instance="i1", owned={T: kept})
    hb(c, "m2", 2)
    g = c.groups["g"]
    epoch = g.group_epoch
    # another process with the same instance id while s1 is active: refused
    assert join(c, "s2", instance="i1").error_code == errors.UNRELEASED_INSTANCE_ID
    # a heartbeat from a different member id for the instance is fenced
    assert hb(c, "s2", 2, instance="i1").error_code == errors.FENCED_INSTANCE_ID
    r = hb(c, "s1", -2, instance="i1")
    assert (r.error_code, r.member_epoch) == (errors.NONE, -2)
    assert g.group_epoch == epoch and g.static_members["i1"] == "s1"
    # it comes back under a new member id: same partitions, no new group epoch
    r = join(c, "s2", instance="i1")
    assert r.error_code == errors.NONE and parts(r) == kept and r.member_epoch == epoch
    assert g.group_epoch == epoch and "s1" not in g.members and g.static_members["i1"] == "s2"
    # other members see nothing
    assert hb(c, "m2", 2).assignment is None


def test_new_partitions_are_assigned_after_a_topic_change() -> None:
    c, _, topics = make()
    join(c, "m1")
    topics.topics["t"] = (T, 8)
    c.on_topic_changed("t")
    assert c.groups["g"].state == ConsumerGroupState.ASSIGNING
    r = hb(c, "m1", 1)
    assert r.member_epoch == 2 and parts(r) == set(range(8))


def test_subscription_change_and_regex() -> None:
    c, _, _ = make()
    join(c, "m1")
    r = hb(c, "m1", 1, topics=["t", "u"])
    assert r.member_epoch == 2 and parts(r, U) == {0, 1} and parts(r, T) == set(range(6))
    req = HeartbeatRequest("g", "m2", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="^u$", topic_partitions=[])
    r2 = c.heartbeat(req, 1, "c", "/h")
    assert r2.error_code == errors.NONE
    req = HeartbeatRequest("g", "m3", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="(", topic_partitions=[])
    assert c.heartbeat(req, 1, "c", "/h").error_code == 128  # INVALID_REGULAR_EXPRESSION
    # RE2's syntax, as Kafka's RE2/J reads it: lookaround and backreferences are refused, \Q...\E quotes
    for bad in ("(?=u).*", "(u)\\1"):
        req = HeartbeatRequest("g", "m4", 0, rebalance_timeout_ms=1000, subscribed_topic_regex=bad, topic_partitions=[])
        assert c.heartbeat(req, 1, "c", "/h").error_code == 128, bad
    req = HeartbeatRequest("g", "m5", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="\\Qu\\E", topic_partitions=[])
    assert c.heartbeat(req, 1, "c", "/h").error_code == errors.NONE
    assert c.member_topics(c.groups["g"].members["m5"]) == {"u"}


def test_a_regex_matches_only_the_topics_the_members_principal_may_describe() -> None:
    """Kafka's filterTopicDescribeAuthorizedTopics: each member's regex resolves to the topics its
    principal may DESCRIBE; a grant counts from the next heartbeat that recomputes the subscriptions."""
    c, _, _ = make()
    allowed = {"t"}
    req = HeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_regex=".*", topic_partitions=[],
                           may_describe=allowed.__contains__)
    r = c.heartbeat(req, 1, "c", "/h")
    assert r.error_code == errors.NONE and r.assignment is not None and set(r.assignment) == {T}
    assert set(c.groups["g"].subscription_metadata) == {"t"}
    # another member of the group with no authorizer behind it matches both
    req = HeartbeatRequest("g", "m2", 0, rebalance_timeout_ms=1000, subscribed_topic_regex=".*", topic_partitions=[])
    c.heartbeat(req, 1, "c", "/h")
    assert set(c.groups["g"].subscription_metadata) == {"t", "u"}
    assert c.member_topics(c.groups["g"].members["m1"]) == {"t"}
    allowed.add("u")
    req = HeartbeatRequest("g", "m1", r.member_epoch, topic_partitions=[(T, sorted(r.assignment[T]))],
                           may_describe=allowed.__contains__)
    assert c.heartbeat(req, 1, "c", "/h").error_code == errors.NONE
    assert c.member_topics(c.groups["g"].members["m1"]) == {"t", "u"}


def test_range_assignor_on_request() -> None:
    c, _, _ = make()
    join(c, "a", assignor="range")
    join(c, "b", assignor="range")
    assert c.groups["g"].assignor_name == "range"
    assert c.groups["g"].target["a"] == {T: frozenset({0, 1, 2})}


def test_offset_commit_and_fetch_validation() -> None:
    c, _, _ = make()
    stable_pair(c)
    assert c.validate_offset_commit("g", "m1", 2) == errors.NONE
    assert c.validate_offset_commit("g", "m1", 1) == errors.STALE_MEMBER_EPOCH
    assert c.validate_offset_commit("g", "zz", 2) == errors.UNKNOWN_MEMBER_ID
    assert c.validate_offset_commit("g", "", -1) == errors.UNKNOWN_MEMBER_ID  # the group has members
    assert c.validate_offset_fetch("g", None, -1) == errors.NONE
    assert c.validate_offset_fetch("g", "m1", 2) == errors.NONE
    assert c.validate_offset_fetch("g", "m1", 7) == errors.STALE_MEMBER_EPOCH
    hb(c, "m1", -1)
    hb(c, "m2", -1)
    assert c.is_empty("g") and c.validate_offset_commit("g", "", -1) == errors.NONE


@pytest.mark.parametrize("bad", [("nope",), ()])
def test_unknown_assignor_config_is_refused(bad: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        make(assignors=bad)


# ---------------------------------------------------------------- with the classic coordinator (offsets)
def wired() -> tuple[ConsumerGroupCoordinator, GroupCoordinator, list[tuple[int, bytes, bytes | None]]]:
    clock, topics = FakeClock(), Topics()
    written: list[tuple[int, bytes, bytes | None]] = []
    classic = GroupCoordinator(
        GroupConfig(num_partitions=5, initial_rebalance_delay_ms=0), clock,
        lambda p, recs: written.extend((p, k, v) for k, v in recs), lambda t, p: t == "t" and p < 6,
    )
    consumer = ConsumerGroupCoordinator(
        ConsumerGroupConfig(), clock, topics,
        classic_group_active=lambda g: g in classic.groups and not classic.groups[g].is_empty,
    )
    classic.modern = consumer
    return consumer, classic, written


def test_offsets_of_a_consumer_group_go_through_the_classic_records() -> None:
    consumer, classic, written = wired()
    join(consumer, "m1")
    code, res = classic.commit_offsets("g", 1, "m1", None, {("t", 0): (42, -1, "")})
    assert (code, res) == (errors.NONE, {("t", 0): errors.NONE})
    assert written and written[-1][1] == rec.encode_offset_key("g", "t", 0)
    assert classic.commit_offsets("g", 0, "m1", None, {("t", 0): (43, -1, "")})[0] == errors.STALE_MEMBER_EPOCH
    assert classic.commit_offsets("g", 1, "zz", None, {("t", 0): (43, -1, "")})[0] == errors.UNKNOWN_MEMBER_ID
    _, found = classic.fetch_offsets("g", [("t", 0)])
    assert found[("t", 0)] is not None and found[("t", 0)].offset == 42
    # the offsets holder does not make it a classic group
    assert classic.list_groups() == [] and classic.describe("g") is None
    assert [g.group_id for g in consumer.list_groups()] == ["g"]
    # a classic member cannot join while the consumer group has members
    box: list[Any] = []
    classic.join_group("g", "", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], False, box.append)
    assert box[0].error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert classic.delete_groups(["g"]) == {"g": errors.NON_EMPTY_GROUP}
    assert classic.delete_offsets("g", [("t", 0)])[1] == {("t", 0): errors.GROUP_SUBSCRIBED_TO_TOPIC}
    hb(consumer, "m1", -1)
    assert classic.delete_groups(["g"]) == {"g": errors.NONE}
    assert "g" not in consumer.groups and "g" not in classic.groups
    assert (written[-1][1], written[-1][2]) == (rec.encode_group_key("g"), None)


def test_consumer_heartbeat_on_an_active_classic_group() -> None:
    consumer, classic, _ = wired()
    box: list[Any] = []
    classic.join_group("g", "", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], False, box.append)
    assert join(consumer, "m1").error_code == errors.GROUP_ID_NOT_FOUND
