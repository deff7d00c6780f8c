"""The moonshot of issue 36: a real Kafka 4.4 broker (``process.roles=broker``, node 100, its own log dir formatted
by Kafka's ``kafka-storage format`` with our cluster id) against a one-voter quorum of ``odradek controller``.

What it shows, each step from Kafka's own server.log and tools:

- the broker fetches ``__cluster_metadata-0`` from our controller as an observer, replays the bootstrap
  records (metadata.version 4.4-IV2), registers (BrokerRegistration; the broker epoch is the offset of its
  RegisterBrokerRecord), is told it has caught up and is unfenced (BrokerHeartbeat, BrokerRegistrationChangeRecord
  fenced=-1), and starts;
- ``kafka-topics --create`` against the Kafka broker is forwarded to our controller (Envelope around
  CreateTopics), whose TopicRecord / ConfigRecord / PartitionRecords the broker applies: it leads both
  partitions, and ``kafka-topics --describe`` shows them with the config given;
- Kafka's console producer (idempotent: the broker asks our controller for a block of producer ids,
  AllocateProducerIds) writes to the topic and the console consumer reads the records back;
- ``kafka-topics --alter --partitions 3`` (CreatePartitions in an Envelope) gives the topic two more
  partitions the broker leads, a record keyed to partition 2 is produced and consumed from it, and a count
  that does not grow is refused with Kafka's message; ``kafka-topics --delete`` (DeleteTopics in an Envelope)
  removes a topic: the broker drops it from its metadata and its log dirs; ``kafka-configs --alter
  --entity-type topics`` (IncrementalAlterConfigs in an Envelope) sets and deletes a topic's configs, as
  ``kafka-configs --describe`` then shows; and Kafka's ``kafka-dump-log --cluster-metadata-decoder`` reads the
  PartitionRecords, the RemoveTopicRecord and the ConfigRecords in our controller's ``__cluster_metadata-0``.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kafka_peer
import pytest
from cluster.kraft import Controller
from integration.broker import free_port
from waiting import wait_until

from odradek.tiered.metadata import murmur2

from .conftest import Tool

pytestmark = pytest.mark.timeout(400)


class Setup:
    def __init__(self, base: Path) -> None:
        self.cluster_id = kafka_peer.new_cluster_id()
        port = free_port()
        self.voters = f"1@127.0.0.1:{port}"
        self.controller = Controller(base, 1, port, self.voters, {"metadata.max.idle.interval.ms": "500"})
        self.broker_port = free_port()
        self.broker = kafka_peer.KafkaNode(
            100, self.broker_port, free_port(), base / "b100", self.cluster_id, self.voters,
            heap=("-Xmx512M", "-Xms512M"),
            overrides={"process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}"})

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def server_log(self) -> str:
        path = self.broker.server_log
        return path.read_text(errors="replace") if path.exists() else ""

    def controller_log(self) -> str:
        return self.controller.log_path.read_text(errors="replace") if self.controller.log_path.exists() else ""


@pytest.fixture
def setup(tmp_path: Path, kafka_jars: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    s.controller.format(s.cluster_id)
    s.controller.start()
    try:
        s.broker.launch()
        yield s
    finally:
        if s.broker.proc is not None and s.broker.proc.poll() is None:
            s.broker.proc.send_signal(signal.SIGTERM)
            try:
                s.broker.proc.wait(30)
            except subprocess.TimeoutExpired:
                s.broker.proc.kill()
                s.broker.proc.wait()
        s.controller.stop()


def wait_started(s: Setup) -> str:
    wait_until(lambda: "Kafka Server started" in s.server_log() or s.broker.proc is None
               or s.broker.proc.poll() is not None, 180, "the Kafka broker to start")
    log = s.server_log()
    assert "Kafka Server started" in log, log[-5000:]
    return log


def test_kafka_broker_registers_is_unfenced_and_leads_a_topic_created_through_it(kafka: Tool, setup: Setup) -> None:
    s = setup
    log = wait_started(s)
    epoch = int(re.search(r"Successfully registered broker 100 with broker epoch (\d+)", log).group(1))  # type: ignore[union-attr]
    assert "The broker has caught up. Transitioning from STARTING to RECOVERY." in log
    assert "The broker has been unfenced. Transitioning from RECOVERY to RUNNING." in log
    assert "with metadata.version Optional[4.4-IV2]" in log
    assert "registering broker 100 (incarnation " in s.controller_log()
    assert f"broker_id=100, broker_epoch={epoch}, fenced=-1" in s.controller_log()

    kafka("kafka-topics", "--bootstrap-server", s.bootstrap, "--create", "--topic", "moon", "--partitions", "2",
          "--replication-factor", "1", "--config", "retention.ms=100000")
    out = kafka("kafka-topics", "--bootstrap-server", s.bootstrap, "--describe", "--topic", "moon").stdout
    assert "PartitionCount: 2" in out and "retention.ms=100000" in out, out
    rows = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", out)
    assert sorted(rows) == [("0", "100", "100", "100"), ("1", "100", "100", "100")], out
    assert "Leader moon-0 with topic id" in s.server_log()
    # the TopicRecord and its PartitionRecords reach the broker in one delta, as from Kafka's controller
    assert "Creating new partition moon-0 with topic id" in s.server_log()
    assert "Expected partition moon-0" not in s.server_log()

    lines = [f"record-{i}" for i in range(5)]
    kafka("kafka-console-producer", "--bootstrap-server", s.bootstrap, "--topic", "moon",
          input="\n".join(lines) + "\n", timeout=180)
    consumed = kafka("kafka-console-consumer", "--bootstrap-server", s.bootstrap, "--topic", "moon",
                     "--from-beginning", "--max-messages", "5", "--timeout-ms", "60000", timeout=180)
    assert sorted(consumed.stdout.split()) == lines, consumed.stdout + consumed.stderr


def test_kafka_broker_deletes_topics_adds_partitions_and_alters_configs_through_our_controller(
        kafka: Tool, setup: Setup) -> None:
    s = setup
    wait_started(s)
    b = s.bootstrap
    for topic, partitions in (("grow", "1"), ("gone", "2")):
        kafka("kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", partitions,
              "--replication-factor", "1")
    gone_out = kafka("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "gone").stdout
    gone_id = re.search(r"TopicId: (\S+)", gone_out).group(1)  # type: ignore[union-attr]
    grow_out = kafka("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "grow").stdout
    grow_id = re.search(r"TopicId: (\S+)", grow_out).group(1)  # type: ignore[union-attr]

    # CreatePartitions: two more partitions, led by the broker
    kafka("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", "grow", "--partitions", "3")

    def rows() -> list[tuple[str, ...]]:
        out = kafka("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "grow").stdout
        return sorted(re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", out))

    wait_until(lambda: len(rows()) == 3, 60, "the broker to see three partitions of grow")
    assert rows() == [(str(p), "100", "100", "100") for p in range(3)]
    wait_until(lambda: "Leader grow-2 with topic id" in s.server_log(), 60, "the broker to lead grow-2")
    # a new topic's records come in one delta (Kafka's broker logs "Expected partition grow-1 ... to exist" for
    # partitions added to a topic it knows, with Kafka's own controller too)
    assert "Creating new partition grow-0 with topic id" in s.server_log()
    refused = kafka("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", "grow", "--partitions", "2",
                    ok=False)
    assert refused.returncode != 0
    assert "The topic grow currently has 3 partition(s); 2 would not be an increase." in refused.stdout + refused.stderr

    # a record on the new partition 2 (the default partitioner: murmur2 of the key)
    key = next(k for k in (f"k{i}" for i in range(1000)) if (murmur2(k.encode()) & 0x7FFFFFFF) % 3 == 2)
    kafka("kafka-console-producer", "--bootstrap-server", b, "--topic", "grow", "--reader-property", "parse.key=true",
          "--reader-property", "key.separator=:", input=f"{key}:on-partition-2\n", timeout=180)
    consumed = kafka("kafka-console-consumer", "--bootstrap-server", b, "--topic", "grow", "--partition", "2",
                     "--offset", "earliest", "--max-messages", "1", "--timeout-ms", "60000", timeout=180)
    assert consumed.stdout.split() == ["on-partition-2"], consumed.stdout + consumed.stderr

    # DeleteTopics: the broker drops the topic from its metadata and its partitions from its log dir
    kafka("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", "gone")
    wait_until(lambda: "gone" not in kafka("kafka-topics", "--bootstrap-server", b, "--list").stdout.split(), 60,
               "the broker to forget the deleted topic")
    data = s.broker.log_dir
    wait_until(lambda: not (data / "gone-0").exists() and not (data / "gone-1").exists(), 60,
               "the broker to remove the deleted topic's partitions")
    assert (data / "grow-2").is_dir()

    # IncrementalAlterConfigs on a topic
    kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", "grow",
          "--add-config", "retention.ms=12345,cleanup.policy=[delete,compact]")

    def described() -> str:
        return kafka("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type", "topics",
                     "--entity-name", "grow").stdout

    wait_until(lambda: "retention.ms=12345" in described(), 60, "the broker to show the altered config")
    assert "cleanup.policy=delete,compact" in described()
    kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", "grow",
          "--delete-config", "retention.ms")
    wait_until(lambda: "retention.ms" not in described(), 60, "the broker to drop the deleted config")
    bad = kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name",
                "grow", "--add-config", "retention.ms=soon", ok=False)
    assert bad.returncode != 0 and "retention.ms" in bad.stdout + bad.stderr, bad.stdout + bad.stderr

    # Kafka's own decoder reads the records in our controller's metadata log
    segment = s.controller.data / "__cluster_metadata-0" / "00000000000000000000.log"
    out = kafka("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(segment)).stdout
    payloads = [json.loads(m) for m in re.findall(r"headerKeys: \[\] payload: (\{.*\})$", out, re.M)]
    removed = [p["data"] for p in payloads if p["type"] == "REMOVE_TOPIC_RECORD"]
    assert removed == [{"topicId": gone_id}], removed
    grown = sorted(p["data"]["partitionId"] for p in payloads
                   if p["type"] == "PARTITION_RECORD" and p["data"]["topicId"] == grow_id)
    assert grown == [0, 1, 2]
    new = [p["data"] for p in payloads if p["type"] == "PARTITION_RECORD" and p["data"]["topicId"] == grow_id
           and p["data"]["partitionId"] > 0]
    assert all(p["replicas"] == [100] and p["isr"] == [100] and p["leader"] == 100 for p in new), new
    configs = [(p["data"]["name"], p["data"]["value"]) for p in payloads if p["type"] == "CONFIG_RECORD"
               and p["data"]["resourceName"] == "grow"]
    assert ("retention.ms", "12345") in configs and ("cleanup.policy", "delete,compact") in configs
    assert configs[-1] == ("retention.ms", None), configs
