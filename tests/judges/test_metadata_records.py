"""Kafka 4.4 and odradek.metadata read each other's KRaft metadata log, byte for byte, both ways.

* Odradek writes, Kafka reads: a ``__cluster_metadata-0`` segment and a snapshot written by odradek.metadata (every
  record type at every version Kafka 4.4 knows, LeaderChange, KRaftVersion and Voters control records, a snapshot's
  header and footer) are decoded by Kafka's ``kafka-dump-log --cluster-metadata-decoder`` (DumpLogSegments), which
  must print each record with the values written; and Kafka's own MetadataRecordSerde, reading each record and
  writing it again, must give the same bytes (a Java program run with Kafka's jars).
* Kafka writes, Odradek reads: one real Kafka 4.4 combined KRaft node (peers/kafka_peer.py) is formatted, started,
  given a topic with configs, an ACL, a SCRAM credential, a client quota and a cluster-wide broker config, and
  stopped; every record of its metadata log and bootstrap snapshot must decode here (no unknown type, no unknown
  tagged field), encode back to Kafka's bytes, and apply to an image that holds all of it.

Java and Kafka's jars are needed: without them these tests fail (conftest's ``kafka_jars``), never skip.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka_peer
import pytest
from confluent_kafka import TopicCollection
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
from integration.broker import free_port
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.leader_change_message.v0.data import Voter as LeaderVoter
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.static.primitive import i16, i64, u16
from unit.metadata.samples import sample_log

from odradek.client.wire import WireClient
from odradek.metadata.batches import MetadataBatch, build_control_batch, build_records_batch, read_file
from odradek.metadata.delta import apply_batches
from odradek.metadata.image import CONFIG_BROKER, CONFIG_TOPIC, EMPTY_IMAGE
from odradek.metadata.records import RECORD_TYPES, RecordAndVersion, encode_record
from odradek.metadata.schema import Array, Message, defaults
from odradek.protocol.records import decode_records, iter_batches

from .conftest import Tool

pytestmark = pytest.mark.timeout(420)

TIMESTAMP = 1_700_000_000_000
LEADER_EPOCH = 7


# ------------------------------------------------------------------------ Kafka's JSON of a record


def _camel(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _json_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):  # Kafka's Uuid.toString: URL-safe base64, no padding
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    if isinstance(value, bytes):  # bytes fields: standard base64
        return base64.b64encode(value).decode()
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, Message):
        return kafka_json(value, 0)
    return value


def kafka_json(msg: Message, version: int) -> dict[str, Any]:
    """The ``data`` object Kafka's generated JsonConverter prints for ``msg`` at ``version``: the fields the
    version has, tagged ones only when they differ from their default, in Kafka's camelCase names."""
    dflt = defaults(type(msg))
    out: dict[str, Any] = {}
    for decl in type(msg).FIELDS:
        if not decl.present(version):
            continue
        value = getattr(msg, decl.attr)
        if decl.tag is not None and value == dflt[decl.attr]:
            continue
        if isinstance(decl.type, Array) and not isinstance(decl.type.element, str):
            out[_camel(decl.attr)] = [kafka_json(m, version) for m in value]
        else:
            out[_camel(decl.attr)] = _json_value(value)
    return out


def _type_name(cls: type) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper()


def expected_payload(item: RecordAndVersion) -> dict[str, Any]:
    return {"type": _type_name(type(item.record)), "version": item.version,
            "data": kafka_json(item.record, item.version)}


# ------------------------------------------------------------------------ Odradek writes, Kafka reads

LEADER_CHANGE = LeaderChangeMessage(version=i16(0), leader_id=BrokerId(1),
                                    voters=(LeaderVoter(voter_id=BrokerId(1)), LeaderVoter(voter_id=BrokerId(2))),
                                    granting_voters=(LeaderVoter(voter_id=BrokerId(1)),))
VOTERS = VotersRecord(version=i16(0), voters=(Voter(
    voter_id=BrokerId(1), voter_directory_id=uuid.UUID("6a8e0f3c-1d2b-4c5d-9e7f-0a1b2c3d4e5f"),
    endpoints=(Endpoint(name="CONTROLLER", host="127.0.0.1", port=u16(19093)),),
    k_raft_version_feature=KRaftVersionFeature(min_supported_version=i16(0), max_supported_version=i16(1))),))


