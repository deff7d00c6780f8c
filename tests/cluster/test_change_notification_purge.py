"""Change notifications are purged by the brokers that read them (Kafka's
ZkNodeChangeNotificationListener deletes those older than 15 minutes; here
``odradek.change.notification.expiration.ms`` shortens that to 3 s): after a new ACL change and a
new config change, the older ``/kafka-acl-changes`` and ``/config/changes`` znodes are gone, the
newest stay, and both ACLs still apply on every broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from waiting import wait_until

from .cluster import Cluster
from .zk import Ensemble

TOPIC = "purge-notifications"


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 2, {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
        "odradek.change.notification.expiration.ms": "3000",
    }).start()
    yield c
    c.stop()


def _acl(topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


def _alter_retention(admin: AdminClient, ms: int) -> None:
    res = ConfigResource(ResourceType.TOPIC, TOPIC,
                         incremental_configs=[ConfigEntry("retention.ms", str(ms),
                                                          incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


@pytest.mark.timeout(120)
def test_old_change_notifications_are_purged(cluster: Cluster) -> None:
    b1, b2 = (AdminClient({"bootstrap.servers": b.bootstrap}) for b in cluster.brokers.values())
    b1.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)
    first = _acl("first")
    b1.create_acls([first])[first].result(30)
    _alter_retention(b1, 100000)
    old_acl = set(cluster.zk_children("/kafka-acl-changes"))
    old_config = set(cluster.zk_children("/config/changes"))
    assert len(old_acl) == 1 and len(old_config) >= 1
    time.sleep(3.5)
    second = _acl("second")
    b2.create_acls([second])[second].result(30)
    _alter_retention(b2, 200000)
    wait_until(lambda: not old_acl & set(cluster.zk_children("/kafka-acl-changes")), 20,
               "the expired ACL change notification purged")
    wait_until(lambda: not old_config & set(cluster.zk_children("/config/changes")), 20,
               "the expired config change notifications purged")
    assert len(cluster.zk_children("/kafka-acl-changes")) == 1  # the new one stays (younger than 3 s)
    assert cluster.zk_children("/config/changes")
    # the ACLs themselves are untouched, on both brokers
    for admin in (b1, b2):
        found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                     AclOperation.ANY, AclPermissionType.ANY)).result(30)
        assert {b.name for b in found} == {"first", "second"}
