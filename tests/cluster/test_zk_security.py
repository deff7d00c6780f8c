"""Brokers on a SASL ZooKeeper (issue 15): the brokers log in with SASL DIGEST-MD5 from the JAAS
file's ``Client`` section (named by the ``java.security.auth.login.config`` setting, or by a
``-D`` word of ``KAFKA_OPTS``), and with ``zookeeper.set.acl=true`` every znode they create
carries Kafka's ZkData.defaultAcls: ``sasl:kafka`` ALL, world READ except on the sensitive paths
(``/config/users``: SCRAM credentials). The ZooKeeper server refuses unauthenticated clients
(``enforce.auth.schemes=sasl``); another SASL user (not the brokers') reads what is world-readable
and nothing else, and writes nothing. A wrong password stops the broker at start-up with
the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from integration.broker import Broker, BrokerError
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from waiting import wait_until

from .cluster import FAST, Cluster
from .zk import Ensemble

KAFKA_PASSWORD = "kafka-zk-secret"
OTHER_PASSWORD = "other-zk-secret"
TOPIC = "zk-secured"


def _sasl(user: str, password: str) -> dict[str, Any]:
    return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": password}}


def _jaas(path: Path, password: str) -> Path:
    path.write_text(
        "// the broker's ZooKeeper login\n"
        "Client {\n"
        "    org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'    username="kafka"\n    password="{password}";\n'
        "};\n"
        "KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="x"; };\n')
    return path


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    ens = Ensemble(tmp_path_factory.mktemp("zk-sasl"), 1,
                   sasl_users={"kafka": KAFKA_PASSWORD, "other": OTHER_PASSWORD}, require_sasl=True).start()
    yield ens
    ens.stop()


@pytest.fixture
def cluster(tmp_path: Path, sasl_zookeeper: Ensemble) -> Iterator[Cluster]:
    jaas = _jaas(tmp_path / "jaas.conf", KAFKA_PASSWORD)
    c = Cluster(tmp_path, sasl_zookeeper, n=2, overrides={
        "zookeeper.set.acl": "true",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }, zk_client_options=_sasl("kafka", KAFKA_PASSWORD))
    # broker 1 names the JAAS file in its settings, broker 2 as kafka-server-start.sh users do
    c.brokers[1].overrides["java.security.auth.login.config"] = str(jaas)
    c.brokers[2].env["KAFKA_OPTS"] = f"-Xmx1G -Djava.security.auth.login.config={jaas}"
    c.start()
    yield c
    c.stop()


def _other(c: Cluster) -> KazooClient:
    zk = KazooClient(hosts=c.connect, **_sasl("other", OTHER_PASSWORD))
    zk.start(timeout=10)
    return zk


def test_brokers_on_sasl_zookeeper_set_kafkas_acls(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")])["alice"].result(30)
    binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(TOPIC, f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    got: list[bytes] = []
    wait_until(lambda: got.extend(m.value() for m in c.consume(20, 0.5) if not m.error()) or len(got) >= 20,
               30, "20 records")
    c.close()

    zk = cluster.zkc  # logged in as kafka, the brokers' identity
    wait_until(lambda: zk.exists("/config/users/alice") is not None, 10, "alice's credentials")

    def acl(path: str) -> set[tuple[int, str, str]]:
        return {(a.perms, a.id.scheme, a.id.id) for a in zk.get_acls(path)[0]}

    secure = {(31, "sasl", "kafka"), (1, "world", "anyone")}
    for path in ("/brokers", "/brokers/ids", "/brokers/ids/1", "/brokers/topics", f"/brokers/topics/{TOPIC}",
                 f"/brokers/topics/{TOPIC}/partitions/0/state", "/controller", "/controller_epoch", "/config/topics",
                 f"/config/topics/{TOPIC}", f"/kafka-acl/Topic/{TOPIC}", "/kafka-acl-changes"):
        assert acl(path) == secure, path
    for path in ("/config/users", "/config/users/alice"):
        assert acl(path) == {(31, "sasl", "kafka")}, path

    other = _other(cluster)
    try:
        assert other.get(f"/brokers/topics/{TOPIC}")[0]  # world READ
        assert sorted(other.get_children("/brokers/ids")) == ["1", "2"]
        attempts = [
            lambda: other.get("/config/users/alice"),
            lambda: other.get_children("/config/users"),
            lambda: other.set(f"/brokers/topics/{TOPIC}", b"{}"),
            lambda: other.set("/controller_epoch", b"999"),
            lambda: other.create("/brokers/topics/evil", b"{}"),
            lambda: other.create("/config/users/mallory", b"{}"),
            lambda: other.delete(f"/kafka-acl/Topic/{TOPIC}"),
            lambda: other.delete("/brokers/ids/1"),
        ]
        for i, attempt in enumerate(attempts):
            with pytest.raises(NoAuthError):
                attempt()
                pytest.fail(f"attempt {i} was allowed")
    finally:
        other.stop()
        other.close()

    # an unauthenticated client does not even get a session
    anon = KazooClient(hosts=cluster.connect, connection_retry={"max_tries": 0})
    refused = False
    try:
        anon.start(timeout=5)
        anon.get_children("/brokers/ids")
    except Exception:  # kazoo's SessionClosedRequireSaslError, or the session closed under the request
        refused = True
    finally:
        anon.stop()
        anon.close()
    assert refused, "an unauthenticated client read /brokers/ids"


def test_wrong_zookeeper_password_stops_start_up(tmp_path: Path, sasl_zookeeper: Ensemble) -> None:
    jaas = _jaas(tmp_path / "jaas.conf", "not-the-password")
    b = Broker(tmp_path / "b", {**FAST, "broker.id": "1", "zookeeper.connect": sasl_zookeeper.connect,
                                "java.security.auth.login.config": str(jaas)})
    with pytest.raises(BrokerError) as e:
        b.start(timeout=60)
    assert b.exit_codes == [2]
    assert "ZooKeeper refused the SASL login of user 'kafka'" in str(e.value)
    assert "check the username and password" in str(e.value)


def test_set_acl_without_a_login_is_refused(tmp_path: Path, sasl_zookeeper: Ensemble) -> None:
    b = Broker(tmp_path / "b", {**FAST, "broker.id": "1", "zookeeper.connect": sasl_zookeeper.connect,
                                "zookeeper.set.acl": "true"})
    with pytest.raises(BrokerError) as e:
        b.start(timeout=60)
    assert b.exit_codes == [2]
    assert "zookeeper.set.acl is true, but the ZooKeeper client has no SASL login" in str(e.value)
