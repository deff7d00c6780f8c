"""Replication quotas (KIP-73) on a three-broker ZooKeeper cluster: a reassignment throttled to
1 MB/s copies 6 MB in about 6 s while an unthrottled one of the same size, running at the same
time, is not held; the leader side alone (leader.replication.throttled.rate with
leader.replication.throttled.replicas) holds a copy as well; ``odradek reassign --execute
--throttle`` sets the configs and ``--verify`` clears them once the moves are done."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from waiting import wait_until

from .cluster import Cluster
from .test_reassignment import _alter, _ongoing
from .zk import Ensemble

MB = 1_000_000
RECORD = 1000
SIZE = 6 * MB


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    # two 1 s samples: the measured rate follows the copy within a second or two
    c = Cluster(tmp_path, zookeeper, 3, {"replication.quota.window.num": "2"}).start()
    yield c
    c.stop()


def _fill(c: Cluster, admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
    _fill_existing(c, topic)


def _fill_existing(c: Cluster, topic: str) -> None:
    """SIZE bytes of RECORD-sized records to partition 0 of ``topic``, acks=all."""
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 200_000})
    payload = b"x" * RECORD
    for _ in range(SIZE // RECORD):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def _reassign(c: Cluster, tmp_path: Path, topic: str, *extra: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / f"{topic}.json"
    f.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]}]}))
    return subprocess.run([sys.executable, "-m", "odradek", "reassign", "--bootstrap-server", c.bootstrap,
                           "--reassignment-json-file", str(f), *extra], capture_output=True, text=True, timeout=60)


def _timed_until_done(c: Cluster, topic: str, took: dict[str, float], t0: float) -> None:
    wait_until(lambda: (topic, 0) not in _ongoing(c), 120, f"the reassignment of {topic}")
    took[topic] = time.monotonic() - t0


def _configs(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, str | None]:
    res = ConfigResource(rtype, name)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(30).items()}


def test_a_throttled_reassignment_moves_at_the_set_rate(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    _fill(c, admin, "slow")
    _fill(c, admin, "fast")
    took: dict[str, float] = {}
    t0 = time.monotonic()
    res = _reassign(c, tmp_path, "slow", "--execute", "--throttle", str(MB))
    assert res.returncode == 0, res.stderr
    assert "The inter-broker throttle limit was set to 1000000 B/s" in res.stdout
    slow = threading.Thread(target=_timed_until_done, args=(c, "slow", took, t0))
    slow.start()
    t1 = time.monotonic()
    res = _reassign(c, tmp_path, "fast", "--execute", "--additional")
    assert res.returncode == 0, res.stderr
    _timed_until_done(c, "fast", took, t1)
    slow.join(150)
    assert "slow" in took, "the throttled reassignment did not finish"
    rate = SIZE / took["slow"]
    print(f"throttled: {SIZE / MB:.0f} MB in {took['slow']:.1f}s = {rate / MB:.2f} MB/s; "
          f"unthrottled: {took['fast']:.1f}s")
    assert 0.6 * MB <= rate <= 1.6 * MB, took
    assert took["fast"] < 3.0, took
    # the tool set the throttles; --verify removes them now that the move is done
    assert _configs(admin, ResourceType.TOPIC, "slow")["leader.replication.throttled.replicas"] == "0:1,0:2"
    assert _configs(admin, ResourceType.TOPIC, "slow")["follower.replication.throttled.replicas"] == "0:3"
    assert _configs(admin, ResourceType.BROKER, "1")["leader.replication.throttled.rate"] == str(MB)
    res = _reassign(c, tmp_path, "slow", "--verify", "--wait", "30", "--progress")
    assert res.returncode == 0 and "Clearing topic-level throttles on topic slow" in res.stdout, res.stdout + res.stderr
    assert "reassignment: 1/1 (100%)" in res.stderr and "1/1 (100%)" not in res.stdout  # progress: stderr only
    assert _configs(admin, ResourceType.TOPIC, "slow")["leader.replication.throttled.replicas"] == ""
    assert _configs(admin, ResourceType.BROKER, "1")["leader.replication.throttled.rate"] != str(MB)


def test_the_leader_side_alone_holds_a_copy(cluster: Cluster) -> None:
    """Only the leader's rate and replicas are set: the follower fetches freely, the leader sends
    the throttled partition's records to the follower outside the ISR at about the rate."""
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    _fill(c, admin, "lead")
    for f in admin.incremental_alter_configs([
        ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("leader.replication.throttled.rate", str(MB), incremental_operation=AlterConfigOpType.SET)]),
        ConfigResource(ResourceType.TOPIC, "lead", incremental_configs=[
            ConfigEntry("leader.replication.throttled.replicas", "0:1", incremental_operation=AlterConfigOpType.SET)]),
    ]).values():
        f.result(30)
    assert c.leader("lead", 0) == 1
    took: dict[str, float] = {}
    t0 = time.monotonic()
    assert _alter(c, "lead", 0, [3, 1]) == (0, 0)
    _timed_until_done(c, "lead", took, t0)
    rate = SIZE / took["lead"]
    print(f"leader-throttled: {SIZE / MB:.0f} MB in {took['lead']:.1f}s = {rate / MB:.2f} MB/s")
    assert 0.6 * MB <= rate <= 1.6 * MB, took


def test_in_sync_followers_are_not_held(cluster: Cluster) -> None:
    """A throttle on every replica of a topic (``*``, 10 KB/s on both sides) holds no follower that is
    caught up: acks=all produce of 6 MB to a partition whose follower is in the ISR is not slowed
    to the throttle (Kafka's shouldLeaderThrottle / shouldFollowerThrottle), and the ISR stays whole."""
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("insync", 1, replica_assignment=[[1, 2]])])["insync"].result(30)
    wait_until(lambda: sorted(c.state("insync", 0)["isr"]) == [1, 2], 30, "both replicas in the ISR")
    resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(k, "10000", incremental_operation=AlterConfigOpType.SET)
        for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]) for b in (1, 2)]
    resources.append(ConfigResource(ResourceType.TOPIC, "insync", incremental_configs=[
        ConfigEntry(k, "*", incremental_operation=AlterConfigOpType.SET)
        for k in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")]))
    for r in resources:  # one broker resource per call (librdkafka's rule)
        for f in admin.incremental_alter_configs([r]).values():
            f.result(30)
    time.sleep(1.0)  # the config change notices reach both brokers
    t0 = time.monotonic()
    _fill_existing(c, "insync")
    took = time.monotonic() - t0
    assert took < 20.0, f"6 MB acks=all took {took:.1f}s: the in-sync follower was throttled to 10 KB/s"
    assert sorted(c.state("insync", 0)["isr"]) == [1, 2]

