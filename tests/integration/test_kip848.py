"""The consumer group protocol of KIP-848 against a real broker: librdkafka consumers with
``group.protocol=consumer`` (ConsumerGroupHeartbeat v1, OffsetCommit/OffsetFetch v9), the admin
APIs on such groups, and ConsumerGroupHeartbeat's answers to bad requests."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .broker import Broker, BrokerFactory
from .clients import create_topic, unique

HEARTBEAT_MS = 500
Event = tuple[str, frozenset[int]]


class Member:
    """A confluent-kafka consumer (group.protocol=consumer) polling in its own thread; it records
    its rebalance callbacks, its current assignment and the messages it read."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, **conf: object) -> None:
        self.name = name
        self.events: list[Event] = []
        self.assignment: set[int] = set()
        self.messages: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._calls: queue.Queue[tuple[Callable[[Consumer], Any], Future[Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.queue.backoff.ms": 10,
            "topic.metadata.refresh.interval.ms": 2000,
            **conf,
        }
        self._topic = topic
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = Consumer(self._conf)

        def on_assign(_c: Consumer, parts: list[TopicPartition]) -> None:
            with self._lock:
                self.events.append(("assign", frozenset(p.partition for p in parts)))
                self.assignment |= {p.partition for p in parts}

        def on_revoke(_c: Consumer, parts: list[TopicPartition]) -> None:
            with self._lock:
                self.events.append(("revoke", frozenset(p.partition for p in parts)))
                self.assignment -= {p.partition for p in parts}

        def on_lost(_c: Consumer, parts: list[TopicPartition]) -> None:
            with self._lock:
                self.events.append(("lost", frozenset(p.partition for p in parts)))
                self.assignment -= {p.partition for p in parts}

        c.subscribe([self._topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        try:
            while not self._stop.is_set():
                while not self._calls.empty():
                    fn, fut = self._calls.get()
                    try:
                        fut.set_result(fn(c))
                    except Exception as e:
                        fut.set_exception(e)
                m = c.poll(0.05)
                if m is None:
                    continue
                if m.error():
                    with self._lock:
                        self.errors.append(str(m.error()))
                    continue
                part, off, value = m.partition(), m.offset(), m.value()
                assert part is not None and off is not None and value is not None
                with self._lock:
                    self.messages.append((part, off, value))
        finally:
            c.close()

    def call(self, fn: Callable[[Consumer], Any], timeout: float = 15.0) -> Any:
        fut: Future[Any] = Future()
        self._calls.put((fn, fut))
        return fut.result(timeout)

    def commit(self) -> None:
        self.call(lambda c: c.commit(asynchronous=False))

    def close(self, timeout: float = 20.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close"

    def snapshot(self) -> tuple[set[int], list[Event], list[tuple[int, int, bytes]]]:
        with self._lock:
            return set(self.assignment), list(self.events), list(self.messages)


@contextlib.contextmanager
def members(*ms: Member) -> Iterator[list[Member]]:
    try:
        yield list(ms)
    finally:
        for m in ms:
            with contextlib.suppress(AssertionError):
                m.close()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int, tag: str) -> set[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for part in range(partitions):
        for i in range(per_partition):
            v = f"{tag}-{part}-{i}".encode()
            values.add(v)
            p.produce(topic, v, partition=part)
    assert p.flush(20) == 0
    return values


def all_read(ms: list[Member]) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    for m in ms:
        out += m.snapshot()[2]
    return out


@pytest.fixture
def kip848_broker(make_broker: BrokerFactory) -> Broker:
    return make_broker(group_consumer_heartbeat_interval_ms=HEARTBEAT_MS, group_consumer_session_timeout_ms=6000)


def test_three_members_split_six_partitions_and_rebalance_incrementally(kip848_broker: Broker) -> None:
    b = kip848_broker
    topic, group = unique("kip848"), unique("g848")
    create_topic(b.bootstrap, topic, 6)
    with members(*(Member(b.bootstrap, group, topic, f"c{i}") for i in range(3))) as ms:
        wait_until(lambda: sorted(len(m.snapshot()[0]) for m in ms) == [2, 2, 2], 30, "a 2/2/2 split",
                   detail=lambda: [sorted(m.snapshot()[0]) for m in ms])
        owners = {p: m.name for m in ms for p in m.snapshot()[0]}
        assert sorted(owners) == list(range(6))

        # the group as the admin APIs see it (ListGroups v5, ConsumerGroupDescribe)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        listed = admin.list_consumer_groups().result(timeout=15)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER
        wait_until(lambda: str(
            admin.describe_consumer_groups([group])[group].result(timeout=15).state).endswith("STABLE"),
                   15, "the group to be stable")
        desc = admin.describe_consumer_groups([group])[group].result(timeout=15)
        assert desc.type == ConsumerGroupType.CONSUMER
        assert sorted(m.client_id for m in desc.members) == ["c0", "c1", "c2"]
        described = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in desc.members}
        assert described == {m.name: m.snapshot()[0] for m in ms}

        # every message read exactly once, by the owner of its partition
        sent = produce(b.bootstrap, topic, 50, 6, "a")
        wait_until(lambda: len(all_read(ms)) >= 300, 30, "300 messages", detail=lambda: len(all_read(ms)))
        time.sleep(0.3)  # any duplicate would show up now
        got = all_read(ms)
        assert sorted(v for _, _, v in got) == sorted(sent)
        for m in ms:
            assert {p for p, _, _ in m.snapshot()[2]} == m.snapshot()[0]
        for m in ms:
            m.commit()

        # c2 leaves: the other two take its partitions, keeping their own (no revocation)
        leaver, stay = ms[2], ms[:2]
        left = leaver.snapshot()[0]
        before = {m.name: (m.snapshot()[0], len(m.snapshot()[1])) for m in stay}
        t0 = time.monotonic()
        leaver.close()
        wait_until(lambda: sorted(p for m in stay for p in m.snapshot()[0]) == list(range(6)), 20,
                   "the two remaining members to own all 6 partitions",
                   detail=lambda: [sorted(m.snapshot()[0]) for m in stay])
        assert time.monotonic() - t0 < 10
        for m in stay:
            own, n_events = before[m.name]
            now, events, _ = m.snapshot()
            new_events = events[n_events:]
            assert all(kind == "assign" for kind, _ in new_events), f"{m.name} saw {new_events}"
            assert own <= now and now - own <= left
        # ... and continue from the committed offsets: the second batch only, exactly once
        sent2 = produce(b.bootstrap, topic, 20, 6, "b")

        def second() -> list[bytes]:
            return [v for m in stay for _, _, v in m.snapshot()[2] if v.startswith(b"b-")]

        wait_until(lambda: len(second()) >= 120, 30, "the second batch", detail=lambda: len(second()))
        time.sleep(0.3)
        assert sorted(second()) == sorted(sent2)
        assert sorted(v for _, _, v in all_read(ms) if v.startswith(b"a-")) == sorted(sent)


def test_committed_offsets_survive_a_broker_restart(kip848_broker: Broker) -> None:
    b = kip848_broker
    topic, group = unique("kip848r"), unique("g848r")
    create_topic(b.bootstrap, topic, 6)
    first = produce(b.bootstrap, topic, 10, 6, "a")
    with members(Member(b.bootstrap, group, topic, "r0")) as ms:
        wait_until(lambda: len(all_read(ms)) >= 60, 30, "the first batch", detail=lambda: len(all_read(ms)))
        assert sorted(v for _, _, v in all_read(ms)) == sorted(first)
        for m in ms:
            m.commit()
    def committed() -> dict[int, int]:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # a fresh one: no reconnect backoff
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
        return {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}

    assert committed() == {p: 10 for p in range(6)}
    b.restart()
    assert committed() == {p: 10 for p in range(6)}
    second = produce(b.bootstrap, topic, 5, 6, "b")
    with members(Member(b.bootstrap, group, topic, "r2")) as ms2:
        wait_until(lambda: len(all_read(ms2)) >= 30, 30, "the second batch",
                   detail=lambda: len(all_read(ms2)))
        time.sleep(0.3)
        got = all_read(ms2)
        assert sorted(v for _, _, v in got) == sorted(second)
        assert min(off for _, off, _ in got) == 10


def test_member_that_stops_heartbeating_is_fenced(kip848_broker: Broker) -> None:
    from odradek.client.wire import WireClient

    b = kip848_broker
    topic, group = unique("kip848s"), unique("g848s")
    create_topic(b.bootstrap, topic, 4)
    with WireClient(b.bootstrap, timeout=15) as w:
        silent = heartbeat(w, group, str(uuid.uuid4()), 0, topics=[topic], owned=[])
        assert int(silent.error_code) == 0 and silent.member_epoch == 1
        assert len(silent.assignment.topic_partitions[0].partitions) == 4
    with members(Member(b.bootstrap, group, topic, "s1")) as ms:
        # s1 gets nothing until the silent member's session (6 s) expires; then everything
        wait_until(lambda: len(ms[0].snapshot()[0]) == 4, 20, "the silent member's partitions",
                   detail=lambda: ms[0].snapshot())


def heartbeat(w: Any, group: str, member_id: str, epoch: int, *, topics: list[str] | None = None,
              owned: list[Any] | None = None, rebalance_ms: int = 30000, assignor: str | None = None,
              version: int = 1) -> Any:
    from kio.schema.types import GroupId
    from kio.static.primitive import i32

    def send() -> Any:
        return w.request(
            68, version, group_id=GroupId(group), member_id=member_id, member_epoch=i32(epoch),
            rebalance_timeout=timedelta(milliseconds=rebalance_ms), subscribed_topic_names=topics,
            server_assignor=assignor, topic_partitions=owned,
        )

    r = send()
    if int(r.error_code) in (14, 15, 16):  # coordinator loading / not available / not this broker
        find_coordinator(w, group)  # as a client does: find it, then heartbeat again
        r = send()
    return r


def find_coordinator(w: Any, group: str, timeout: float = 20.0) -> None:
    """FindCoordinator until the group has one (the first call creates __consumer_offsets)."""
    deadline = time.monotonic() + timeout
    while True:
        r = w.request(10, 4, key_type=0, coordinator_keys=(group,))
        if int(r.coordinators[0].error_code) == 0:
            return
        assert time.monotonic() < deadline, f"no coordinator for {group}: {r}"
        time.sleep(0.1)


def test_bad_heartbeats_get_kafkas_errors(kip848_broker: Broker) -> None:
    from odradek.client.wire import WireClient

    b = kip848_broker
    group = unique("g848b")
    with WireClient(b.bootstrap, timeout=15) as w:
        assert int(heartbeat(w, group, "m1", 0, topics=["t"], owned=None).error_code) == 42  # INVALID_REQUEST
        assert int(heartbeat(w, group, "m1", 0, topics=None, owned=[]).error_code) == 42
        assert int(heartbeat(w, group, "", 0, topics=["t"], owned=[]).error_code) == 42  # v1: client's own id
        assert int(heartbeat(w, group, "m1", 0, topics=["t"], owned=[], assignor="sticky").error_code) == 112
        assert int(heartbeat(w, group, "m1", 5, topics=["t"]).error_code) == 25  # UNKNOWN_MEMBER_ID
        r = heartbeat(w, group, "", 0, topics=["t"], owned=[], version=0)  # v0: the broker names the member
        assert int(r.error_code) == 0 and r.member_id and r.member_epoch == 1
        assert int(heartbeat(w, group, r.member_id, 2, version=0).error_code) == 110  # FENCED_MEMBER_EPOCH
        assert int(heartbeat(w, group, r.member_id, -1, version=0).error_code) == 0
        # a group id of 10,000 characters is just a group id
        long_id = heartbeat(w, "x" * 10_000, "m2", 0, topics=["t"], owned=[])
        assert int(long_id.error_code) == 0
        assert int(heartbeat(w, "x" * 10_000, "m2", -1).error_code) == 0


def test_regex_subscription_follows_new_topics(kip848_broker: Broker) -> None:
    b = kip848_broker
    prefix = unique("rx")
    create_topic(b.bootstrap, f"{prefix}-a", 2)
    create_topic(b.bootstrap, f"{prefix}-b", 1)
    create_topic(b.bootstrap, unique("other"), 2)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("grx"), "group.protocol": "consumer",
                  "topic.metadata.refresh.interval.ms": 1000})
    try:
        c.subscribe([f"^{prefix}-.*"])

        def owned() -> set[tuple[str, int]]:
            c.poll(0.05)
            return {(tp.topic, tp.partition) for tp in c.assignment()}

        wait_until(lambda: owned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1),
                                                               (f"{prefix}-b", 0)},
                   20, "the matching topics", detail=owned)
        create_topic(b.bootstrap, f"{prefix}-c", 1)
        wait_until(lambda: (f"{prefix}-c", 0) in owned(), 20, "the new topic", detail=owned)
    finally:
        c.close()


