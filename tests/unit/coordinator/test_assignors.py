from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from odradek.coordinator.group.assignors import MemberSpec, range_assign, uniform_assign

Result = dict[str, dict[str, set[int]]]


def specs(members: Mapping[str, set[str]], current: Result | None = None) -> dict[str, MemberSpec[str]]:
    current = current or {}
    return {m: MemberSpec(frozenset(subs), current.get(m, {})) for m, subs in members.items()}


def counts(result: Result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def flat(result: Result) -> list[tuple[str, int]]:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def check_complete(result: Result, topics: Mapping[str, int], members: Mapping[str, set[str]]) -> None:
    """Every partition of a subscribed topic is assigned exactly once, to a subscriber."""
    owned = flat(result)
    assert len(owned) == len(set(owned)), "a partition is assigned twice"
    subscribed = {t for subs in members.values() for t in subs if t in topics}
    assert set(owned) == {(t, p) for t in subscribed for p in range(topics[t])}
    for m, a in result.items():
        assert set(a) <= members[m]


def moved(before: Result, after: Result) -> int:
    """How many partitions a member that exists in both lost."""
    n = 0
    for m, a in before.items():
        if m in after:
            for t, ps in a.items():
                n += len(ps - after[m].get(t, set()))
    return n


# ---------------------------------------------------------------- uniform
def test_uniform_balanced_single_topic() -> None:
    members = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    r = uniform_assign(specs(members), {"t": 6})
    check_complete(r, {"t": 6}, members)
    assert sorted(counts(r).values()) == [2, 2, 2]


@pytest.mark.parametrize("n_members,parts", [(1, 5), (2, 7), (3, 10), (4, 3), (7, 50), (10, 10)])
def test_uniform_balanced_across_topics(n_members: int, parts: int) -> None:
    topics = {"x": parts, "y": parts // 2 + 1, "z": 1}
    members = {f"m{i}": set(topics) for i in range(n_members)}
    r = uniform_assign(specs(members), topics)
    check_complete(r, topics, members)
    c = counts(r)
    assert max(c.values()) - min(c.values()) <= 1


def test_uniform_more_members_than_partitions() -> None:
    members = {f"m{i}": {"t"} for i in range(5)}
    r = uniform_assign(specs(members), {"t": 3})
    check_complete(r, {"t": 3}, members)
    assert sorted(counts(r).values()) == [0, 0, 1, 1, 1]


def test_uniform_sticky_when_a_member_joins() -> None:
    topics = {"t": 6}
    before = uniform_assign(specs({"a": {"t"}, "b": {"t"}}), topics)
    members = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    after = uniform_assign(specs(members, before), topics)
    check_complete(after, topics, members)
    assert sorted(counts(after).values()) == [2, 2, 2]
    # a and b each give up exactly one partition, and keep the other two
    assert moved(before, after) == 2
    for m in ("a", "b"):
        assert len(after[m]["t"] & before[m]["t"]) == 2


def test_uniform_sticky_when_a_member_leaves() -> None:
    topics = {"t": 6}
    members3 = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    before = uniform_assign(specs(members3), topics)
    members2 = {"a": {"t"}, "b": {"t"}}
    after = uniform_assign(specs(members2, {m: before[m] for m in members2}), topics)
    check_complete(after, topics, members2)
    assert moved(before, after) == 0  # the survivors lose nothing, they take c's partitions
    assert sorted(counts(after).values()) == [3, 3]


def test_uniform_randomised_stickiness_and_balance() -> None:
    rnd = random.Random(7)
    topics = {"a": 12, "b": 5, "c": 7}
    current: Result = {}
    names = [f"m{i}" for i in range(8)]
    alive: set[str] = set(names[:3])
    for _ in range(40):
        if rnd.random() < 0.5 and len(alive) > 1:
            alive.discard(rnd.choice(sorted(alive)))
        else:
            alive.add(rnd.choice(names))
        members = {m: set(topics) for m in alive}
        nxt = uniform_assign(specs(members, {m: current[m] for m in alive if m in current}), topics)
        check_complete(nxt, topics, members)
        c = counts(nxt)
        assert max(c.values()) - min(c.values()) <= 1
        # a member keeps at least min(what it had, its new share)
        for m in alive & set(current):
            had = sum(len(ps) for ps in current[m].values())
            kept = sum(len(ps & nxt[m].get(t, set())) for t, ps in current[m].items())
            assert kept >= min(had, min(c.values()))
        current = nxt


def test_uniform_drops_partitions_that_no_longer_exist_or_are_unsubscribed() -> None:
    current: Result = {"a": {"t": {0, 1, 2, 3}, "gone": {0}}, "b": {"t": {4, 5}}}
    members = {"a": {"t"}, "b": {"t", "u"}}
    topics = {"t": 4, "u": 2}  # t shrank (a re-created topic), gone deleted, u new
    r = uniform_assign(specs(members, current), topics)
    check_complete(r, topics, members)
    assert "gone" not in r["a"]
    c = counts(r)
    assert max(c.values()) - min(c.values()) <= 1


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {"a": {"t1"}, "b": {"t1", "t2"}, "c": {"t2"}}
    topics = {"t1": 4, "t2": 4}
    r = uniform_assign(specs(members), topics)
    check_complete(r, topics, members)
    assert sorted(counts(r).values()) == [2, 3, 3]


def test_uniform_no_members_or_topics() -> None:
    assert uniform_assign(specs({}), {"t": 3}) == {}
    assert uniform_assign(specs({"a": {"t"}}), {}) == {"a": {}}


# ---------------------------------------------------------------- range
def test_range_contiguous_ranges_in_member_order() -> None:
    members = {"b": {"t"}, "a": {"t"}, "c": {"t"}}
    r = range_assign(specs(members), {"t": 7})
    assert r == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}, "c": {"t": {5, 6}}}


def test_range_co_partitions_topics() -> None:
    members = {"a": {"x", "y"}, "b": {"x", "y"}}
    r = range_assign(specs(members), {"x": 4, "y": 4})
    assert r["a"] == {"x": {0, 1}, "y": {0, 1}}
    assert r["b"] == {"x": {2, 3}, "y": {2, 3}}


def test_range_per_topic_subscribers_and_more_members_than_partitions() -> None:
    members = {"a": {"x"}, "b": {"x", "y"}, "c": {"y"}, "d": {"y"}}
    topics = {"x": 3, "y": 2}
    r = range_assign(specs(members), topics)
    check_complete(r, topics, members)
    assert r["a"] == {"x": {0, 1}}
    assert r["b"] == {"x": {2}, "y": {0}}
    assert r["c"] == {"y": {1}}
    assert r["d"] == {}
