"""Replication across real broker processes coordinated through a real ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until

from .cluster import Cluster
from .zk import Ensemble


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def create(c: Cluster, topic: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = admin.create_topics([NewTopic(topic, partitions, rf, config=configs)], operation_timeout=30)
    fs[topic].result(30)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[tuple[int, int, bytes]]:
    import time

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 10, "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error():
                    continue
                out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return out


def test_acks_all_replicates_to_every_replica(cluster: Cluster) -> None:
    create(cluster, "r3", 2, 3, **{"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list[object] = []
    for i in range(2000):
        p.produce("r3", str(i).encode(), partition=i % 2, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(60) == 0
    assert not errors
    got = consume_all(cluster.bootstrap, "r3", 2, 2000)
    assert sorted(int(v) for _, _, v in got) == list(range(2000))
    # every replica holds the same log
    for part in (0, 1):
        st = cluster.state("r3", part)
        assert sorted(st["isr"]) == [1, 2, 3], st
        sizes = {b: sum(f.stat().st_size for f in br.segment_files("r3", part)) for b, br in cluster.brokers.items()}
        assert len(set(sizes.values())) == 1 and next(iter(sizes.values())) > 0, sizes


def test_large_fetches_are_spliced_and_every_replica_is_byte_identical(cluster: Cluster) -> None:
    """Fetch responses with 64 KB or more of a partition's records go from the follower's socket
    into its segment files with splice(2) (odradek.replica.fetch.splice); segments small enough that
    some fetches need a roll (the records then copied out of the file's tail). Every replica must end
    with the same segment files, byte for byte, and the followers must have spliced."""
    from integration.test_metrics import scrape, value

    topic = "spliced"
    create(cluster, topic, 2, 3, **{"segment.bytes": str(1 << 20)})
    for part in (0, 1):
        wait_until(lambda part=part: sorted(cluster.state(topic, part)["isr"]) == [1, 2, 3], 30, "full ISR")
    leaders = {cluster.leader(topic, part) for part in (0, 1)}
    lagging = next(b for b in cluster.brokers if b not in leaders) if len(leaders) < 3 else None
    lagging = lagging or next(b for b in cluster.brokers if b != cluster.leader(topic, 0))
    # a follower stopped while ~6 MB is written catches up with full fetches (1 MB per partition)
    cluster.pause(lagging)
    try:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1 << 20,
                      "compression.type": "none"})
        for i in range(240):  # 20 KB records, a few per batch
            p.produce(topic, bytes([i % 251]) * 20_000, key=b"%d" % i, partition=i % 2)
        assert p.flush(60) == 0
    finally:
        cluster.resume(lagging)
    for part in (0, 1):
        def same(part: int = part) -> bool:
            files = {b: [(f.name, f.read_bytes()) for f in br.segment_files(topic, part)]
                     for b, br in cluster.brokers.items()}
            return len({repr(v) for v in files.values()}) == 1

        wait_until(same, 60, f"identical segments of {topic}-{part} on every replica")
        assert len(cluster.brokers[lagging].segment_files(topic, part)) >= 3  # rolled while spliced
    spliced = value(scrape(cluster.brokers[lagging]), "odradek_replica_fetcher_spliced_bytes_total")
    assert spliced >= 2_000_000, spliced  # most of what it caught up with went that way


def drain(bootstrap: str, topic: str, partitions: int, timeout: float = 90) -> dict[int, list[bytes]]:
    """Every message below each partition's high watermark, per partition, in offset order."""
    import time

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "drain", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 10, "topic.metadata.refresh.interval.ms": 1000})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error():
                    continue
                assert m.offset() == pos[m.partition()], (m.partition(), m.offset(), pos[m.partition()])
                out[m.partition()].append(m.value())
                pos[m.partition()] = m.offset() + 1
        assert all(pos[p] >= ends[p] for p in pos), (pos, ends)
        return out
    finally:
        c.close()


