"""KIP-630 against Kafka 4.4: an ``odradek controller`` with small snapshot and retention settings writes
``.checkpoint`` snapshots of its committed image and deletes the log they cover.

- Kafka's ``kafka-dump-log --cluster-metadata-decoder`` reads our latest snapshot: its end offset and epoch
  from the file name, the SnapshotHeader and SnapshotFooter control records, and the image as records
  (metadata.version, the Kafka broker's registration, the topic created through it and its partition);
- ``kafka-metadata-quorum describe --replication`` lists the Kafka broker fetching the log as an Observer
  (DescribeQuorum's observers);
- a second Kafka broker started after the log start moved past the bootstrap records can only learn
  metadata.version from the snapshot: it is answered with the snapshot's id, fetches it (FetchSnapshot),
  loads it, registers, is unfenced and has the topic in its metadata.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import kafka_peer
import pytest
from cluster.kraft import Controller
from confluent_kafka.admin import AdminClient
from integration.broker import free_port
from waiting import wait_until

from odradek.metadata.log_store import BOOTSTRAP_SNAPSHOT, PARTITION_DIR, read_snapshot_file, snapshot_id_of
from odradek.metadata.records import TopicRecord

from .conftest import Tool

pytestmark = pytest.mark.timeout(400)

SNAPSHOTS = {"metadata.max.idle.interval.ms": "200", "metadata.log.max.record.bytes.between.snapshots": "4096",
             "metadata.max.retention.bytes": "0", "metadata.log.segment.bytes": "8192"}


def _broker(base: Path, node_id: int, cluster_id: str, voters: str) -> kafka_peer.KafkaNode:
    port = free_port()
    return kafka_peer.KafkaNode(node_id, port, free_port(), base / f"b{node_id}", cluster_id, voters,
                                heap=("-Xmx512M", "-Xms512M"),
                                overrides={"process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{port}"})


def _started(b: kafka_peer.KafkaNode) -> str:
    def log() -> str:
        return b.server_log.read_text(errors="replace") if b.server_log.exists() else ""

    wait_until(lambda: "Kafka Server started" in log() or b.proc is None or b.proc.poll() is not None, 180,
               f"Kafka broker {b.node_id} to start")
    assert "Kafka Server started" in log(), log()[-5000:]
    return log()


def _stop(b: kafka_peer.KafkaNode) -> None:
    if b.proc is not None and b.proc.poll() is None:
        b.proc.send_signal(signal.SIGTERM)
        try:
            b.proc.wait(30)
        except subprocess.TimeoutExpired:
            b.proc.kill()
            b.proc.wait()


def test_kafka_reads_our_snapshot_and_a_late_broker_loads_it(kafka: Tool, tmp_path: Path, kafka_jars: Path) -> None:
    cluster_id = kafka_peer.new_cluster_id()
    port = free_port()
    voters = f"1@127.0.0.1:{port}"
    controller = Controller(tmp_path, 1, port, voters, SNAPSHOTS)
    controller.format(cluster_id)
    controller.start()
    brokers = [_broker(tmp_path, 100, cluster_id, voters), _broker(tmp_path, 101, cluster_id, voters)]
    meta = controller.data / PARTITION_DIR
    try:
        first = brokers[0]
        first.launch()
        _started(first)
        kafka("kafka-topics", "--bootstrap-server", first.bootstrap, "--create", "--topic", "snap", "--partitions", "1",
              "--replication-factor", "1")

        def snapshot_with_topic() -> Path | None:
            ids = sorted(sid for p in meta.iterdir() if (sid := snapshot_id_of(p.name)) is not None)
            if not ids or BOOTSTRAP_SNAPSHOT in ids:
                return None  # the log start has not moved past the bootstrap records yet
            path = meta / ids[-1].file_name
            try:
                batches = read_snapshot_file(path)
            except FileNotFoundError:  # deleted by retention meanwhile
                return None
            names = [e.record.record.name for b in batches for e in b.entries
                     if e.record is not None and isinstance(e.record.record, TopicRecord)]
            return path if "snap" in names else None

        path = wait_until(snapshot_with_topic, 90, "a snapshot holding the topic, the bootstrap snapshot deleted")
        sid = snapshot_id_of(path.name)
        assert sid is not None
        copy = tmp_path / "dump" / PARTITION_DIR / path.name  # retention may delete it while the tool reads
        copy.parent.mkdir(parents=True)
        copy.write_bytes(path.read_bytes())
        out = kafka("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(copy)).stdout
        assert f"Snapshot end offset: {sid.end_offset}, epoch: {sid.epoch}" in out, out
        batches = [line for line in out.splitlines() if line.startswith("baseOffset: ")]
        assert batches and all("isvalid: true" in b for b in batches), out
        assert re.search(r"SnapshotHeader:? \{", out) and re.search(r"SnapshotFooter:? \{", out), out
        payloads = [json.loads(m) for m in re.findall(r"headerKeys: \[\] payload: (\{.*\})$", out, re.M)]
        kinds = [p["type"] for p in payloads]
        assert kinds[0] == "FEATURE_LEVEL_RECORD" and payloads[0]["data"]["name"] == "metadata.version", kinds
        assert [p["data"]["brokerId"] for p in payloads if p["type"] == "REGISTER_BROKER_RECORD"] == [100]
        [topic] = [p["data"] for p in payloads if p["type"] == "TOPIC_RECORD"]
        assert topic["name"] == "snap"
        assert [(p["data"]["leader"], p["data"]["replicas"]) for p in payloads if p["type"] == "PARTITION_RECORD"
                and p["data"]["topicId"] == topic["topicId"]] == [(100, [100])]

        # DescribeQuorum: the Kafka broker fetching the log is an observer
        replication = kafka("kafka-metadata-quorum", "--bootstrap-controller", controller.address, "describe",
                            "--replication").stdout
        assert re.search(r"^100\s+\S+\s+\d+\s+\d+\s+.*Observer", replication, re.M), replication

        # a broker that joins now can only learn metadata.version from the snapshot (the bootstrap records are gone)
        late = brokers[1]
        late.launch()
        log = _started(late)
        assert "The broker has been unfenced. Transitioning from RECOVERY to RUNNING." in log
        assert "with metadata.version Optional[4.4-IV2]" in log
        fetched = sorted(p.name for p in (late.log_dir / PARTITION_DIR).glob("*.checkpoint"))
        assert any((f := snapshot_id_of(n)) is not None and f.end_offset > 0 for n in fetched), fetched
        # its metadata (from the snapshot, then the log after it) has the topic led by broker 100; (kafka-topics
        # --describe is not used: it lists reassignments, a request our controller does not take yet)
        assert "snap" in kafka("kafka-topics", "--bootstrap-server", late.bootstrap, "--list").stdout.split()
        md = AdminClient({"bootstrap.servers": late.bootstrap}).list_topics(topic="snap", timeout=30)
        part = md.topics["snap"].partitions[0]
        assert (part.leader, part.replicas, part.isrs) == (100, [100], [100])
    finally:
        for b in brokers:
            _stop(b)
        controller.stop()
