"""Kafka 4.4's tools on a three-broker Odradek cluster (Debian's ZooKeeper): kafka-verifiable-producer and
kafka-verifiable-consumer across a leader's kill -9 (no acknowledged record missing, none duplicated, with the
idempotent producer), kafka-reassign-partitions (generate, execute, verify) and kafka-leader-election
(preferred and unclean)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka_peer
import pytest
from cluster.cluster import Cluster
from cluster.test_replication import create
from cluster.zk import Ensemble
from confluent_kafka import Consumer, TopicPartition
from waiting import wait_until

from .conftest import Tool

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    ens = Ensemble(tmp_path_factory.mktemp("zk"), 1).start()
    yield ens
    ens.stop()


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def read_values(bootstrap: str, topic: str, partitions: int, total: int) -> list[tuple[int, int, str]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "judge-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 60
    while len(out) < total and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            out.append((m.partition(), m.offset(), m.value().decode()))
    c.close()
    return out


def test_verifiable_producer_and_consumer_across_a_leader_kill(kafka_jars: Path, cluster: Cluster,
                                                               tmp_path: Path) -> None:
    topic, n = "verifiable", 6000
    create(cluster, topic, 3, 3, **{"min.insync.replicas": "2"})
    config = tmp_path / "producer.properties"
    config.write_text("enable.idempotence=true\nacks=all\nretries=2147483647\ndelivery.timeout.ms=120000\n"
                      "linger.ms=5\n")
    cmd = kafka_peer.tool_command("kafka-verifiable-producer", "--bootstrap-server", cluster.bootstrap,
                                  "--topic", topic, "--max-messages", str(n), "--throughput", "1000",
                                  "--acks", "-1", "--producer.config", str(config))
    import subprocess

    out_path = tmp_path / "producer.out"
    with open(out_path, "w") as out, open(tmp_path / "producer.err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

        def acks() -> Counter[int]:
            return Counter(e["partition"] for e in events(out_path.read_text())
                           if e["name"] == "producer_send_success")

        # the leader of a partition being written dies mid-stream. The Java producer's partitioner (no keys:
        # sticky, KIP-794) moves to another partition after each batch.size bytes, at random: the 6000 small
        # records fill only a few such batches, so a partition may get no record at all (seen: 3616, 2384
        # and 0). Waiting for acknowledgements on every partition then timed out (issue 33); a fixed 2.5 s
        # after launch was, on a loaded machine, before the first batch of the partition whose leader it
        # killed.
        wait_until(lambda: max(acks().values(), default=0) >= 50, 60, "50 acknowledged records on a partition",
                   interval=0.05, detail=lambda: (tmp_path / "producer.err").read_text()[-2000:])
        written = acks().most_common(1)[0][0]
        victim = cluster.leader(topic, written)
        cluster.kill(victim)
        time.sleep(2.0)
        cluster.brokers[victim].start()
        try:
            code = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
    if code != 0:  # what was acknowledged where, what the tool said last, and the brokers' view
        so_far = events(out_path.read_text())
        acks = Counter(e["partition"] for e in so_far if e["name"] == "producer_send_success")
        pytest.fail(f"the producer ended with {code} after killing broker {victim}: acks per partition "
                    f"{dict(acks)} of {n}; last events {so_far[-3:]}\n"
                    f"stderr: {(tmp_path / 'producer.err').read_text()[-3000:]}\n"
                    f"partition states now: {[cluster.state(topic, p) for p in range(3)]}")
    evs = events(out_path.read_text())
    acked = [e for e in evs if e["name"] == "producer_send_success"]
    failed = [e for e in evs if e["name"] == "producer_send_error"]
    assert len(acked) == n and not failed, failed[:3]
    [data] = [e for e in evs if e["name"] == "tool_data"]
    assert data["sent"] == n and data["acked"] == n

    stored = read_values(cluster.bootstrap, topic, 3, n)
    counts = Counter(v for _, _, v in stored)
    assert not [v for v, k in counts.items() if k > 1], "a value stored twice"
    assert {e["value"] for e in acked} <= set(counts), "an acknowledged record is missing"
    assert {(e["partition"], e["offset"]) for e in acked} == {(p, o) for p, o, _ in stored}

    consumer = kafka_peer.run_tool("kafka-verifiable-consumer", "--bootstrap-server", cluster.bootstrap,
                                   "--topic", topic, "--group-id", "verifiable-group", "--max-messages", str(n),
                                   "--reset-policy", "earliest", timeout=180)
    assert consumer.returncode == 0, consumer.stderr[-3000:]
    cevs = events(consumer.stdout)
    consumed = sum(p["count"] for e in cevs if e["name"] == "records_consumed" for p in e["partitions"])
    assert consumed == n
    commits = [e for e in cevs if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    last: dict[int, int] = {}
    for e in commits:
        for p in e["offsets"]:
            last[p["partition"]] = max(last.get(p["partition"], 0), p["offset"])
    assert sum(last.values()) == n


def test_reassign_partitions_generate_execute_verify(kafka: Tool, cluster: Cluster, tmp_path: Path) -> None:
    topic = "moving"
    create(cluster, topic, 2, 2)
    boot = ("--bootstrap-server", cluster.bootstrap)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    gen = kafka("kafka-reassign-partitions", *boot, "--topics-to-move-json-file", str(topics), "--broker-list",
                "2,3", "--generate").stdout
    current = json.loads(gen.split("Current partition replica assignment\n")[1].split("\n")[0])
    proposed = json.loads(gen.split("Proposed partition reassignment configuration\n")[1].split("\n")[0])
    assert {p["partition"] for p in current["partitions"]} == {0, 1}
    assert all(set(p["replicas"]) <= {2, 3} and len(p["replicas"]) == 2 for p in proposed["partitions"])

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]},
                                                             {"topic": topic, "partition": 1, "replicas": [2, 3]}]}))
    out = kafka("kafka-reassign-partitions", *boot, "--reassignment-json-file", str(plan), "--execute").stdout
    assert "Successfully started partition reassignments for moving-0,moving-1" in out

    def verified() -> bool:
        text = kafka("kafka-reassign-partitions", *boot, "--reassignment-json-file", str(plan), "--verify").stdout
        return ("Reassignment of partition moving-0 is completed." in text
                and "Reassignment of partition moving-1 is completed." in text)

    wait_until(verified, 60, "the reassignment to complete")
    desc = kafka("kafka-topics", *boot, "--describe", "--topic", topic).stdout
    assert "Partition: 0\tLeader: " in desc and "\tReplicas: 3,2\t" in desc and "\tReplicas: 2,3\t" in desc


def test_leader_election_preferred_and_unclean(kafka: Tool, cluster: Cluster) -> None:
    topic = "elect"
    create(cluster, topic, 1, 3)
    boot = ("--bootstrap-server", cluster.bootstrap)
    preferred = cluster.leader(topic, 0)
    cluster.brokers[preferred].stop()
    wait_until(lambda: cluster.leader(topic, 0) not in (-1, preferred), 30, "another leader")
    cluster.brokers[preferred].start()
    wait_until(lambda: preferred in cluster.state(topic, 0)["isr"], 30, "the preferred replica back in the ISR")
    out = kafka("kafka-leader-election", *boot, "--election-type", "preferred", "--topic", topic,
                "--partition", "0").stdout
    assert out.strip() == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
    wait_until(lambda: cluster.leader(topic, 0) == preferred, 30, "the preferred leader")
    again = kafka("kafka-leader-election", *boot, "--election-type", "preferred", "--all-topic-partitions").stdout
    assert f"Valid replica already elected for partitions {topic}-0" in again or f"{topic}-0" not in again

    unclean = kafka("kafka-leader-election", *boot, "--election-type", "unclean", "--topic", topic,
                    "--partition", "0").stdout
    assert f"Valid replica already elected for partitions {topic}-0" in unclean
