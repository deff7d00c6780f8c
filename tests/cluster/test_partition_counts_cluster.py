"""Partition counts in ZooKeeper mode: absurd CreateTopics / CreatePartitions are refused by the broker
that receives them before anything reaches ZooKeeper, and a large topic is elected by the controller in
batches and applied by each broker a slice of LeaderAndIsr per loop turn, both brokers answering other
clients meanwhile (tests/hostile/test_partition_counts.py covers the embedded broker)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hostile._admin_wire import INT32_MAX, POLICY_VIOLATION, bystander, create_partitions, create_topics
from integration import wire
from integration.clients import unique
from waiting import wait_until

from .cluster import Cluster
from .zk import Ensemble

MEMORY_LIMIT = 2 << 30  # as the hostile suite's brokers


@pytest.mark.timeout(600)
def test_partition_counts_in_a_cluster(tmp_path: Path, zookeeper: Ensemble) -> None:
    c = Cluster(tmp_path, zookeeper, 2)
    for b in c.brokers.values():
        b.memory_limit = MEMORY_LIMIT
    c.start()
    try:
        b1, b2 = c.brokers[1], c.brokers[2]
        topic, big = unique("cl-small"), unique("cl-big")
        with wire.Conn(b1.bootstrap, timeout=60) as conn:
            for validate_only in (True, False):
                t0 = time.monotonic()
                res = create_topics(conn, [(unique("cl-huge"), INT32_MAX, 2, [])], validate_only=validate_only)
                assert res[0][1] == POLICY_VIOLATION, res
                assert time.monotonic() - t0 < 5
            assert create_topics(conn, [(topic, 1, 2, [])]) == [(topic, wire.NONE, None)]
            wait_until(lambda: topic in c.zk_children("/brokers/topics"), 30, "the topic in ZooKeeper")
            for validate_only in (True, False):
                res = create_partitions(conn, [(topic, INT32_MAX, None)], validate_only=validate_only)
                assert res[0][1] == POLICY_VIOLATION, res
            # more partitions than one controller batch (NEW_PARTITION_BATCH), replicated on both brokers
            with bystander(b2.bootstrap, b2.pid) as other2, bystander(b1.bootstrap, b1.pid) as other1:
                res = create_topics(conn, [(big, 600, 2, [])], timeout_ms=300_000)
                assert res == [(big, wire.NONE, None)], res
            for other in (other1, other2):
                assert other.slowest < 1.0, f"another client waited {other.slowest:.2f} s"
            assert len(c.zk_children(f"/brokers/topics/{big}/partitions")) == 600
            for b in (b1, b2):
                wait_until(lambda b=b: len(list(b.logdir.glob(f"{big}-*"))) == 600, 60, f"600 logs on {b.name}")
        for b in c.brokers.values():
            b.assert_alive()
    finally:
        c.stop()
