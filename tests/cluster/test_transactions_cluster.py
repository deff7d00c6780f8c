"""Transactions on a 3-broker cluster: the coordinator is the leader of the transactional id's
__transaction_state partition and sends WriteTxnMarkers to the leaders of the transaction's
partitions on the other brokers; when the coordinator's broker is killed, the transactional id
moves with that leadership (the new coordinator loads it from its replica)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble

PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3, {"transaction.state.log.num.partitions": "3"}).start()
    yield c
    c.stop()


def _read(c: Cluster, topic: str, isolation: str, expect: int, settle: float = 1.5) -> list[str]:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000})
    cons.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[str] = []
    deadline = time.monotonic() + 60
    quiet = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msgs = [m for m in cons.consume(500, 0.3) if m.error() is None]
            out += [m.value().decode() for m in msgs]
            if msgs:
                quiet = time.monotonic()
            elif len(out) >= expect and time.monotonic() - quiet > settle:
                break
    finally:
        cons.close()
    return sorted(out)


def _coordinator(c: Cluster, tid: str) -> int:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    md = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    from odradek.coordinator.transaction.records import partition_for

    return int(md.partitions[partition_for(tid, len(md.partitions))].leader)


@pytest.mark.timeout(240)
def test_markers_reach_leaders_on_other_brokers_and_the_coordinator_moves(cluster: Cluster) -> None:
    c = cluster
    topic = "txc"
    create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    leaders = {c.leader(topic, p) for p in range(PARTITIONS)}
    assert len(leaders) > 1  # the transaction spans partitions led by different brokers
    tid = "cluster-tid"
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "topic.metadata.refresh.interval.ms": 1000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"c1-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"a-{i}".encode(), partition=i % PARTITIONS)
    p.flush(60)
    p.abort_transaction(60)

    committed = sorted(f"c1-{i}" for i in range(30))
    assert _read(c, topic, "read_committed", 30) == committed
    assert len(_read(c, topic, "read_uncommitted", 60)) == 60

    # an open transaction, then its coordinator's broker dies: the new coordinator has the id
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=f"lost-{i}".encode(), partition=i % PARTITIONS)
    p.flush(60)
    coord = _coordinator(c, tid)
    c.kill(coord)
    # a new instance of the app: fenced the old one, aborted its open transaction, commits its own
    fresh = Producer({"bootstrap.servers": ",".join(b.bootstrap for i, b in c.brokers.items() if i != coord),
                      "transactional.id": tid, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000})
    fresh.init_transactions(90)
    assert _coordinator(c, tid) != coord
    fresh.begin_transaction()
    for i in range(6):
        fresh.produce(topic, value=f"c2-{i}".encode(), partition=i % PARTITIONS)
    fresh.commit_transaction(90)
    expected = sorted(committed + [f"c2-{i}" for i in range(6)])
    assert _read(c, topic, "read_committed", len(expected)) == expected