def test_leader_killed_twice_loses_no_acknowledged_message(cluster: Cluster) -> None:
    """RF=3, min.insync.replicas=2: an idempotent acks=all producer writes 50,000 messages while
    the leader of partition 0 is killed with kill -9 twice and restarted; every acknowledged
    message is read back exactly once, in order per partition."""
    topic, parts, total = "kill", 3, 50_000
    create(cluster, topic, parts, 3, **{"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100})
    acked: dict[int, list[int]] = {q: [] for q in range(parts)}
    failed: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err:
            failed.append(err)
        else:
            acked[msg.partition()].append(int(msg.value()))  # type: ignore[attr-defined]

    killed: list[int] = []
    for i in range(total):
        while True:
            try:
                p.produce(topic, str(i).encode(), partition=i % parts, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 500 == 0:
            p.poll(0)
        if i in (12_000, 32_000):
            p.flush(60)  # make sure the leader holds acknowledged data when it dies
            victim = cluster.leader(topic, 0)
            cluster.kill(victim)
            killed.append(victim)
            wait_until(lambda v=victim: cluster.leader(topic, 0) not in (v, -1), 30, "a new leader")
        if i in (20_000, 40_000):
            cluster.brokers[killed[-1]].start()
    assert p.flush(120) == 0
    assert not failed, failed[:5]
    assert len(killed) == 2
    # the restarted brokers catch up and rejoin the ISR
    wait_until(lambda: all(sorted(cluster.state(topic, q)["isr"]) == [1, 2, 3] for q in range(parts)), 60,
               "full ISRs")
    got = drain(cluster.bootstrap, topic, parts)
    for q in range(parts):
        values = [int(v) for v in got[q]]
        assert len(values) == len(set(values)), f"duplicates in partition {q}"
        assert values == sorted(values), f"partition {q} out of order"
        assert set(acked[q]) <= set(values), f"partition {q} lost {len(set(acked[q]) - set(values))} acknowledged"
    assert sum(len(v) for v in acked.values()) == total


def test_topic_admin_in_a_cluster(cluster: Cluster) -> None:
    """CreatePartitions, a topic config change and DeleteTopics go through ZooKeeper and the
    controller, and reach every broker."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        ResourceType,
    )

    create(cluster, "adm", 1, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("adm", 3)])["adm"].result(30)
    wait_until(lambda: all(cluster.leader("adm", q) in (1, 2, 3) for q in range(3)), 20,
               "leaders of new partitions")
    for b in cluster.brokers.values():
        wait_until(lambda b=b: AdminClient({"bootstrap.servers": b.bootstrap}).list_topics("adm", timeout=5)
                         .topics["adm"].partitions.keys() == {0, 1, 2},
                   20, "every broker to know 3 partitions")
        wait_until(lambda b=b: all(b.partition_dir("adm", q).is_dir() for q in range(3)), 20, "replicas")
    res = ConfigResource(ResourceType.TOPIC, "adm", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    assert cluster.zk_json("/config/topics/adm")["config"]["retention.ms"] == "123456"
    for b in cluster.brokers.values():  # each broker answers with the new value
        def seen(b: object = b) -> bool:
            a = AdminClient({"bootstrap.servers": b.bootstrap})  # type: ignore[attr-defined]
            r = ConfigResource(ResourceType.TOPIC, "adm")
            return a.describe_configs([r])[r].result(10)["retention.ms"].value == "123456"
        wait_until(seen, 20, "the config change everywhere")
    admin.delete_topics(["adm"], operation_timeout=30)["adm"].result(40)
    assert cluster.zk_json("/brokers/topics/adm") is None and not cluster.zk_children("/admin/delete_topics")
    for b in cluster.brokers.values():
        wait_until(lambda b=b: not any(b.partition_dir("adm", q).exists() for q in range(3)), 20,
                   "every replica deleted")
