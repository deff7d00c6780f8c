"""Kafka judges the storage side of Odradek's KRaft mode: ``odradek storage`` and odradek.metadata.log_store.

* ``odradek storage format`` writes what Kafka 4.4's ``kafka-storage format`` writes: Kafka's ``kafka-storage info``
  accepts the directories; the bootstrap snapshot dumps (``kafka-dump-log --cluster-metadata-decoder``) to the same
  records as the one Kafka's own tool writes for the same flags; the two tools print the same lines and refuse the
  same bad input with the same messages.
* The strongest check: a real Kafka 4.4 combined node (peers/kafka_peer.py) starts on a directory formatted by
  ``odradek storage format --standalone --release-version 4.1-IV1`` and comes up with our cluster id, our
  directory id as its voter's and that metadata.version (``kafka-cluster``, ``kafka-metadata-quorum``,
  ``kafka-features``).
* Odradek writes, Kafka reads: a snapshot written by ``MetadataLog.write_snapshot`` is read by Kafka's metadata
  shell (``kafka-metadata-shell --snapshot FILE``), which shows its topics, partitions and configs. Maven Central
  has no kafka-shell 4.4.0 (peers/kafka-shell/pom.xml), so this is Kafka 4.3.1's shell, and the snapshot is at
  metadata.version 4.3-IV0, the newest it knows (a later level makes its loader fail without a word).
* Kafka writes, Odradek reads: the ``__cluster_metadata-0`` the Kafka node left (segments, and a snapshot Kafka
  wrote itself once ``metadata.log.max.snapshot.interval.ms`` passed) loads with ``MetadataLog.load`` into an
  image with its topics, configs and features.

Java and Kafka's jars are needed: without them these tests fail (conftest's ``kafka_jars``), never skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kafka_peer
import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from integration.broker import free_port

from odradek.metadata.batches import build_records_batch
from odradek.metadata.features import bootstrap_levels, bootstrap_records
from odradek.metadata.image import CONFIG_TOPIC
from odradek.metadata.log_store import PARTITION_DIR, MetadataLog, snapshot_id_of
from odradek.metadata.records import ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord
from odradek.server.meta_properties import uuid_text

from .conftest import Tool

pytestmark = pytest.mark.timeout(600)

HOST = kafka_peer.HOST
T0 = 1_700_000_000_000


def odradek_storage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "storage", *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def write_props(path: Path, base: Path, *, dynamic: bool, node_id: int = 1, port: int = 39092,
                controller_port: int = 39093, extra: dict[str, str] | None = None) -> Path:
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": f"{base}/data1,{base}/data2",
        "metadata.log.dir": f"{base}/meta",
    }
    if dynamic:
        props["controller.quorum.bootstrap.servers"] = f"{HOST}:{controller_port}"
    else:
        props["controller.quorum.voters"] = f"{node_id}@{HOST}:{controller_port}"
    props.update(extra or {})
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


# ------------------------------------------------------------------------ format: Kafka's tool as the spec


def test_kafka_storage_info_accepts_directories_odradek_formatted(kafka: Tool, tmp_path: Path) -> None:
    cluster_id = kafka_peer.new_cluster_id()
    for dynamic in (False, True):
        base = tmp_path / ("dynamic" if dynamic else "static")
        props = write_props(tmp_path / f"{base.name}.properties", base, dynamic=dynamic)
        flags = ["--standalone"] if dynamic else []
        done = odradek_storage("format", "-t", cluster_id, "-c", str(props), *flags)
        assert done.returncode == 0, done.stderr
        info = kafka("kafka-storage", "info", "-c", str(props)).stdout
        assert f"Found log directories:\n  {base}/data1\n  {base}/data2\n  {base}/meta\n" in info, info
        found = re.search(r"Found metadata: \{cluster\.id=(\S+), directory\.id=(\S+), node\.id=1, version=1\}", info)
        assert found and found.group(1) == cluster_id, info
        assert "Found problem" not in info, info
        # odradek's own info says the same
        mine = odradek_storage("info", "-c", str(props))
        assert mine.returncode == 0 and mine.stdout == info, (mine.stdout, info)


def _normalized_dump(kafka: Tool, checkpoint: Path) -> list[str]:
    out = kafka("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(checkpoint)).stdout
    out = re.sub(r"CreateTime: \d+", "CreateTime: T", out)
    out = re.sub(r"crc: \d+", "crc: C", out)
    out = re.sub(r'"lastContainedLogTimestamp":\d+', '"lastContainedLogTimestamp":T', out)
    out = re.sub(r'"voterDirectoryId":"[^"]+"', '"voterDirectoryId":D', out)
    return [ln for ln in out.splitlines() if not ln.startswith("Dumping ")]


@pytest.mark.parametrize("flags", [
    ("--standalone",), ("--no-initial-controllers",), ("--initial-controllers",), (), ("-r", "3.8-IV0"),
    ("-r", "4.1-IV1", "--standalone"), ("-f", "group.version=0", "-f", "transaction.version=1"),
    ("-S", 'SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]',
     "-S", 'SCRAM-SHA-256=[name=bob,password=bob-secret,salt="c2FsdA=="]'),
], ids=["standalone", "no-initial-controllers", "initial-controllers", "static", "static-3.8", "standalone-4.1",
        "features", "add-scram"])
def test_the_bootstrap_snapshot_is_the_one_kafkas_tool_writes(kafka: Tool, tmp_path: Path,
                                                               flags: tuple[str, ...]) -> None:
    cluster_id = kafka_peer.new_cluster_id()
    dynamic = any(f.startswith("--") for f in flags)
    if flags == ("--initial-controllers",):
        flags = ("--initial-controllers", f"1@{HOST}:39093:JEXY6aqzQY-32P5TStzaFg,2@{HOST}:39094:MvDxzVmcRsaTz33bUuRU6A")
    outputs = {}
    dumps = {}
    for who in ("kafka", "odradek"):
        base = tmp_path / who
        props = write_props(tmp_path / f"{who}.properties", base, dynamic=dynamic)
        args = ("format", "-t", cluster_id, "-c", str(props), *flags)
        proc = kafka("kafka-storage", *args) if who == "kafka" else odradek_storage(*args)
        assert proc.returncode == 0, proc.stderr
        outputs[who] = sorted(proc.stdout.replace(str(base), "BASE").splitlines())
        meta = base / "meta"
        assert sorted(p.name for p in (meta / PARTITION_DIR).iterdir()) == ["00000000000000000000-0000000000.checkpoint"]
        dumps[who] = _normalized_dump(kafka, meta / PARTITION_DIR / "00000000000000000000-0000000000.checkpoint")
        assert not (meta / "bootstrap.checkpoint").exists()  # Kafka 4.4 keeps the bootstrap records in the snapshot
        for d in ("data1", "data2"):
            assert sorted(p.name for p in (base / d).iterdir()) == ["meta.properties"]
        props_of = {d: kafka_peer.read_meta_properties(base / d) for d in ("data1", "data2", "meta")}
        assert len({p["directory.id"] for p in props_of.values()}) == 3
        for p in props_of.values():
            assert (p["version"], p["node.id"], p["cluster.id"]) == ("1", "1", cluster_id)
        if flags and flags[0] == "--initial-controllers":
            assert props_of["meta"]["directory.id"] == "JEXY6aqzQY-32P5TStzaFg"
    assert outputs["odradek"] == outputs["kafka"]
    assert dumps["odradek"] == dumps["kafka"]


def test_bad_input_is_refused_with_kafkas_messages(kafka: Tool, tmp_path: Path) -> None:
    cluster_id = kafka_peer.new_cluster_id()
    other_id = kafka_peer.new_cluster_id()

    def both(props: Path, *args: str) -> tuple[str, str]:
        theirs = kafka("kafka-storage", *args, "-c", str(props), ok=False)
        mine = odradek_storage(*args, "-c", str(props))
        assert theirs.returncode == 1 and mine.returncode == 1, (theirs, mine)
        return theirs.stderr, mine.stderr.strip()

    static = write_props(tmp_path / "static.properties", tmp_path / "s", dynamic=False)
    dynamic = write_props(tmp_path / "dynamic.properties", tmp_path / "d", dynamic=True)
    for props, args in (
        (dynamic, ("format", "-t", cluster_id)),  # a controller with no voters and no quorum flag
        (static, ("format", "-t", cluster_id, "--standalone")),
        (static, ("format", "-t", cluster_id, "-f", "metadata.version=20", "-r", "3.8-IV0")),
        (static, ("format", "-t", cluster_id, "-f", "foo.version=1")),
        (static, ("format", "-t", cluster_id, "-f", "kraft.version=1")),
        (static, ("format", "-t", cluster_id, "-f", "group.version=5")),
        (static, ("format", "-t", cluster_id, "-r", "3.8-IV0", "-f", "eligible.leader.replicas.version=1")),
        (static, ("format", "-t", cluster_id, "-r", "3.2-IV0")),
        (static, ("format", "-t", cluster_id, "-f", "group.version")),
        (dynamic, ("format", "-t", cluster_id, "-I", f"1@{HOST}:39093")),
        (static, ("format", "-t", cluster_id, "-S", "SCRAM-SHA-1=[name=a,password=b]")),
        (static, ("format", "-t", cluster_id, "-S", "SCRAM-SHA-256=[password=b]")),
        (static, ("format", "-t", cluster_id, "-S", "SCRAM-SHA-256=[name=a,password=b,iterations=100]")),
        (static, ("format", "-t", cluster_id, "-S", "SCRAM-SHA-256=[name=a,saltedpassword=YCE=]")),
        (static, ("format", "-t", cluster_id, "-S", "SCRAM-SHA-256=[name=a,password=b,foo=1]")),
        (static, ("format", "-t", cluster_id, "-r", "3.4-IV0", "-S", "SCRAM-SHA-256=[name=a,password=b]")),
    ):
        theirs, mine = both(props, *args)
        assert mine and mine in theirs, (args, theirs, mine)
    # formatted once: again is refused, another cluster always, --ignore-formatted passes
    single = write_props(tmp_path / "single.properties", tmp_path / "one", dynamic=False,
                         extra={"log.dirs": str(tmp_path / "one" / "meta")})
    assert odradek_storage("format", "-t", cluster_id, "-c", str(single)).returncode == 0
    theirs, mine = both(single, "format", "-t", cluster_id)
    assert mine == f"Log directory {tmp_path}/one/meta is already formatted. Use --ignore-formatted to ignore this " \
        "directory and format the others." and mine in theirs
    theirs, mine = both(single, "format", "-t", other_id)
    assert mine in theirs and f"Expected {other_id}, but read {cluster_id}" in mine
    again = odradek_storage("format", "-t", cluster_id, "-c", str(single), "--ignore-formatted")
    assert again.returncode == 0 and again.stdout == "All of the log directories are already formatted.\n"
    # info on a directory that is not there, and one not formatted
    missing = write_props(tmp_path / "missing.properties", tmp_path / "nowhere", dynamic=False)
    (tmp_path / "nowhere" / "data1").mkdir(parents=True)
    theirs_info = kafka("kafka-storage", "info", "-c", str(missing), ok=False)
    mine_info = odradek_storage("info", "-c", str(missing))
    assert (mine_info.returncode, mine_info.stdout) == (theirs_info.returncode, theirs_info.stdout) == (1, mine_info.stdout)


# ------------------------------------------------------------------------ a Kafka node on an odradek-formatted dir


@dataclass
class StandaloneNode(kafka_peer.KafkaNode):
    """A combined node of a dynamic quorum (KIP-853): controller.quorum.bootstrap.servers, no voters."""

    def properties(self) -> dict[str, str]:
        props = super().properties()
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = f"{HOST}:{self.controller_port}"
        return props


@dataclass
class KafkaOnOdradek:
    cluster_id: str
    directory_id: str  # of the metadata log dir, as our format wrote it
    seen: str  # kafka-cluster cluster-id, kafka-metadata-quorum describe --status, kafka-features describe
    metadata_copy: Path  # the node's __cluster_metadata-0, copied after it stopped
    topic_ids: dict[str, uuid.UUID]


def _wait(what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _uuid_of(kafka_uuid: Any) -> uuid.UUID:
    most = kafka_uuid.get_most_significant_bits() & (2**64 - 1)
    least = kafka_uuid.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(most << 64) | least)


def _latest_snapshot_end(metadata_dir: Path) -> int:
    return max((sid.end_offset for p in metadata_dir.iterdir() if (sid := snapshot_id_of(p.name)) is not None),
               default=0)


def _topic_id(admin: AdminClient, name: str, timeout: float = 60.0) -> uuid.UUID:
    """The topic's id, once the broker's metadata has it (a topic just created may not be there yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _uuid_of(admin.describe_topics(TopicCollection([name]))[name].result(30).topic_id)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def kafka_on_odradek(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaOnOdradek]:
    """One Kafka 4.4 combined node started on a directory ``odradek storage format --standalone -r 4.1-IV1``
    formatted; it takes a topic, writes a snapshot of its own (after a second), takes another topic, stops."""
    base = tmp_path_factory.mktemp("kafka-on-odradek")
    cluster_id = kafka_peer.new_cluster_id()
    node = StandaloneNode(node_id=1, port=free_port(), controller_port=free_port(), base_dir=base / "kafka-1",
                          cluster_id=cluster_id, voters="", heap=("-Xmx512M", "-Xms512M"),
                          overrides={"metadata.log.max.snapshot.interval.ms": "1000"})
    config = node.write_config()
    formatted = odradek_storage("format", "-t", cluster_id, "-c", str(config), "--standalone", "-r", "4.1-IV1")
    assert formatted.returncode == 0, formatted.stderr
    directory_id = kafka_peer.read_meta_properties(node.log_dir)["directory.id"]
    metadata_dir = node.log_dir / PARTITION_DIR
    try:
        node.launch()  # node.format() finds our meta.properties of this cluster and leaves the directory alone
        _wait("the Kafka node to start", node.ready)
        bootstrap = node.bootstrap
        seen = "\n".join(kafka_peer.run_tool(*cmd, check=True).stdout for cmd in (
            ("kafka-cluster", "cluster-id", "--bootstrap-server", bootstrap),
            ("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status"),
            ("kafka-features", "--bootstrap-server", bootstrap, "describe")))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        snapshot_end = _latest_snapshot_end(metadata_dir)
        for f in admin.create_topics([NewTopic("before-snapshot", num_partitions=3, replication_factor=1,
                                               config={"retention.ms": "4242"})]).values():
            f.result(60)
        # Kafka snapshots once a second while records come: wait for one that holds the topic
        _wait("a snapshot Kafka writes itself", lambda: _latest_snapshot_end(metadata_dir) > snapshot_end)
        for f in admin.create_topics([NewTopic("after-snapshot", num_partitions=2, replication_factor=1,
                                               config={"cleanup.policy": "compact"})]).values():
            f.result(60)
        topic_ids = {name: _topic_id(admin, name) for name in ("before-snapshot", "after-snapshot")}
        node.stop()
        copy = base / "copy" / PARTITION_DIR
        shutil.copytree(metadata_dir, copy)
        yield KafkaOnOdradek(cluster_id, directory_id, seen, copy, topic_ids)
    finally:
        node.kill()


def test_a_kafka_node_starts_on_a_directory_odradek_formatted(kafka_on_odradek: KafkaOnOdradek) -> None:
    seen = kafka_on_odradek.seen
    assert f"Cluster ID: {kafka_on_odradek.cluster_id}" in seen, seen
    assert re.search(rf"ClusterId:\s+{kafka_on_odradek.cluster_id}", seen), seen
    voters = re.search(r"CurrentVoters:\s+(\[.*\])", seen)
    assert voters and f'"directoryId": "{kafka_on_odradek.directory_id}"' in voters.group(1).replace('":"', '": "'), seen
    assert re.search(r"Feature: metadata\.version\s.*FinalizedVersionLevel: 4\.1-IV1", seen), seen
    # the levels 4.1-IV1 starts with (Kafka's version-mapping), kraft.version 1 for the dynamic quorum
    for name, level in (("kraft.version", 1), ("group.version", 1), ("transaction.version", 2),
                        ("eligible.leader.replicas.version", 1), ("share.version", 0), ("streams.version", 0)):
        assert re.search(rf"Feature: {re.escape(name)}\s.*FinalizedVersionLevel: {level}\s", seen + "\n"), (name, seen)


def test_odradek_loads_the_metadata_log_a_kafka_node_left(kafka_on_odradek: KafkaOnOdradek) -> None:
    copy = kafka_on_odradek.metadata_copy
    snapshots = sorted(sid for p in copy.iterdir() if (sid := snapshot_id_of(p.name)) is not None)
    assert snapshots[-1].end_offset > 0, snapshots  # Kafka wrote one of its own
    ml = MetadataLog.open(copy.parent, now_ms=int(time.time() * 1000))
    assert ml.latest_snapshot() == snapshots[-1]
    image = ml.load()
    assert image.metadata_version == 27  # 4.1-IV1
    assert image.features.get("group.version") == 1 and "share.version" not in image.features
    for name, parts in (("before-snapshot", 3), ("after-snapshot", 2)):
        topic = image.topic(name)
        assert topic is not None and topic.topic_id == kafka_on_odradek.topic_ids[name]
        assert sorted(topic.partitions) == list(range(parts))
        assert all(p.replicas == (1,) for p in topic.partitions.values())
    assert dict(image.config(CONFIG_TOPIC, "before-snapshot")) == {"retention.ms": "4242"}
    assert 1 in image.brokers and 1 in image.controllers
    # every record the log holds after the snapshot was applied too (Kafka may have snapshotted the whole log,
    # then the image ends where the snapshot does)
    assert image.offset == ml.log_end_offset - 1 >= snapshots[-1].end_offset - 1, (image.offset, ml.log_end_offset)
    ml.close()


# ------------------------------------------------------------------------ Kafka's metadata shell on our snapshot


@pytest.fixture(scope="module")
def metadata_shell(kafka_jars: Path) -> Path:
    try:
        return kafka_peer.fetch_metadata_shell()
    except kafka_peer.PeerError as e:
        pytest.fail(f"Kafka's metadata shell is needed for this test: {e}")


def test_kafkas_metadata_shell_reads_an_odradek_snapshot(metadata_shell: Path, tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    records: list[MetadataRecord] = [r.record for r in bootstrap_records(bootstrap_levels("4.3-IV0", {},
                                                                                           dynamic_quorum=False))]
    topics = {"shell-orders": uuid.uuid4(), "shell-payments": uuid.uuid4()}
    for name, tid in topics.items():
        records.append(TopicRecord(name=name, topic_id=tid))
        records += [PartitionRecord(partition_id=p, topic_id=tid, replicas=(1, 2, 3), isr=(1, 2), leader=2,
                                    leader_epoch=5, partition_epoch=7) for p in range(2)]
    records.append(ConfigRecord(resource_type=CONFIG_TOPIC, resource_name="shell-orders", name="retention.ms",
                                value="86400000"))
    ml.append(build_records_batch(records, base_offset=0, leader_epoch=3, timestamp=T0), T0)
    ml.update_high_watermark(ml.log_end_offset)
    sid = ml.write_snapshot(ml.load(), now_ms=T0)
    ml.close()
    path = tmp_path / PARTITION_DIR / sid.file_name

    def shell(*command: str, loaded: str) -> str:
        """The shell's output, run again (up to eight times) until it shows the loaded image: in its
        non-interactive mode Kafka's shell may run the command before its loader has published the image
        it caught up to (an empty image then: ``Optional.empty``, no topics). Once in a landing check a run
        of it never ended (120 s, where it takes 2-5 s): such a run is also tried again."""
        out = ""
        for _ in range(8):
            try:
                proc = kafka_peer.run_metadata_shell(path, *command, timeout=45.0)
            except subprocess.TimeoutExpired:
                continue
            assert proc.returncode == 0, proc.stderr[-3000:]
            out = proc.stdout
            if loaded in out:
                break
        return out

    assert shell("ls", "/image/topics/byName", loaded="shell-").split() == sorted(topics)
    tree = shell("tree", "/image/topics/byName/shell-orders", loaded="PartitionRegistration")
    assert f"id:\n  {uuid_text(topics['shell-orders'])}" in tree
    parts = re.findall(r"PartitionRegistration\((.*)\)", tree)
    assert len(parts) == 2 and all("replicas=[1, 2, 3]" in p and "isr=[1, 2]" in p and "leader=2," in p
                                   and "leaderEpoch=5" in p and "partitionEpoch=7" in p for p in parts), tree
    assert "retention.ms:\n    86400000" in shell("tree", "/image/configs", loaded="TOPIC:")
    assert "Optional[4.3-IV0]" in shell("cat", "/image/features/metadataVersion", loaded="Optional[")
    # the shell reads the file as a log: the offset is the last record's inside the file (from 0, the header
    # first), the epoch and time ours
    provenance = shell("cat", "/image/provenance", loaded=f"epoch {sid.epoch},")
    assert provenance.strip() == f"offset {len(records)}, epoch 3, time 2023-11-14T22:13:20Z[UTC]", provenance
