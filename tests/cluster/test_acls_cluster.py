"""ACLs in a three-broker cluster: an ACL created through one broker is stored under /kafka-acl in
ZooKeeper and applies on every broker (each leads one partition of the topic, each authorizes the
produce it receives); deleting it is seen everywhere too. Brokers talk to each other over PLAINTEXT
as User:ANONYMOUS, a super user, as Kafka's own PLAINTEXT inter-broker setups do."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from integration.broker import free_port
from waiting import wait_until

from .cluster import Cluster
from .zk import Ensemble

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')
TOPIC = "acl-cluster"


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3, {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })
    sasl_ports = {}
    for b, broker in c.brokers.items():
        sasl_ports[b] = free_port()
        broker.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                                         f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[b]}")
    c.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())  # type: ignore[attr-defined]
    c.start()
    yield c
    c.stop()


def _produce_errors(bootstrap: str, partitions: int) -> list[int | None]:
    """The delivery error code of one record to each partition (None: written)."""
    out: dict[int, int | None] = {}
    p = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": "alice-secret", "message.timeout.ms": 10000,
                  "retries": 0})
    for part in range(partitions):
        p.produce(TOPIC, b"v", partition=part,
                  on_delivery=lambda err, m: out.__setitem__(m.partition(), None if err is None else err.code()))
    p.flush(30)
    return [out.get(part, -1) for part in range(partitions)]


@pytest.mark.timeout(300)
def test_acl_changes_apply_on_every_broker(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # PLAINTEXT: User:ANONYMOUS, a super user
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
    wait_until(lambda: len({cluster.leader(TOPIC, p) for p in range(3)}) == 3, 60,
               "one partition led by each broker")
    sasl = cluster.sasl_bootstrap  # type: ignore[attr-defined]
    # each registration names its listeners' protocols, as Kafka's /brokers/ids/<id> does
    assert cluster.zk_json("/brokers/ids/1")["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}
    denied = [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert _produce_errors(sasl, 3) == denied
    acl = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    one = AdminClient({"bootstrap.servers": next(iter(cluster.brokers.values())).bootstrap})
    one.create_acls([acl])[acl].result(30)
    assert cluster.zk_json(f"/kafka-acl/Topic/{TOPIC}")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]
    deadline = time.monotonic() + 30
    while (errs := _produce_errors(sasl, 3)) != [None] * 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert errs == [None] * 3  # each partition's leader authorized it
    flt = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    last = AdminClient({"bootstrap.servers": list(cluster.brokers.values())[-1].bootstrap})
    assert len(next(iter(last.delete_acls([flt]).values())).result(30)) == 1
    deadline = time.monotonic() + 30
    while (errs := _produce_errors(sasl, 3)) != denied and time.monotonic() < deadline:
        time.sleep(0.5)
    assert errs == denied