def test_static_member_restart_keeps_its_partitions(kip848_broker: Broker) -> None:
    b = kip848_broker
    topic, group = unique("kip848st"), unique("g848st")
    create_topic(b.bootstrap, topic, 4)
    first = Member(b.bootstrap, group, topic, "st0", **{"group.instance.id": "instance-0"})
    other = Member(b.bootstrap, group, topic, "st1", **{"group.instance.id": "instance-1"})
    with members(first, other):
        wait_until(lambda: sorted(len(m.snapshot()[0]) for m in (first, other)) == [2, 2], 30, "a 2/2 split",
                   detail=lambda: [sorted(m.snapshot()[0]) for m in (first, other)])
        mine = first.snapshot()[0]
        n_events = len(other.snapshot()[1])
        first.close()  # leaves with epoch -2: its partitions stay reserved for it
        time.sleep(2 * HEARTBEAT_MS / 1000)
        again = Member(b.bootstrap, group, topic, "st0b", **{"group.instance.id": "instance-0"})
        with members(again):
            wait_until(lambda: again.snapshot()[0] == mine, 20, "the same partitions back",
                       detail=lambda: again.snapshot())
            time.sleep(2 * HEARTBEAT_MS / 1000)
            assert other.snapshot()[1][n_events:] == [], "the other member saw a rebalance"


