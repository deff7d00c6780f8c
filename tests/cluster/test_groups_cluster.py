"""Consumer groups in a cluster: the coordinator is the leader of the group's
__consumer_offsets partition; when its broker dies the group moves with that leadership
and the committed offsets (replicated like any partition) survive."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def _produce(c: Cluster, topic: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, str(i).encode(), key=str(i).encode())
    assert p.flush(30) == 0


def _consumer(c: Cluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 10, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000})


def _read(consumer: Consumer, want: int, timeout: float = 60) -> list[int]:
    out: list[int] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if not m.error():
                out.append(int(m.value()))
    return out


def test_group_moves_with_its_coordinator_and_keeps_offsets(cluster: Cluster) -> None:
    c = cluster
    create(c, "g", 6, 3, **{"min.insync.replicas": "2"})
    _produce(c, "g", 0, 600)
    a = _consumer(c, "cg")
    a.subscribe(["g"])
    got = _read(a, 600)
    assert sorted(got) == list(range(600))
    a.commit(asynchronous=False)
    a.close()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    desc = admin.describe_consumer_groups(["cg"])["cg"].result(30)
    coordinator = desc.coordinator.id
    assert c.leader("__consumer_offsets", _partition_for("cg", 6)) == coordinator
    _produce(c, "g", 600, 400)
    c.kill(coordinator)
    wait_until(lambda: c.leader("__consumer_offsets", _partition_for("cg", 6)) not in (coordinator, -1), 30,
               "a new coordinator")
    b = _consumer(c, "cg")
    b.subscribe(["g"])
    try:
        got = _read(b, 400)
        time.sleep(1.0)
        got += [int(m.value()) for m in b.consume(500, 1.0) if not m.error()]
    finally:
        b.close()
    assert sorted(got) == list(range(600, 1000)), "committed offsets were lost or messages re-delivered"
    survivors = ",".join(br.bootstrap for b_id, br in c.brokers.items() if b_id != coordinator)
    admin2 = AdminClient({"bootstrap.servers": survivors})  # kept: a collected client cancels its requests
    desc = admin2.describe_consumer_groups(["cg"])["cg"].result(30)
    assert desc.coordinator.id != coordinator


def _partition_for(group: str, n: int) -> int:
    from odradek.coordinator.records import partition_for

    return partition_for(group, n)


def _share_heartbeat(bootstrap: str, group: str, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    from odradek.client.wire import WireClient

    with WireClient(bootstrap, timeout=15) as w:
        return w.request(76, 1, group_id=group, member_id=member, member_epoch=epoch,
                         subscribed_topic_names=topics)


def _share_describe(bootstrap: str, group: str) -> Any:
    from odradek.client.wire import WireClient

    with WireClient(bootstrap, timeout=15) as w:
        return w.request(77, 1, group_ids=(group,), include_authorized_operations=False).groups[0]


def test_share_group_moves_with_its_coordinator(cluster: Cluster) -> None:
    """A share group (KIP-932) is in __consumer_offsets (Kafka's ShareGroup* records, replicated like any
    partition): when its coordinator dies, the broker that takes the partition over replays them and knows the
    members at their epochs."""
    c = cluster
    create(c, "sq", 2, 3)
    group = "sg"
    partition = _partition_for(group, 6)
    first = c.brokers[1].bootstrap
    wait_until(lambda: _share_heartbeat(first, group, "probe", -1, None).error_code in (69, 25, 16), 30,
               "__consumer_offsets")  # GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID once it exists, else NOT_COORDINATOR
    wait_until(lambda: c.leader("__consumer_offsets", partition) > 0, 30, "a coordinator")
    coordinator = c.leader("__consumer_offsets", partition)
    at = c.brokers[coordinator].bootstrap
    # ZooKeeper names the leader before the broker has applied its LeaderAndIsr and loaded the partition
    # (COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR meanwhile, all retriable)
    wait_until(lambda: _share_describe(at, group).error_code not in (14, 15, 16), 30, "the coordinator loaded")
    epochs = {}
    for member in ("m1", "m2", "m3"):
        r = _share_heartbeat(at, group, member, 0, ("sq",))
        assert r.error_code == 0, r
        epochs[member] = r.member_epoch
    assert _share_heartbeat(at, group, "m3", -1, None).error_code == 0  # leaves: its records are tombstoned
    for member in ("m1", "m2"):
        epochs[member] = _share_heartbeat(at, group, member, epochs[member], None).member_epoch
    before = _share_describe(at, group)
    assert (before.error_code, before.group_epoch, before.assignment_epoch) == (0, 5, 5)
    assert sorted((m.member_id, m.member_epoch) for m in before.members) == [("m1", 5), ("m2", 5)]
    c.kill(coordinator)
    wait_until(lambda: c.leader("__consumer_offsets", partition) not in (coordinator, -1), 30, "a new coordinator")
    at = c.brokers[c.leader("__consumer_offsets", partition)].bootstrap
    wait_until(lambda: _share_describe(at, group).error_code == 0, 30, "the group loaded")
    after = _share_describe(at, group)
    assert (after.group_epoch, after.assignment_epoch) == (5, 5)
    assert sorted((m.member_id, m.member_epoch) for m in after.members) == [("m1", 5), ("m2", 5)]
    assert {(m.member_id, tuple(p for t in m.assignment.topic_partitions for p in t.partitions))
            for m in after.members} == {("m1", (0,)), ("m2", (1,))}
    r = _share_heartbeat(at, group, "m1", 5, None)
    assert (r.error_code, r.member_epoch) == (0, 5)  # carries on at its epoch
    assert _share_heartbeat(at, group, "m4", 0, ("sq",)).member_epoch == 6
