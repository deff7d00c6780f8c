"""Consumer groups against a real broker with real clients: partition splitting, member close and crash,
eager vs cooperative rebalancing, static membership, durable offsets across restart and kill -9,
kafka-python + aiokafka in one group, bad group requests, and KIP-848 (group.protocol=consumer)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence

import pytest
from waiting import wait_until

from .broker import Broker, BrokerFactory
from .clients import assert_served, create_topic, make_messages, produce_confluent, unique
from .groups import (
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    TP,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    AioKafkaMember,
    ConfluentMember,
    KafkaPythonMember,
    Member,
    ProcessMember,
    RawGroupClient,
    close_all,
    consumer_protocol_assignment,
    consumer_protocol_metadata,
)

GROUP_BROKER = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1}
SHARED_BROKER_OVERRIDES = GROUP_BROKER
SESSION_TIMEOUT_S = 6.0  # session.timeout.ms of the members (groups.CLASSIC_CONF)


@pytest.fixture
def gb(shared_broker: Broker) -> Iterator[Broker]:
    shared_broker.assert_alive()
    yield shared_broker
    shared_broker.assert_alive()


def all_tps(topic: str, n: int) -> frozenset[TP]:
    return frozenset((topic, p) for p in range(n))


def split_evenly(members: Sequence[Member], topic: str, n: int) -> bool:
    """Each member owns n/len(members) partitions, disjoint, covering all n."""
    owned = [m.assignment for m in members]
    return (
        all(len(a) == n // len(members) for a in owned)
        and frozenset().union(*owned) == all_tps(topic, n)
        and sum(len(a) for a in owned) == n
    )


def covers(members: Sequence[Member], topic: str, n: int) -> bool:
    owned = [m.assignment for m in members]
    return frozenset().union(*owned) == all_tps(topic, n) and sum(len(a) for a in owned) == n


def produce_to(bootstrap: str, topic: str, n: int, tag: str, partition: int | None = None) -> list[tuple[int, int]]:
    return produce_confluent(bootstrap, topic, make_messages(n, tag, value_size=20), partition=partition)


def read_positions(members: Sequence[Member]) -> list[tuple[int, int]]:
    return [(p, o) for m in members for p, o, _ in m.messages]


def assert_read_exactly_once(members: Sequence[Member], expected: Sequence[tuple[int, int]], topic: str,
                             timeout: float = 30.0) -> None:
    """Together the members read every expected (partition, offset) exactly once, each only from the
    partitions it owns."""
    want = sorted(expected)
    wait_until(lambda: len(read_positions(members)) >= len(want), timeout, f"{len(want)} messages read",
               detail=lambda: (len(read_positions(members)), members))
    time.sleep(0.3)  # anything read twice would arrive with the rest
    got = sorted(read_positions(members))
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} messages read twice"
    assert got == want, f"read {len(got)} positions, expected {len(want)}; missing {sorted(set(want) - set(got))[:5]}"
    for m in members:
        parts = {p for p, _, _ in m.messages}
        assert parts <= {p for t, p in m.assignment if t == topic}, f"{m.name} read from partitions it does not own"


# ============================================================================ split, close, crash


@pytest.mark.timeout(120)
def test_three_members_split_close_and_crash(gb: Broker) -> None:
    bs = gb.bootstrap
    topic, group = unique("grp"), unique("g")
    create_topic(bs, topic, 6)
    conf: dict[str, object] = {"partition.assignment.strategy": "range"}
    a = ConfluentMember(bs, group, [topic], "a", conf)
    b = ConfluentMember(bs, group, [topic], "b", conf)
    c = ProcessMember(bs, group, topic, "c", conf)
    members: list[Member] = [a, b, c]
    try:
        wait_until(lambda: split_evenly(members, topic, 6), 30, "2 partitions each", detail=lambda: members)
        acks = produce_to(bs, topic, 600, "split")
        assert_read_exactly_once(members, acks, topic)
        assert not a.errors and not b.errors, (a.errors, b.errors)

        # a clean close (LeaveGroup): the other two take over within seconds
        a.close()
        t0 = time.monotonic()
        wait_until(lambda: split_evenly([b, c], topic, 6), 10, "b and c own all 6", detail=lambda: members)
        took = time.monotonic() - t0
        assert took < SESSION_TIMEOUT_S, f"took {took:.1f}s: the leave was not acted on, the session expired"

        # a crash (SIGKILL, no LeaveGroup): b gets c's partitions once c's session times out
        assert len(c.assignment) == 3
        c.kill()
        t0 = time.monotonic()
        wait_until(lambda: b.assignment == all_tps(topic, 6), 30, "b owns all 6 after c's crash", detail=lambda: members)
        t1 = time.monotonic()
        assert t1 - t0 >= SESSION_TIMEOUT_S - 2.0, f"c's partitions moved after {t1 - t0:.1f}s, before its session timed out"
        # and b reads what is produced to c's old partitions
        before = len(b.messages)
        produce_to(bs, topic, 60, "after-crash")
        wait_until(lambda: len(b.messages) - before >= 60, 20, "b reads all new messages")
    finally:
        close_all(members)


# ============================================================================ eager vs cooperative


@pytest.mark.timeout(90)
@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_join_revokes_incrementally_or_eagerly(gb: Broker, strategy: str) -> None:
    bs = gb.bootstrap
    topic, group = unique("coop"), unique("g")
    create_topic(bs, topic, 6)
    conf: dict[str, object] = {"partition.assignment.strategy": strategy}
    a = ConfluentMember(bs, group, [topic], "a", conf)
    members: list[Member] = [a]
    try:
        wait_until(lambda: a.assignment == all_tps(topic, 6), 30, "a owns all 6", detail=lambda: a.events)
        mark = len(a.events)
        b = ConfluentMember(bs, group, [topic], "b", conf)
        members.append(b)
        wait_until(lambda: split_evenly([a, b], topic, 6), 30, "3 partitions each", detail=lambda: members)
        time.sleep(0.5)  # let any trailing callback land
        assert split_evenly([a, b], topic, 6)
        new = [e for e in a.events[mark:] if e[1]]
        revoked = frozenset().union(*(tps for kind, tps in new if kind == "revoke")) if new else frozenset()
        assigned = [tps for kind, tps in new if kind == "assign"]
        assert not [e for e in new if e[0] == "lost"], new
        if strategy == "cooperative-sticky":
            # only the partitions that moved to b are revoked; a keeps the rest without interruption
            assert revoked == b.assignment, f"a revoked {sorted(revoked)}, b got {sorted(b.assignment)}: {new}"
            assert not (revoked & a.assignment)
            assert assigned == [], f"a was re-assigned partitions it kept: {new}"
        else:
            # eager: everything is revoked, then a gets its share back
            assert [kind for kind, _ in new] == ["revoke", "assign"], new
            assert new[0][1] == all_tps(topic, 6)
            assert new[1][1] == a.assignment
    finally:
        close_all(members)


# ============================================================================ static membership


@pytest.mark.timeout(90)
def test_static_member_restart_keeps_partitions_without_rebalance(gb: Broker) -> None:
    bs = gb.bootstrap
    topic, group = unique("static"), unique("g")
    create_topic(bs, topic, 6)
    conf: dict[str, object] = {"partition.assignment.strategy": "range"}
    b = ConfluentMember(bs, group, [topic], "b", conf)  # first: the group leader
    members: list[Member] = [b]
    try:
        wait_until(lambda: b.assignment == all_tps(topic, 6), 30, "b owns all 6")
        static = {**conf, "group.instance.id": f"static-{uuid.uuid4().hex[:6]}"}
        a = ProcessMember(bs, group, topic, "a", static)
        members.append(a)
        wait_until(lambda: split_evenly([a, b], topic, 6), 30, "3 partitions each", detail=lambda: members)
        time.sleep(0.5)
        a_parts, b_parts = a.assignment, b.assignment
        b_events, b_changes = list(b.events), b.assignment_changes

        a.kill()  # no LeaveGroup (static members never send one on close either)
        t_kill = time.monotonic()
        a2 = ProcessMember(bs, group, topic, "a2", static)
        members.append(a2)
        wait_until(lambda: a2.assignment == a_parts, SESSION_TIMEOUT_S + 10,
                   "the restarted member gets its partitions back", detail=lambda: (a2.events, b.events))
        t_back = time.monotonic()
        assert t_back - t_kill < SESSION_TIMEOUT_S, f"back only after {t_back - t_kill:.1f}s"
        # past the old session's timeout, b has seen no rebalance at all
        wait_until(lambda: time.monotonic() > t_kill + SESSION_TIMEOUT_S + 2.0, SESSION_TIMEOUT_S + 5,
                   "the old session's timeout to pass")
        assert b.events == b_events, f"b saw a rebalance: {b.events[len(b_events):]}"
        assert b.assignment == b_parts and b.assignment_changes == b_changes
        assert a2.assignment == a_parts
        assert [tps for kind, tps in a2.events if tps] == [a_parts], a2.events
    finally:
        close_all(members)


# ============================================================================ durable offsets


@pytest.mark.timeout(120)
def test_committed_offsets_survive_restart_and_kill9(make_broker: BrokerFactory) -> None:
    broker = make_broker(GROUP_BROKER)
    bs = broker.bootstrap
    topic, group = unique("durable"), unique("g")
    create_topic(bs, topic, 3)
    tps = [(topic, p) for p in range(3)]
    conf: dict[str, object] = {"enable.auto.commit": False, "partition.assignment.strategy": "range"}

    def stage(tag: str) -> list[tuple[int, int]]:
        """Produce 10 messages to each partition, read them with a new member, commit, close; return
        what that member read (it must be exactly the new messages)."""
        acks = [pos for p in range(3) for pos in produce_to(bs, topic, 10, f"{tag}-{p}", partition=p)]
        m = ConfluentMember(bs, group, [topic], tag, conf)
        try:
            wait_until(lambda: len(m.messages) >= 30, 30, f"{tag} reads 30 messages",
                       detail=lambda: (len(m.messages), m))
            time.sleep(0.3)
            m.commit()
            got = sorted((p, o) for p, o, _ in m.messages)
        finally:
            m.close()
        assert got == sorted(acks), f"{tag}: expected exactly the 30 new messages, got {len(got)}: {got[:10]}"
        return got

    def committed() -> dict[TP, int]:
        with RawGroupClient(bs) as rc:
            return rc.fetch_offsets(group, tps)

    stage("one")
    assert committed() == {tp: 10 for tp in tps}
    broker.restart()
    assert committed() == {tp: 10 for tp in tps}, "committed offsets lost by a clean restart"
    stage("two")  # resumes at 10: nothing twice, nothing skipped
    assert committed() == {tp: 20 for tp in tps}
    broker.kill()
    broker.start()
    assert committed() == {tp: 20 for tp in tps}, "committed offsets lost by kill -9"
    stage("three")
    assert committed() == {tp: 30 for tp in tps}


# ============================================================================ kafka-python + aiokafka


@pytest.mark.timeout(90)
@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_kafka_python_and_aiokafka_share_a_group(gb: Broker, assignor: str) -> None:
    bs = gb.bootstrap
    topic, group = unique("mixed"), unique("g")
    create_topic(bs, topic, 6)
    kp = KafkaPythonMember(bs, group, topic, "kp", assignor)
    members: list[Member] = [kp]
    try:
        aio = AioKafkaMember(bs, group, topic, "aio", assignor)
        members.append(aio)
        wait_until(lambda: split_evenly(members, topic, 6), 45, "3 partitions each",
                   detail=lambda: (members, kp.errors, aio.errors, gb.log_tail()))
        acks = produce_to(bs, topic, 300, "mixed")
        assert_read_exactly_once(members, acks, topic)
        assert not kp.errors and not aio.errors, (kp.errors, aio.errors)
    finally:
        close_all(members)


# ============================================================================ bad input


@pytest.mark.timeout(60)
def test_bad_group_requests_get_kafka_errors(gb: Broker) -> None:
    bs = gb.bootstrap
    topic, group = unique("bad"), unique("g")
    create_topic(bs, topic, 1)
    meta = consumer_protocol_metadata([topic])
    with RawGroupClient(bs) as rc, RawGroupClient(bs) as other:
        err, host, port = rc.find_coordinator(group)
        assert (err, host, port) == (NONE, gb.host, gb.port)

        r = rc.join(group, topics=[topic])
        assert int(r.error_code) == MEMBER_ID_REQUIRED and r.member_id, r
        r = rc.join(group, member_id=r.member_id, topics=[topic])
        assert int(r.error_code) == NONE, r
        gen, mid = int(r.generation_id), r.member_id
        assert r.leader == mid and [m.member_id for m in r.members] == [mid]
        mine = consumer_protocol_assignment({topic: [0]})
        s = rc.sync(group, gen, mid, {mid: mine})
        assert (int(s.error_code), s.assignment) == (NONE, mine)
        assert rc.heartbeat(group, gen, mid) == NONE

        def still_served() -> None:
            gb.assert_alive()
            assert other.heartbeat(group, gen, mid) == NONE

        assert rc.heartbeat(group, gen, "no-such-member") == UNKNOWN_MEMBER_ID
        still_served()
        assert rc.heartbeat(group, gen - 1, mid) == ILLEGAL_GENERATION
        assert rc.heartbeat(group, gen + 1, mid) == ILLEGAL_GENERATION
        still_served()

        # another protocol type (or no common protocol) than the group's members
        r = rc.join_with_member_id(group, protocol_type="connect", protocols=[("default", b"\x00")])
        assert int(r.error_code) == INCONSISTENT_GROUP_PROTOCOL, r
        r = rc.join_with_member_id(group, protocols=[("no-such-assignor", meta)])
        assert int(r.error_code) == INCONSISTENT_GROUP_PROTOCOL, r
        still_served()

        # session timeouts outside [group.min.session.timeout.ms, group.max.session.timeout.ms]
        for ms in (1000, 5999, 1_800_001):
            r = rc.join(unique("g"), session_timeout_ms=ms, topics=[topic])
            assert int(r.error_code) == INVALID_SESSION_TIMEOUT, (ms, r)
        still_served()

        # commits for a missing topic and a missing partition (a simple group: generation -1)
        missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"
        assert rc.commit(unique("simple"), {(missing, 0): 5}) == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert rc.commit(unique("simple"), {(topic, 7): 5}) == {(topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
        # ... and by a member of a live group: Kafka rejects unknown topics before it looks at the group,
        # so the other partitions of the same request are still committed
        assert rc.commit(group, {(missing, 0): 5, (topic, 0): 1}, generation=gen, member_id=mid) == {
            (missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (topic, 0): NONE}
        assert rc.fetch_offsets(group, [(topic, 0)]) == {(topic, 0): 1}
        still_served()

        # a group id of 10,000 characters: answered (with an error where Kafka has one), connection intact
        huge = "g" * 10_000
        with RawGroupClient(bs) as hc:
            err, _, _ = hc.find_coordinator(huge)
            r = hc.join(huge, topics=[topic])
            assert int(r.error_code) != NONE, r
            assert hc.heartbeat(huge, 1, "no-such-member") != NONE
            hc.commit(huge, {(topic, 0): 1})
            assert hc.heartbeat(group, gen, mid) == NONE  # same connection still serves
        still_served()
    assert_served(bs)


@pytest.mark.timeout(60)
def test_offset_commit_errors_follow_kafkas_order(gb: Broker) -> None:
    """Kafka answers a missing topic with UNKNOWN_TOPIC_OR_PARTITION before it looks at the group, then
    validates member and generation, and only then refuses commits during CompletingRebalance."""
    bs = gb.bootstrap
    topic, group = unique("order"), unique("g")
    create_topic(bs, topic, 1)
    missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    with RawGroupClient(bs) as rc:
        r = rc.join_with_member_id(group, topics=[topic])
        assert int(r.error_code) == NONE, r
        gen, mid = int(r.generation_id), r.member_id
        # joined, not synced: CompletingRebalance
        cases = [
            ("simple commit", -1, "", UNKNOWN_MEMBER_ID),
            ("unknown member", gen, "no-such-member", UNKNOWN_MEMBER_ID),
            ("stale generation", gen + 5, mid, ILLEGAL_GENERATION),
            ("the member itself", gen, mid, REBALANCE_IN_PROGRESS),
        ]
        for what, g, m, want in cases:
            got = rc.commit(group, {(missing, 0): 1, (topic, 0): 1}, generation=g, member_id=m)
            assert got == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (topic, 0): want}, f"CompletingRebalance, {what}"
        s = rc.sync(group, gen, mid, {mid: consumer_protocol_assignment({topic: [0]})})
        assert int(s.error_code) == NONE
        # Stable
        cases[-1] = ("the member itself", gen, mid, NONE)
        for what, g, m, want in cases:
            got = rc.commit(group, {(missing, 0): 1, (topic, 0): 1}, generation=g, member_id=m)
            assert got == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (topic, 0): want}, f"Stable, {what}"


# ============================================================================ KIP-848


@pytest.mark.kip848
@pytest.mark.timeout(120)
def test_kip848_consumer_protocol_splits_and_rebalances_incrementally(gb: Broker) -> None:
    bs = gb.bootstrap
    topic, group = unique("kip848"), unique("g")
    create_topic(bs, topic, 6)
    conf: dict[str, object] = {"group.protocol": "consumer"}
    members: list[Member] = []
    try:
        for name in ("a", "b", "c"):
            members.append(ConfluentMember(bs, group, [topic], name, conf, classic=False))
        a, b, c = members
        wait_until(lambda: split_evenly(members, topic, 6), 60, "2 partitions each",
                   detail=lambda: (members, [m.errors for m in members]))
        acks = produce_to(bs, topic, 300, "kip848")
        assert_read_exactly_once(members, acks, topic)
        marks = {m.name: len(m.events) for m in (a, b)}
        kept = {m.name: m.assignment for m in (a, b)}
        freed = c.assignment
        assert isinstance(c, ConfluentMember)
        c.close()
        wait_until(lambda: split_evenly([a, b], topic, 6), 60, "a and b own all 6", detail=lambda: members)
        time.sleep(0.5)
        for m in (a, b):
            new = [e for e in m.events[marks[m.name]:] if e[1]]
            assert not [e for e in new if e[0] in ("revoke", "lost")], f"{m.name} lost partitions it kept: {new}"
            gained = frozenset().union(*(tps for _, tps in new)) if new else frozenset()
            assert gained == m.assignment - kept[m.name] and gained <= freed, (m.name, new)
    finally:
        close_all(members)