def write_segment(directory: Path) -> tuple[Path, list[RecordAndVersion]]:
    """A log segment: a LeaderChange batch, the sample records in batches of 1 to 9, KRaftVersion and Voters."""
    log = sample_log()
    data = build_control_batch([LEADER_CHANGE], base_offset=0, leader_epoch=LEADER_EPOCH, timestamp=TIMESTAMP)
    offset, size = 1, 1
    while offset - 1 < len(log):
        chunk = log[offset - 1 : offset - 1 + size]
        data += build_records_batch(chunk, base_offset=offset, leader_epoch=LEADER_EPOCH, timestamp=TIMESTAMP + offset)
        offset += len(chunk)
        size = size % 9 + 1
    data += build_control_batch([KRaftVersionRecord(version=i16(0), k_raft_version=i16(1)), VOTERS],
                                base_offset=offset, leader_epoch=LEADER_EPOCH, timestamp=TIMESTAMP + offset)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(data)
    return path, log


def _control_json(out: str, label: str) -> list[dict[str, Any]]:
    return [json.loads(m) for m in re.findall(rf"headerKeys: \[\] {label}:? (\{{.*\}})$", out, re.M)]


def test_kafka_dump_log_decodes_every_record_odradek_writes(kafka: Tool, tmp_path: Path) -> None:
    path, log = write_segment(tmp_path / "__cluster_metadata-0")
    out = kafka("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(path)).stdout
    batches = [line for line in out.splitlines() if line.startswith("baseOffset: ")]
    assert batches and all("isvalid: true" in b and f"partitionLeaderEpoch: {LEADER_EPOCH}" in b for b in batches), out
    assert sum("isControl: true" in b for b in batches) == 2
    payloads = [json.loads(m) for m in re.findall(r"headerKeys: \[\] payload: (\{.*\})$", out, re.M)]
    assert len(payloads) == len(log), out
    for i, (seen, item) in enumerate(zip(payloads, log, strict=True)):
        assert seen == expected_payload(item), f"record {i + 1} ({type(item.record).__name__} v{item.version})"
    assert set(RECORD_TYPES) == {type(item.record).API_KEY for item in log}
    assert _control_json(out, "LeaderChange") == [
        {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}, {"voterId": 2}], "grantingVoters": [{"voterId": 1}]}]
    assert _control_json(out, "KRaftVersion") == [{"version": 0, "kRaftVersion": 1}]
    assert _control_json(out, "KRaftVoters") == [{"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": "ao4PPB0rTF2efwobLD1OXw",
        "endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 19093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}]
    offsets = [int(m) for m in re.findall(r"^\| offset: (\d+) ", out, re.M)]
    assert offsets == list(range(len(log) + 3))


def test_kafka_dump_log_reads_an_odradek_snapshot(kafka: Tool, tmp_path: Path) -> None:
    records = sample_log()[:12]
    end = 1 + len(records) + 1
    data = build_control_batch([SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(TIMESTAMP))],
                               base_offset=0, leader_epoch=3, timestamp=TIMESTAMP)
    data += build_records_batch(records, base_offset=1, leader_epoch=3, timestamp=TIMESTAMP)
    data += build_control_batch([SnapshotFooterRecord(version=i16(0))], base_offset=end - 1, leader_epoch=3,
                                timestamp=TIMESTAMP)
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    path = directory / f"{end:020d}-{3:010d}.checkpoint"
    path.write_bytes(data)
    out = kafka("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(path)).stdout
    assert f"Snapshot end offset: {end}, epoch: 3" in out, out
    assert _control_json(out, "SnapshotHeader") == [{"version": 0, "lastContainedLogTimestamp": TIMESTAMP}]
    assert _control_json(out, "SnapshotFooter") == [{"version": 0}]
    payloads = [json.loads(m) for m in re.findall(r"headerKeys: \[\] payload: (\{.*\})$", out, re.M)]
    assert payloads == [expected_payload(r) for r in records]


# Kafka's MetadataRecordSerde reads each record of a file of [int32 size, value] and writes it again; it prints
# "same" or "differs <hex>" per record, or the exception of one it cannot read
REENCODE_JAVA = """
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class MetadataReencode {
    public static void main(String[] args) throws Exception {
        ByteBuffer in = ByteBuffer.wrap(Files.readAllBytes(Path.of(args[0])));
        int i = 0;
        while (in.hasRemaining()) {
            int size = in.getInt();
            ByteBuffer value = in.slice(in.position(), size);
            in.position(in.position() + size);
            ApiMessageAndVersion m = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(value.duplicate()), size);
            ObjectSerializationCache cache = new ObjectSerializationCache();
            ByteBuffer out = ByteBuffer.allocate(MetadataRecordSerde.INSTANCE.recordSize(m, cache));
            MetadataRecordSerde.INSTANCE.write(m, cache, new ByteBufferAccessor(out));
            out.flip();
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            System.out.println(i + " " + (ByteBuffer.wrap(bytes).equals(value) ? "same" : "differs " + HexFormat.of().formatHex(bytes)));
            i++;
        }
    }
}
"""


def test_kafkas_serde_writes_back_the_bytes_odradek_wrote(kafka_jars: Path, tmp_path: Path) -> None:
    log = sample_log()
    values = [encode_record(item.record, item.version) for item in log]
    data = tmp_path / "records.bin"
    data.write_bytes(b"".join(len(v).to_bytes(4, "big") + v for v in values))
    source = tmp_path / "MetadataReencode.java"
    source.write_text(REENCODE_JAVA)
    proc = subprocess.run([kafka_peer.find_java(), "-Xmx256M", "-cp", kafka_peer.classpath(), str(source), str(data)],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines == [f"{i} same" for i in range(len(values))], [
        (type(log[int(ln.split()[0])].record).__name__, ln) for ln in lines if not ln.endswith(" same")]


# ------------------------------------------------------------------------ Kafka writes, Odradek reads

TOPIC = "judge-orders"


@dataclass
class KafkaRun:
    metadata_dir: Path
    port: int
    topic_id: uuid.UUID


def _uuid_of(kafka_uuid: Any) -> uuid.UUID:
    most = kafka_uuid.get_most_significant_bits() & (2**64 - 1)
    least = kafka_uuid.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(most << 64) | least)


def _alter_broker_default(bootstrap: str, name: str, value: str) -> None:
    from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource
    from kio.static.primitive import i8

    with WireClient(bootstrap) as c:
        resp = c.request(44, 1, resources=(AlterConfigsResource(resource_type=i8(4), resource_name="", configs=(
            AlterableConfig(name=name, config_operation=i8(0), value=value),)),), validate_only=False)
    assert int(resp.responses[0].error_code) == 0, resp


def _alter_quota(bootstrap: str, user: str, key: str, value: float) -> None:
    from kio.schema.alter_client_quotas.v1.request import EntityData, EntryData, OpData
    from kio.static.primitive import f64

    with WireClient(bootstrap) as c:
        resp = c.request(49, 1, entries=(EntryData(entity=(EntityData(entity_type="user", entity_name=user),),
                                                   ops=(OpData(key=key, value=f64(value), remove=False),)),),
                         validate_only=False)
    assert int(resp.entries[0].error_code) == 0, resp


@pytest.fixture(scope="module")
def kafka_run(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaRun]:
    """One Kafka 4.4 combined node that took a topic, configs, an ACL, a SCRAM credential and a quota, stopped."""
    port = free_port()
    cluster = kafka_peer.KafkaCluster(
        tmp_path_factory.mktemp("kafka-metadata"), 1, ports=[port], controller_ports=[free_port()],
        overrides={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                   "super.users": "User:ANONYMOUS"},
        heap=("-Xmx512M", "-Xms512M"))
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1,
                                               config={"retention.ms": "123456", "cleanup.policy": "compact"})]
                                     ).values():
            f.result(60)
        acl = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(60)
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                              b"alice-secret")
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(60)
        _alter_quota(cluster.bootstrap, "alice", "producer_byte_rate", 1024.0)
        _alter_broker_default(cluster.bootstrap, "log.retention.ms", "7200000")
        described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(60)
        topic_id = _uuid_of(described.topic_id)
    yield KafkaRun(cluster.nodes[0].log_dir / "__cluster_metadata-0", port, topic_id)