def test_list_describe_and_delete_a_consumer_group(kip848_broker: Broker) -> None:
    from kio.schema.types import GroupId

    from odradek.client.wire import WireClient
    from odradek.coordinator.group.consumer_protocol import assignment_partitions, subscription_topics

    b = kip848_broker
    topic, group = unique("kip848l"), unique("g848l")
    create_topic(b.bootstrap, topic, 3)
    with WireClient(b.bootstrap, timeout=15) as w:
        r = heartbeat(w, group, "m1", 0, topics=[topic], owned=[])
        assert int(r.error_code) == 0
        listed = w.request(16, 5, states_filter=(), types_filter=("consumer",))
        assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups] == [
            (group, "Stable", "consumer", "consumer")
        ]
        assert not [g for g in w.request(16, 5, states_filter=(), types_filter=("classic",)).groups if g.group_id == group]
        d = w.request(15, 5, groups=(GroupId(group),), include_authorized_operations=False).groups[0]
        assert (int(d.error_code), d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "uniform")
        assert [m.member_id for m in d.members] == ["m1"]
        assert subscription_topics(d.members[0].member_metadata) == {topic}
        assert assignment_partitions(d.members[0].member_assignment) == {topic: [0, 1, 2]}
        cd = w.request(69, 1, group_ids=(GroupId(group), GroupId("nope")), include_authorized_operations=False)
        assert (cd.groups[0].group_epoch, cd.groups[0].assignment_epoch, cd.groups[0].assignor_name) == (1, 1, "uniform")
        assert [sorted(tp.partitions) for tp in cd.groups[0].members[0].assignment.topic_partitions] == [[0, 1, 2]]
        assert int(cd.groups[1].error_code) == 69  # GROUP_ID_NOT_FOUND
        deleted = w.request(42, 2, groups_names=(GroupId(group),))
        assert int(deleted.results[0].error_code) == 68  # NON_EMPTY_GROUP
        assert int(heartbeat(w, group, "m1", -1).error_code) == 0
        deleted = w.request(42, 2, groups_names=(GroupId(group),))
        assert int(deleted.results[0].error_code) == 0
        assert not [g for g in w.request(16, 5, states_filter=(), types_filter=()).groups if g.group_id == group]


