"""Consumer groups in a cluster: the coordinator is the leader of the group's
__consumer_offsets partition; when its broker dies the group moves with that leadership
and the committed offsets (replicated like any partition) survive."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

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
