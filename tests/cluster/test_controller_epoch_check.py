"""A broker that cannot read the controller epoch from ZooKeeper still follows the controller (issue 33).

A broker checks the first request of a controller epoch it has not seen against ZooKeeper
(server.cluster_access.ControllerEpochGuard). It used to refuse the request
(STALE_CONTROLLER_EPOCH) after ~10 s of failed reads; Kafka's controller never sends a refused
request again, so the broker never became a follower of its partitions and never came back into
their ISR. Kafka's broker needs no ZooKeeper for this: it takes an epoch at or above the highest it
has seen. Here /controller_epoch is made unreadable (its ACL loses READ; /controller stays
readable) and a follower restarted: its first requests from the running controller cannot be
checked, and it must follow anyway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.security import make_acl
from kio.schema.metadata.v9.request import MetadataRequestTopic
from kio.schema.types import TopicName
from waiting import wait_until

from odradek.client.wire import WireClient

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble

NO_READ = [make_acl("world", "anyone", create=True, write=True, delete=True, admin=True)]
ALL = [make_acl("world", "anyone", all=True)]


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def _leader_seen_by(c: Cluster, broker: int, topic: str) -> int:
    """Partition 0's leader in ``broker``'s own Metadata answer (-2: not there)."""
    with WireClient(c.brokers[broker].bootstrap) as w:
        md = w.request(3, 9, topics=(MetadataRequestTopic(name=TopicName(topic)),), allow_auto_topic_creation=False,
                       include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    parts = [p for t in md.topics if t.error_code.value == 0 for p in t.partitions if p.partition_index == 0]
    return int(parts[0].leader_id) if parts else -2


def test_a_follower_that_cannot_check_the_epoch_still_follows(cluster: Cluster) -> None:
    c = cluster
    create(c, "guarded", 1, 3)
    wait_until(lambda: len(c.state("guarded", 0).get("isr", [])) == 3, 20, "a full ISR")
    controller, leader = c.controller(), c.leader("guarded", 0)
    follower = next(b for b in c.brokers if b not in (controller, leader))
    c.brokers[follower].stop()
    wait_until(lambda: follower not in c.state("guarded", 0)["isr"], 20, "the stopped follower out of the ISR")
    c.zkc.set_acls("/controller_epoch", NO_READ)
    try:
        c.brokers[follower].start()
        # the controller's LeaderAndIsr makes it a follower again: it fetches and rejoins the ISR
        wait_until(lambda: follower in c.state("guarded", 0)["isr"], 40, "the restarted follower back in the ISR",
                   detail=lambda: c.brokers[follower].log_tail(30))
        # and its metadata cache took the controller's UpdateMetadata
        wait_until(lambda: _leader_seen_by(c, follower, "guarded") == c.leader("guarded", 0), 10,
                   "the restarted follower's Metadata to name the leader")
        log = c.brokers[follower].log_text()
        assert "taken on the epoch alone" in log, "the epoch check did not meet the unreadable znode"
        assert c.controller() == controller  # no failover in between: the same controller's requests
    finally:
        c.zkc.set_acls("/controller_epoch", ALL)
