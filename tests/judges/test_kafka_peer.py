"""peers/kafka_peer.py: Apache Kafka 4.4 started here in KRaft mode (one combined node, three voters), and its
one-line refusals of bad input (Maven Central unreachable, a port taken, a log dir of another cluster)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import kafka_peer
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from integration.broker import free_port

from .conftest import Tool

PEER = Path(kafka_peer.__file__)


def peer(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PEER), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-peer: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_unreachable_maven_central_is_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "settings.xml"
    settings.write_text("<settings><mirrors><mirror><id>nowhere</id><mirrorOf>*</mirrorOf>"
                        f"<url>http://127.0.0.1:{free_port()}/maven2</url></mirror></mirrors>"
                        f"<localRepository>{tmp_path / 'repo'}</localRepository></settings>")
    proc = peer("fetch", env={"KAFKA_PEER_TARGET": str(tmp_path / "target"),
                              "KAFKA_PEER_MAVEN_ARGS": f"-s {settings}"})
    one_line_error(proc, "Maven could not fetch Kafka 4.4.0", "Could not transfer artifact")


def test_a_taken_port_is_one_line(kafka_jars: Path, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = peer("start", "--base-port", str(port), "--data-dir", str(tmp_path / "kp"))
    one_line_error(proc, f"port {port} on 127.0.0.1 is already in use")


def test_a_log_dir_of_another_cluster_is_one_line(kafka_jars: Path, tmp_path: Path) -> None:
    data = tmp_path / "kp" / "kafka-1" / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=1\n")
    proc = peer("start", "--base-port", str(free_port()), "--controller-base-port", str(free_port()),
                "--data-dir", str(tmp_path / "kp"), "--cluster-id", kafka_peer.new_cluster_id())
    one_line_error(proc, "is formatted for Kafka cluster AAAAAAAAAAAAAAAAAAAAAA")


def roundtrip(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(100):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "peer-test", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: list[int] = []
    while len(got) < 100:
        m = c.poll(30)
        assert m is not None and m.error() is None, m and m.error()
        got.append(int(m.value()))
    c.close()
    assert sorted(got) == list(range(100))


@pytest.mark.timeout(300)
def test_one_combined_node_serves_and_restarts(kafka_jars: Path, kafka: Tool, tmp_path: Path) -> None:
    cluster = kafka_peer.KafkaCluster(tmp_path / "k1", 1, ports=[free_port()], controller_ports=[free_port()],
                                      heap=("-Xmx512M", "-Xms512M"))
    with cluster:
        assert kafka_peer.read_meta_properties(cluster.nodes[0].log_dir)["cluster.id"] == cluster.cluster_id
        roundtrip(cluster.bootstrap, "peer1", 2, 1)
        out = kafka("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status").stdout
        assert f"ClusterId:              {cluster.cluster_id}" in out and "CurrentVoters:          [{\"id\": 1" in out
    again = kafka_peer.KafkaCluster(tmp_path / "k1", 1, ports=[cluster.nodes[0].port],
                                    controller_ports=[cluster.nodes[0].controller_port], heap=("-Xmx512M", "-Xms512M"))
    assert again.cluster_id == cluster.cluster_id  # the data dir's own id is kept
    with again:
        offsets = kafka("kafka-get-offsets", "--bootstrap-server", again.bootstrap, "--topic", "peer1").stdout.split()
        assert sorted(offsets) == ["peer1:0:50", "peer1:1:50"]


@pytest.mark.timeout(300)
def test_three_voters_serve_rf3(kafka_jars: Path, kafka: Tool, tmp_path: Path) -> None:
    cluster = kafka_peer.KafkaCluster(tmp_path / "k3", 3, ports=[free_port() for _ in range(3)],
                                      controller_ports=[free_port() for _ in range(3)], heap=("-Xmx384M", "-Xms384M"))
    with cluster:
        roundtrip(cluster.bootstrap, "peer3", 3, 3)
        out = kafka("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status").stdout
        assert out.count('"id": ') >= 3 and "CurrentVoters" in out
        desc = kafka("kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "peer3").stdout
        assert desc.count("Isr: ") == 3 and all(len(line.split("Isr: ")[1].split()[0].split(",")) == 3
                                                for line in desc.splitlines() if "Isr: " in line)


def test_cluster_ids_never_start_with_a_dash() -> None:
    """kafka-storage format -t -x... would read the id as an option: Kafka's Uuid.randomUuid draws again."""
    ids = [kafka_peer.new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == 2000


def test_the_default_node_is_plaintext_without_an_authorizer(tmp_path: Path) -> None:
    node = kafka_peer.KafkaCluster(tmp_path / "k", 1, ports=[29992], controller_ports=[30992]).nodes[0]
    props = node.properties()
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29992,CONTROLLER://127.0.0.1:30992"
    assert "authorizer.class.name" not in props and "super.users" not in props


def test_sasl_plain_users_make_a_sasl_listener_with_kafkas_authorizer(tmp_path: Path) -> None:
    node = kafka_peer.KafkaCluster(tmp_path / "k", 1, ports=[29992], controller_ports=[30992],
                                   plain_users={"admin": "a-pw", "bob": "b-pw"}).nodes[0]
    props = node.properties()
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:29992,CONTROLLER://127.0.0.1:30992"
    assert props["advertised.listeners"] == "SASL_PLAINTEXT://127.0.0.1:29992"
    assert props["listener.security.protocol.map"] == "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:admin;User:ANONYMOUS"  # the controller listener's principal too
    assert props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a-pw" '
        'user_admin="a-pw" user_bob="b-pw";')
    with pytest.raises(kafka_peer.PeerError, match="no quotes"):
        kafka_peer.sasl_plain_properties({"bo b": "x"}, 1, 2)
    one_line_error(peer("start", "--sasl-plain-user", "bob"), "is not NAME:PASSWORD")


@pytest.mark.timeout(300)
def test_a_sasl_node_refuses_a_user_without_acls(kafka_jars: Path, tmp_path: Path) -> None:
    cluster = kafka_peer.KafkaCluster(tmp_path / "ks", 1, ports=[free_port()], controller_ports=[free_port()],
                                      heap=("-Xmx512M", "-Xms512M"), plain_users={"admin": "a-pw", "bob": "b-pw"})

    def admin_as(user: str, password: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password})

    with cluster:
        admin, bob = admin_as("admin", "a-pw"), admin_as("bob", "b-pw")  # held: a dropped client fails its futures
        for f in admin.create_topics([NewTopic("sasl-peer", 1, 1)]).values():
            f.result(60)
        assert "sasl-peer" not in bob.list_topics(timeout=30).topics  # filtered: bob may not DESCRIBE it
        assert "sasl-peer" in admin.list_topics(timeout=30).topics
        del admin, bob
