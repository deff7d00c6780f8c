"""Partition reassignment (KIP-455) through AlterPartitionReassignments /
ListPartitionReassignments, with a follower replication throttle slowing the copy."""

from __future__ import annotations

import datetime
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

from odradek.client.wire import WireClient

from .cluster import Cluster
from .test_replication import drain
from .zk import Ensemble


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def _alter(c: Cluster, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, int]:
    import kio.schema.alter_partition_reassignments.v0.request as r

    controller = c.controller()
    assert controller is not None
    with WireClient(c.brokers[controller].bootstrap) as w:
        resp = w.request(45, 0, timeout=datetime.timedelta(seconds=30), topics=(
            r.ReassignableTopic(name=topic, partitions=(
                r.ReassignablePartition(partition_index=partition, replicas=tuple(replicas) if replicas else None),)),))
    return int(resp.error_code), int(resp.responses[0].partitions[0].error_code)


def _ongoing(c: Cluster) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    controller = c.controller()
    assert controller is not None
    with WireClient(c.brokers[controller].bootstrap) as w:
        resp = w.request(46, 0, timeout=datetime.timedelta(seconds=30), topics=None)
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


def test_reassignment_moves_a_replica_under_a_throttle(cluster: Cluster) -> None:
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("mv", 1, replica_assignment=[[1, 2]])])["mv"].result(30)
    # idempotent: the order read back is the order produced even when a request is retried (a
    # plain producer's first batch, refused while the new partition's leader was not yet in place,
    # was retried after the second had been appended: records 990-1979 at offset 0)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(5000):
        p.produce("mv", str(i).encode().ljust(1000, b"."), partition=0)
    assert p.flush(60) == 0
    # throttle broker 3's follower fetches to ~1 MB/s for this topic: the 5 MB copy takes seconds
    # one resource a call, as kafka-configs alters one entity at a time (both in one call timed out after 30 s
    # once on CI, with nothing in broker 3's log: not explained yet, see issue 34's note)
    for res in (ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
                    ConfigEntry("follower.replication.throttled.rate", "1000000",
                                incremental_operation=AlterConfigOpType.SET)]),
                ConfigResource(ResourceType.TOPIC, "mv", incremental_configs=[
                    ConfigEntry("follower.replication.throttled.replicas", "*",
                                incremental_operation=AlterConfigOpType.SET)])):
        admin.incremental_alter_configs([res])[res].result(60)
    assert _alter(c, "mv", 0, [3, 2]) == (0, 0)
    ongoing = _ongoing(c)
    assert ongoing.get(("mv", 0)) == ([3, 2, 1], [3], [1]), ongoing
    assert _alter(c, "nope", 0, [1]) == (0, 3)  # UNKNOWN_TOPIC_OR_PARTITION
    assert _alter(c, "mv", 0, [3, 9]) == (0, 39)  # INVALID_REPLICA_ASSIGNMENT: no broker 9
    t0 = time.monotonic()
    wait_until(lambda: ("mv", 0) not in _ongoing(c), 90, "the reassignment to complete")
    took = time.monotonic() - t0
    assert took > 2.0, f"a 5 MB copy at 1 MB/s finished in {took:.1f}s: the throttle did nothing"
    doc = c.zk_json("/brokers/topics/mv")
    assert doc["partitions"]["0"] == [3, 2] and not doc.get("adding_replicas") and not doc.get("removing_replicas")
    st = c.state("mv", 0)
    assert st["leader"] in (2, 3) and sorted(st["isr"]) == [2, 3]
    wait_until(lambda: not c.brokers[1].partition_dir("mv", 0).exists(), 20, "broker 1 to delete its replica")
    assert _alter(c, "mv", 0, None) == (0, 85)  # nothing to cancel: NO_REASSIGNMENT_IN_PROGRESS
    got = drain(c.bootstrap, "mv", 1)[0]
    assert [int(v.rstrip(b".")) for v in got] == list(range(5000))


def test_reassignment_v1_may_forbid_a_change_of_replication_factor(cluster: Cluster) -> None:
    """AlterPartitionReassignments v1 (KIP-860): with allow_replication_factor_change false a target of
    another size is INVALID_REPLICATION_FACTOR (Kafka's message), one of the same size is carried out;
    with the flag on (v0's behaviour) the factor may change. The response repeats the flag."""
    from kio.schema.alter_partition_reassignments.v1 import request as r

    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("rf", 1, replica_assignment=[[1, 2]])])["rf"].result(30)

    def alter(replicas: list[int], allow: bool) -> tuple[bool, int, str | None]:
        controller = c.controller()
        assert controller is not None
        with WireClient(c.brokers[controller].bootstrap) as w:
            resp = w.request(45, 1, timeout=datetime.timedelta(seconds=30), allow_replication_factor_change=allow,
                             topics=(r.ReassignableTopic(name="rf", partitions=(
                                 r.ReassignablePartition(partition_index=0, replicas=tuple(replicas)),)),))
        assert int(resp.error_code) == 0
        p = resp.responses[0].partitions[0]
        return resp.allow_replication_factor_change, int(p.error_code), p.error_message

    assert alter([1, 2, 3], False) == (False, 38, "The replication factor is changed from 2 to 3")
    assert alter([3], False) == (False, 38, "The replication factor is changed from 2 to 1")
    assert alter([2, 3], False) == (False, 0, None)
    wait_until(lambda: not _ongoing(c), 60, "the reassignment to [2, 3]")
    assert alter([1, 2, 3], True) == (True, 0, None)
    wait_until(lambda: not _ongoing(c), 60, "the reassignment to [1, 2, 3]")
    meta = admin.list_topics("rf", timeout=10).topics["rf"].partitions[0]
    assert sorted(meta.replicas) == [1, 2, 3]