def group_type(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).type


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_classic_group_upgrades_and_downgrades_online(kip848_broker: Broker, strategy: str) -> None:
    """KIP-848's online migration (group.consumer.migration.policy=bidirectional): a classic
    consumer keeps its group while a consumer-protocol member joins (the group becomes a consumer
    group and the two share the partitions) and leaves (a classic group again)."""
    b = kip848_broker
    topic, group = unique("kip848m"), unique("g848m")
    create_topic(b.bootstrap, topic, 10)
    classic = Member(b.bootstrap, group, topic, "classic", **{
        "group.protocol": "classic", "partition.assignment.strategy": strategy,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
    })
    with members(classic):
        wait_until(lambda: classic.snapshot()[0] == set(range(10)), 30, "the classic member owns everything",
                   detail=lambda: classic.snapshot()[:2])
        assert group_type(b.bootstrap, group) == ConsumerGroupType.CLASSIC
        modern = Member(b.bootstrap, group, topic, "modern")
        with members(modern):
            def split() -> bool:
                a, m = classic.snapshot()[0], modern.snapshot()[0]
                return len(a) == 5 and len(m) == 5 and not a & m
            wait_until(split, 40, "five partitions each", detail=lambda: (classic.snapshot()[:2], modern.snapshot()[:2]))
            assert group_type(b.bootstrap, group) == ConsumerGroupType.CONSUMER
            sent = produce(b.bootstrap, topic, 10, 10, f"up-{strategy}")
            wait_until(lambda: {v for _, _, v in all_read([classic, modern])} >= sent, 30, "every record read",
                       detail=lambda: len(all_read([classic, modern])))
            # each partition was read by the member that owns it
            mine = classic.snapshot()[0]
            assert {p for p, _, v in classic.snapshot()[2] if v in sent} <= mine
            assert {p for p, _, v in modern.snapshot()[2] if v in sent} <= set(range(10)) - mine
        # the consumer-protocol member left: a classic group again, the classic member owns all
        wait_until(lambda: classic.snapshot()[0] == set(range(10)), 40, "the classic member owns everything again",
                   detail=lambda: classic.snapshot()[:2])
        assert group_type(b.bootstrap, group) == ConsumerGroupType.CLASSIC
        assert not classic.snapshot()[2] or not classic.errors, classic.errors


