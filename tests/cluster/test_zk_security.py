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

import os
import subprocess
import sys
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
from integration.broker import Broker, BrokerError, free_port
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
    zk.start(timeout=60)
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


def _configs(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "configs", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_scram_inter_broker_cluster_bootstrapped_with_configs_zookeeper(tmp_path: Path,
                                                                         sasl_zookeeper: Ensemble) -> None:
    """kafka-configs --zookeeper's job: the brokers' and a user's SCRAM credentials written in a SASL
    ZooKeeper (the CLI logs in from KAFKA_OPTS' JAAS file, as the brokers do) before any broker runs;
    then two brokers whose inter-broker listener is SASL SCRAM-SHA-512 replicate, and alice
    (SCRAM-SHA-256) produces and consumes."""
    jaas = _jaas(tmp_path / "jaas.conf", KAFKA_PASSWORD)
    env = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    c = Cluster(tmp_path, sasl_zookeeper, n=2, overrides={
        "zookeeper.set.acl": "true",
        "java.security.auth.login.config": str(jaas),
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CLIENT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";',
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:alice",
    }, zk_client_options=_sasl("kafka", KAFKA_PASSWORD))
    for broker in c.brokers.values():
        broker.overrides["listeners"] = f"CLIENT://127.0.0.1:{broker.port},INTERNAL://127.0.0.1:{free_port()}"
    c.ensure_chroot()
    for user, spec in (("broker", "SCRAM-SHA-512=[iterations=8192,password=broker-secret]"),
                       ("alice", "SCRAM-SHA-256=[password=alice-secret]")):
        r = _configs("--zookeeper", c.connect, "--alter", "--entity-type", "users", "--entity-name", user,
                     "--add-config", spec, env=env)
        assert r.returncode == 0, r.stderr
        assert f"Completed updating config for user {user}." in r.stdout
    r = _configs("--zookeeper", c.connect, "--describe", "--entity-type", "users", "--entity-name", "broker", env=env)
    assert r.stdout.strip() == "SCRAM credential configs for user-principal 'broker' are SCRAM-SHA-512=iterations=8192"
    # written as the brokers' identity, not world-readable
    acl = {(a.perms, a.id.scheme, a.id.id) for a in c.zkc.get_acls("/config/users/broker")[0]}
    assert acl == {(31, "sasl", "kafka")}
    # only SCRAM credentials go this way; a wrong ZooKeeper password is refused
    r = _configs("--zookeeper", c.connect, "--alter", "--entity-type", "topics", "--entity-name", "t",
                 "--add-config", "retention.ms=1", env=env)
    assert r.returncode == 1 and "only describes or alters users' SCRAM credentials" in r.stderr
    bad = _jaas(tmp_path / "bad.conf", "wrong")
    r = _configs("--zookeeper", c.connect, "--describe", "--entity-type", "users",
                 env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={bad}"})
    assert r.returncode == 1 and "ZooKeeper refused the SASL login of user 'kafka'" in r.stderr

    c.start()
    try:
        client = {"bootstrap.servers": c.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret"}
        admin = AdminClient(client)
        admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
        wait_until(lambda: all(len(c.state(TOPIC, p).get("isr", [])) == 2 for p in range(2)), 30, "ISR of 2")
        p = Producer({**client, "acks": "all", "message.timeout.ms": 30000})
        for i in range(10):
            p.produce(TOPIC, f"v{i}".encode(), partition=i % 2)
        assert p.flush(30) == 0
        cons = Consumer({**client, "group.id": "g", "auto.offset.reset": "earliest"})
        cons.subscribe([TOPIC])
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value() for m in cons.consume(10, 0.5) if not m.error()) or len(got) >= 10,
                   30, "10 records")
        cons.close()
        # the followers caught up over the SCRAM inter-broker listener
        for b in c.brokers.values():
            for part in range(2):
                wait_until(lambda b=b, part=part: sum(f.stat().st_size for f in b.segment_files(TOPIC, part)) > 0,
                           20, f"records of partition {part} on {b.name}")
    finally:
        c.stop()


def test_zookeeper_security_migration(tmp_path: Path, sasl_zookeeper: Ensemble) -> None:
    """A tree written without zookeeper.set.acl gets Kafka's ACLs from the migration tool, and open
    ACLs back with --zookeeper.acl unsecure; znodes outside Kafka's paths are left alone."""
    jaas = _jaas(tmp_path / "jaas.conf", KAFKA_PASSWORD)
    env = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    chroot = "/migrate-" + tmp_path.name[-8:]
    zk = KazooClient(hosts=sasl_zookeeper.connect, **_sasl("kafka", KAFKA_PASSWORD))
    zk.start(timeout=60)
    try:
        for path in ("/brokers/topics/t", "/config/users/alice", "/kafka-acl/Topic/t", "/controller_epoch",
                     "/unrelated/x"):
            zk.create(chroot + path, b"{}", makepath=True)  # open ACLs, as a broker without set.acl writes

        def acl(path: str) -> set[tuple[int, str, str]]:
            return {(a.perms, a.id.scheme, a.id.id) for a in zk.get_acls(chroot + path)[0]}

        def migrate(mode: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "odradek", "zookeeper-security-migration",
                                   "--zookeeper.acl", mode, "--zookeeper.connect", sasl_zookeeper.connect + chroot],
                                  capture_output=True, text=True, timeout=60, env={**os.environ, **env})

        opened = {(31, "world", "anyone")}
        r = migrate("secure", {"KAFKA_OPTS": ""})
        assert r.returncode == 1 and "zookeeper.set.acl is true, but the ZooKeeper client has no SASL login" in r.stderr
        r = migrate("secure", env)
        assert r.returncode == 0, r.stderr
        secure = {(31, "sasl", "kafka"), (1, "world", "anyone")}
        for path in ("/brokers", "/brokers/topics", "/brokers/topics/t", "/kafka-acl/Topic/t", "/controller_epoch",
                     "/config"):
            assert acl(path) == secure, path
        assert acl("/config/users") == acl("/config/users/alice") == {(31, "sasl", "kafka")}
        assert acl("/unrelated/x") == opened
        other = KazooClient(hosts=sasl_zookeeper.connect + chroot, **_sasl("other", OTHER_PASSWORD))
        other.start(timeout=10)
        try:
            with pytest.raises(NoAuthError):
                other.set("/brokers/topics/t", b"x")
            with pytest.raises(NoAuthError):
                other.get("/config/users/alice")
        finally:
            other.stop()
            other.close()
        r = migrate("unsecure", env)
        assert r.returncode == 0, r.stderr
        assert acl("/brokers/topics/t") == acl("/config/users/alice") == opened
    finally:
        zk.stop()
        zk.close()