def _batches(run: KafkaRun) -> tuple[list[MetadataBatch], list[MetadataBatch]]:
    snapshots = sorted(run.metadata_dir.glob("*.checkpoint"))
    segments = sorted(run.metadata_dir.glob("*.log"))
    assert snapshots and segments, sorted(p.name for p in run.metadata_dir.iterdir())
    snapshot = read_file(snapshots[-1])
    return snapshot, [b for seg in segments for b in read_file(seg)]


def test_every_record_of_kafkas_metadata_log_decodes_and_encodes_back(kafka_run: KafkaRun) -> None:
    snapshot, log = _batches(kafka_run)
    records = [e.record for b in (*snapshot, *log) for e in b.entries if e.record is not None]
    controls = [type(e.control).__name__ for b in (*snapshot, *log) for e in b.entries if e.control is not None]
    assert len(records) > 10, records
    assert "LeaderChangeMessage" in controls and "SnapshotHeaderRecord" in controls, controls
    assert [r.record for r in records if r.record.unknown_tags] == []  # every field of 4.4 declared
    seen = {(type(r.record).__name__, r.version) for r in records}
    # what Kafka 4.4 writes at its latest metadata.version: ELR (KIP-966) and cordoned log dirs in tagged fields
    assert {("PartitionRecord", 2), ("PartitionChangeRecord", 2), ("RegisterBrokerRecord", 4),
            ("BrokerRegistrationChangeRecord", 3), ("BeginTransactionRecord", 0), ("EndTransactionRecord", 0)} <= seen
    raw: dict[int, bytes | None] = {}
    for seg in sorted(kafka_run.metadata_dir.glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data):
            if not h.is_control:
                for r in decode_records(data[pos : pos + h.size]):
                    raw[r.offset] = r.value
    mine: dict[int, bytes | None] = {
        e.offset: encode_record(*e.record) for b in log for e in b.entries if e.record is not None}
    assert mine == raw  # Kafka's bytes, written again by odradek.metadata


