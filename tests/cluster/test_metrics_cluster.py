"""/metrics of brokers in a ZooKeeper cluster: the leader's ISR shrink and expansion when a follower
stops fetching and comes back, the controller's gauges on the active controller only, follower fetches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from integration.test_metrics import scrape, total, value
from waiting import wait_until

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    # a follower paused for a few seconds falls out of the ISR (replica.lag.time.max.ms) long before
    # its ZooKeeper session expires: the leader shrinks the ISR, not the controller
    c = Cluster(tmp_path, zookeeper, 3, {"replica.lag.time.max.ms": "3000",
                                         "zookeeper.session.timeout.ms": "15000"}).start()
    yield c
    c.stop()


def test_isr_shrink_and_expand_and_controller_gauges(cluster: Cluster) -> None:
    topic = "metrics-isr"
    create(cluster, topic, 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: sorted(cluster.state(topic, 0)["isr"]) == [1, 2, 3], 30, "full ISR")
    leader = cluster.leader(topic, 0)
    lb = cluster.brokers[leader]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for _ in range(100):
        p.produce(topic, b"v" * 1000)
    assert p.flush(30) == 0

    m = scrape(lb)
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 100
    # both followers read what was appended
    wait_until(lambda: value(scrape(lb), "kafka_server_brokertopicmetrics_replicationbytesout_total",
                             topic=topic) >= 2 * 100 * 1000, 30, "followers' bytes")
    # ... and each follower counts what it appended (ReplicationBytesIn); the leader appended none as follower
    for b in cluster.brokers:
        if b != leader:
            wait_until(lambda b=b: value(scrape(cluster.brokers[b]),
                                         "kafka_server_brokertopicmetrics_replicationbytesin_total",
                                         topic=topic) >= 100 * 1000, 30, f"broker {b}'s replicated bytes")
    assert value(scrape(lb), "kafka_server_brokertopicmetrics_replicationbytesin_total", topic=topic) == 0
    assert total(scrape(lb), "kafka_network_requestmetrics_requests_total", request="FetchFollower") > 0
    assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    controllers = [b for b in cluster.brokers.values()
                   if value(scrape(b), "kafka_controller_kafkacontroller_activecontrollercount") == 1]
    assert len(controllers) == 1
    cm = scrape(controllers[0])
    assert value(cm, "kafka_controller_kafkacontroller_globalpartitioncount") >= 1
    assert value(cm, "kafka_controller_kafkacontroller_globaltopiccount") >= 1
    assert value(cm, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    for b in cluster.brokers.values():
        if b is not controllers[0]:
            assert value(scrape(b), "kafka_controller_kafkacontroller_globalpartitioncount") == 0

    follower = next(b for b in cluster.brokers if b != leader)
    # on a loaded machine a follower may fall behind for a moment on its own: compare with what the
    # counters say just before the pause, and wait for the state the pause must bring
    shrinks0 = value(scrape(lb), "kafka_server_replicamanager_isrshrinks_total")
    cluster.pause(follower)
    try:
        def shrunk() -> bool:
            m = scrape(lb)
            return (value(m, "kafka_server_replicamanager_isrshrinks_total") > shrinks0
                    and value(m, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
                    and follower not in cluster.state(topic, 0)["isr"])

        wait_until(shrunk, 20, "an ISR shrink without the paused follower")
        # AtMinIsr counts partitions whose ISR is exactly min.insync.replicas (2): on a loaded machine the other
        # follower may drop out for a moment too (ISR 1, under the minimum), so wait for the leader and it
        # (failed in CI: the gauge read 0 at the instant of the shrink)
        wait_until(lambda: len(cluster.state(topic, 0)["isr"]) == 2
                   and value(scrape(lb), "kafka_server_replicamanager_atminisrpartitioncount") >= 1, 15,
                   "the partition at its minimum ISR, counted by AtMinIsrPartitionCount")
        # ... and it stays out while it is stopped: the other follower's fetches (every 200 ms) must not bring
        # it back (they once did, its last known log end being the high watermark)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert follower not in cluster.state(topic, 0)["isr"], "a stopped follower was taken back into the ISR"
            time.sleep(0.2)
        m = scrape(lb)
        expands0 = value(m, "kafka_server_replicamanager_isrexpands_total")
    finally:
        cluster.resume(follower)
    wait_until(lambda: value(scrape(lb), "kafka_server_replicamanager_isrexpands_total") > expands0, 30,
               "an ISR expansion")
    wait_until(lambda: value(scrape(lb), "kafka_server_replicamanager_underreplicatedpartitions") == 0, 30,
               "no under-replicated partition")
