"""Cluster mode (ZooKeeper): a topic deleted while one of its replicas' brokers is down. The controller
does not wait for that broker (Kafka's ZooKeeper-mode TopicDeletionManager would); when it comes back,
its log of the deleted topic is one the metadata does not account for and is kept, renamed
``<topic>-<partition>.<uuid>-stray`` (KIP-858, as Kafka's LogManager does in KRaft mode), not deleted
(issue 33, item 2)."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble


def test_topic_deleted_while_a_replica_was_down_leaves_a_stray_not_a_deletion(
    tmp_path: Path, zookeeper: Ensemble
) -> None:
    c = Cluster(tmp_path, zookeeper, 2).start()
    try:
        create(c, "gone", 1, 2)
        create(c, "kept", 1, 2)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for i in range(200):
            p.produce("gone", value=f"g{i}".encode(), partition=0)
            p.produce("kept", value=f"k{i}".encode(), partition=0)
        assert p.flush(30) == 0
        b2 = c.brokers[2]
        wait_until(lambda: b2.partition_dir("gone").is_dir(), 20, "broker 2's replica")
        # every acknowledged record is on broker 2 (acks=all with both in the ISR) before it stops
        b2.stop()
        segments = sorted(f for f in os.listdir(b2.partition_dir("gone")) if f.endswith(".log"))
        assert segments

        admin = AdminClient({"bootstrap.servers": c.brokers[1].bootstrap})
        admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(40)
        wait_until(lambda: c.zk_json("/brokers/topics/gone") is None, 30, "the topic's deletion")

        b2.start()
        strays = [n for n in os.listdir(b2.logdir) if n.startswith("gone-0.") and n.endswith("-stray")]
        assert len(strays) == 1, os.listdir(b2.logdir)
        assert sorted(f for f in os.listdir(b2.logdir / strays[0]) if f.endswith(".log")) == segments
        assert not b2.partition_dir("gone").exists()
        assert "Found stray log gone-0 (its topic is not in the metadata)" in b2.log_text()
        assert b2.partition_dir("kept").is_dir()  # a topic the metadata has is loaded as before
        # broker 2 serves on: it rejoins the ISR of the topic that exists
        wait_until(lambda: sorted(c.state("kept", 0).get("isr", [])) == [1, 2], 60, "broker 2 back in the ISR")
    finally:
        c.stop()