def test_kafkas_metadata_log_applies_to_an_image(kafka_run: KafkaRun) -> None:
    snapshot, log = _batches(kafka_run)
    image = apply_batches(apply_batches(EMPTY_IMAGE, snapshot), log)
    assert image.metadata_version is not None and image.metadata_version >= 27  # 4.0-IV3 or later
    assert {"group.version", "transaction.version", "eligible.leader.replicas.version"} <= set(image.features)
    broker = image.brokers[1]
    assert [(e.name, e.host, e.port) for e in broker.listeners] == [("PLAINTEXT", "127.0.0.1", kafka_run.port)]
    assert "metadata.version" in broker.supported_features and broker.incarnation_id != uuid.UUID(int=0)
    assert 1 in image.controllers and image.controllers[1].listeners[0].name == "CONTROLLER"
    topic = image.topic(TOPIC)
    assert topic is not None and topic.topic_id == kafka_run.topic_id
    assert sorted(topic.partitions) == [0, 1, 2]
    for p in topic.partitions.values():
        assert p.replicas == (1,) and p.leader in (1, -1) and p.partition_epoch >= 0, p
        assert len(p.directories) == 1 and 1 in (*p.isr, *p.elr), p  # fenced at the stop: in the ELR (KIP-966)
    offsets = image.topic("__consumer_offsets")
    assert offsets is None or len(offsets.partitions) == 50
    assert dict(image.config(CONFIG_TOPIC, TOPIC)) == {"retention.ms": "123456", "cleanup.policy": "compact"}
    assert image.config(CONFIG_BROKER, "").get("log.retention.ms") == "7200000"
    [acl] = image.acls.values()
    assert (acl.principal, acl.resource_name, acl.host) == ("User:alice", TOPIC, "*")
    assert list(image.scram) == [(1, "alice")] and image.scram[(1, "alice")].iterations == 8192
    assert {k: dict(v) for k, v in image.client_quotas.items()} == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
    assert image.offset == max(e.offset for b in log for e in b.entries)
