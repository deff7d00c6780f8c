"""odradek.EmbeddedCluster: Debian's ZooKeeper and two broker processes; a killed leader fails over.

ZooKeeper or Java missing makes these tests fail (ZooKeeperError), not skip."""

from __future__ import annotations

import signal

from confluent_kafka import Consumer, Producer
from waiting import wait_until

import odradek


def test_two_broker_cluster_fails_over_and_takes_the_killed_broker_back() -> None:
    with odradek.EmbeddedCluster(2) as cluster:
        assert set(cluster.brokers) == {1, 2}
        assert cluster.controller() in (1, 2)
        cluster.create_topic("orders", partitions=1)  # replication factor 2
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                             "enable.idempotence": True})
        producer.produce("orders", b"before")
        assert producer.flush(30) == 0

        leader = cluster.leader("orders")
        other = 3 - leader
        proc = cluster.brokers[leader]._process
        cluster.kill(leader)
        assert proc is not None and proc.proc is not None and proc.proc.returncode == -signal.SIGKILL
        wait_until(lambda: cluster.leader("orders") == other, 60, f"broker {other} leading orders-0")
        producer.produce("orders", b"after")
        assert producer.flush(30) == 0

        cluster.start(leader)
        cluster.wait_ready({1, 2}, timeout=60)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        got: list[bytes] = []

        def read() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= 2

        wait_until(read, 60, "both records")
        consumer.close()
        assert got == [b"before", b"after"]
        data_dir = cluster.data_dir
    assert not data_dir.exists()
    assert all(not b.running for b in cluster.brokers.values())