def test_group_configs_set_described_and_applied(kip848_broker: Broker) -> None:
    """KIP-848's GROUP config resource (type 32): IncrementalAlterConfigs sets a group's own session
    timeout and heartbeat interval, DescribeConfigs shows them (GROUP_CONFIG) beside the broker's defaults
    (DEFAULT_CONFIG), bad values get Kafka's INVALID_CONFIG, and the group's members get its interval."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from odradek.client.wire import WireClient

    b = kip848_broker
    topic, group = unique("kip848c"), unique("g848c")
    create_topic(b.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def alter(**values: str) -> None:
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()])
        admin.incremental_alter_configs([res])[res].result(15)

    def described() -> dict[str, tuple[str | None, int]]:
        res = ConfigResource(ResourceType.GROUP, group)
        return {k: (e.value, int(e.source)) for k, e in admin.describe_configs([res])[res].result(15).items()}

    before = described()
    assert before["consumer.session.timeout.ms"] == ("6000", 5)  # the broker's (DEFAULT_CONFIG)
    assert set(before) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                           "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
                           "share.auto.offset.reset", "share.isolation.level", "share.delivery.count.limit",
                           "share.partition.max.record.locks"}
    alter(consumer_session_timeout_ms="50000", consumer_heartbeat_interval_ms="6000")
    after = described()
    assert after["consumer.session.timeout.ms"] == ("50000", 8)  # GROUP_CONFIG
    assert after["consumer.heartbeat.interval.ms"] == ("6000", 8)
    for bad in ({"consumer_session_timeout_ms": "1000"}, {"consumer_heartbeat_interval_ms": "x"},
                {"no_such_config": "1"}):
        with pytest.raises(Exception) as e:
            alter(**bad)
        assert "INVALID_CONFIG" in str(e.value) or "Unknown group config" in str(e.value), e.value
    assert described()["consumer.session.timeout.ms"] == ("50000", 8), "a refused change changes nothing"
    with WireClient(b.bootstrap, timeout=15) as w:
        r = heartbeat(w, group, "m1", 0, topics=[topic], owned=[])
        assert int(r.error_code) == 0 and r.heartbeat_interval == timedelta(milliseconds=6000)  # the group's own
        other = heartbeat(w, unique("g848o"), "m1", 0, topics=[topic], owned=[])
        assert other.heartbeat_interval == timedelta(milliseconds=HEARTBEAT_MS)  # other groups keep the broker's
