"""Tiered storage (KIP-405) end to end: a real broker process with remote.log.storage.system.enable and the
filesystem store, and confluent-kafka clients. A topic with remote.storage.enable, small segments and a small
local.retention.bytes: closed segments are copied to the store and deleted locally, a consumer from the
beginning reads every record back byte for byte (the old ones from the remote tier), ListOffsets earliest
(-2) and earliest local (-4, KIP-1005) differ, and all of it holds again after a restart (the remote log
metadata replayed from __remote_log_metadata)."""

from __future__ import annotations

import datetime
import importlib
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from waiting import wait_until

from odradek.client.wire import WireClient
from odradek.tiered.metadata import REMOTE_LOG_METADATA_TOPIC

from .broker import Broker, BrokerFactory
from .clients import (
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume_confluent,
    create_topic,
    make_messages,
    produce,
    unique,
)

SEGMENT = 16384
LOCAL_RETENTION = 3 * SEGMENT
SMALL_BATCHES = {"batch.size": 4096, "linger.ms": 1}


def tiered_overrides(remote_dir: Path) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "filesystem",
        "rsm.config.dir": str(remote_dir),
        "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "log.retention.check.interval.ms": "200",
        "log.segment.delete.delay.ms": "0",
    }


def list_offset(bootstrap: str, topic: str, spec: int) -> int:
    """ListOffsets v9 (KIP-1005's earliest local -4 and latest tiered -5) for partition 0."""
    from kio.schema.list_offsets.v9 import request as lo

    with WireClient(bootstrap) as w:
        r = w.request(2, 9, replica_id=-1, isolation_level=0,
                      topics=(lo.ListOffsetsTopic(name=topic, partitions=(
                          lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=spec),)),))
    part = r.topics[0].partitions[0]
    assert int(part.error_code) == 0, part
    return int(part.offset)


def metadata_events(bootstrap: str, topic: str) -> list[tuple[int, Any]]:
    """(partition, record) of every __remote_log_metadata record about ``topic``, decoded with
    odradek.tiered.metadata.deserialize (Kafka 4.4's RemoteLogMetadataSerde, byte for byte)."""
    from odradek.tiered.metadata import deserialize

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(REMOTE_LOG_METADATA_TOPIC, p, 0) for p in range(50)])
        out: list[tuple[int, Any]] = []
        idle = 0
        while idle < 10:
            batch = [m for m in c.consume(1000, timeout=0.3) if not m.error()]
            idle = 0 if batch else idle + 1
            for m in batch:
                assert m.key() is None
                rec = deserialize(m.value())
                if getattr(rec, "topic_id_partition", None) is not None and rec.topic_id_partition.topic == topic:
                    out.append((m.partition(), rec))
        return out
    finally:
        c.close()


def remote_segments(remote_dir: Path, topic: str) -> list[Path]:
    return sorted(p for d in remote_dir.glob(f"{topic}-0-*") for p in d.iterdir() if not p.name.startswith("."))


@pytest.mark.timeout(240)
def test_a_tiered_topic_is_read_back_from_the_remote_tier(make_broker: BrokerFactory, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic = unique("tiered")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    msgs = make_messages(3000, "tiered", value_size=150)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    expect = Expectation(msgs, acks)

    def tail_only(broker: Broker) -> bool:
        local = broker.segment_files(topic, 0)
        return len(local) <= LOCAL_RETENTION // SEGMENT + 2 and list_offset(broker.bootstrap, topic, -4) > 0

    wait_until(lambda: tail_only(b), 90, "the local log to hold the tail", interval=0.5)
    copied = remote_segments(remote, topic)
    assert len(copied) >= 10, copied
    # what Kafka's LogSegmentData carries: the .log, its indexes, the producer snapshot at its end and the
    # leader epochs up to its end (the checkpoint format: version, count, "epoch start offset")
    second = copied[1]
    start = second.name[:20]
    assert sorted(f.name for f in second.iterdir()) == sorted(
        [f"{start}.log", f"{start}.index", f"{start}.timeindex", f"{start}.snapshot", "leader-epoch-checkpoint"])
    assert (second / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (second / f"{start}.log").stat().st_size > SEGMENT // 2
    local_start = list_offset(b.bootstrap, topic, -4)
    assert list_offset(b.bootstrap, topic, -2) == 0  # earliest: the remote log start
    assert local_start > 1000
    assert list_offset(b.bootstrap, topic, -5) >= local_start - 1  # latest tiered: the highest offset copied
    assert int(b.segment_files(topic, 0)[0].name[:20]) >= local_start  # local retention may have moved on since
    check_consumed(expect, consume_confluent(b.bootstrap, topic, {0: 0}, len(msgs)))

    # the remote log metadata comes back from __remote_log_metadata: here replayed by the first fetch from the
    # remote tier, as the task's first run is an hour away
    b.stop()
    b.overrides["remote.log.manager.task.interval.ms"] = "3600000"
    b.start()
    assert list_offset(b.bootstrap, topic, -2) == 0
    assert list_offset(b.bootstrap, topic, -4) >= local_start
    check_consumed(expect, consume_confluent(b.bootstrap, topic, {0: 0}, len(msgs)))
    b.stop()
    b.overrides["remote.log.manager.task.interval.ms"] = "200"
    b.start()
    # a read from the middle of the remote tier, and more records copied after the restart
    more = make_messages(1000, "tiered2", value_size=150)
    acks2 = produce("confluent", b.bootstrap, topic, more, partition=0, conf=SMALL_BATCHES)
    wait_until(lambda: list_offset(b.bootstrap, topic, -4) > 3000, 90, "the new records to be tiered", interval=0.5)
    check_consumed(Expectation(msgs + more, acks + acks2),
                   consume_confluent(b.bootstrap, topic, {0: 0}, len(msgs) + len(more)))
    mid = consume_confluent(b.bootstrap, topic, {0: 1234}, 10)
    assert [m.offset for m in mid[:10]] == list(range(1234, 1244))


def _create_error(bootstrap: str, topic: str, config: dict[str, str]) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, 1, 1, config=config)], operation_timeout=10)
    with pytest.raises(KafkaException) as e:
        fs[topic].result(timeout=20)
    err = e.value.args[0]
    assert err.name() == "INVALID_CONFIG", err
    return str(err.str())


def test_remote_storage_refused_as_kafka_refuses_it(make_broker: BrokerFactory, tmp_path: Path) -> None:
    off = make_broker()
    assert _create_error(off.bootstrap, unique("t"), {"remote.storage.enable": "true"}) == (
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
    on = make_broker(tiered_overrides(tmp_path / "remote"))
    assert _create_error(on.bootstrap, unique("t"), {"remote.storage.enable": "true", "cleanup.policy": "compact"}) \
        == "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list."
    assert _create_error(on.bootstrap, unique("t"), {"remote.storage.enable": "true", "retention.bytes": "100",
                                                     "local.retention.bytes": "200"}) == (
        "Invalid value 200 for configuration local.retention.bytes: Value must not be more than retention.bytes "
        "property value: 100")


@pytest.mark.timeout(180)
def test_remote_retention_deletes_remote_segments(make_broker: BrokerFactory, tmp_path: Path) -> None:
    """retention.bytes over the whole log deletes the oldest remote segments (DELETE_SEGMENT_STARTED,
    the store's delete, DELETE_SEGMENT_FINISHED) and moves the log start offset; a consumer from the
    earliest offset reads the rest, from both tiers."""
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic = unique("expire")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION,
                                         "retention.bytes": 10 * SEGMENT})
    msgs = make_messages(3000, "expire", value_size=150)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    last_closed = int(b.segment_files(topic, 0)[-1].name[:20]) - 1

    def settled() -> bool:  # while copies lag, retention.bytes counts the uncopied segments: remote ones go first
        return (list_offset(b.bootstrap, topic, -5) >= last_closed and len(remote_segments(remote, topic)) <= 10
                and 0 < list_offset(b.bootstrap, topic, -2) < list_offset(b.bootstrap, topic, -4))

    wait_until(settled, 90, "every closed segment copied, local and remote retention applied", interval=0.5)
    start = list_offset(b.bootstrap, topic, -2)
    local_start = list_offset(b.bootstrap, topic, -4)
    assert 0 < start < local_start
    assert int(remote_segments(remote, topic)[0].name[:20]) == start  # the store's oldest segment starts there
    kept = [(m, a) for m, a in zip(msgs, acks, strict=True) if a[1] >= start]
    check_consumed(Expectation([m for m, _ in kept], [a for _, a in kept]),
                   consume_confluent(b.bootstrap, topic, {0: start}, len(kept)))
    # __remote_log_metadata holds each copy's STARTED then FINISHED record, and each deletion's STARTED then
    # FINISHED, all in the one partition Kafka's partitioner picks for the topic's partition
    events = metadata_events(b.bootstrap, topic)
    assert len({p for p, _ in events}) == 1
    states: dict[object, list[str]] = {}
    for _, m in events:
        states.setdefault(m.segment_id, []).append(m.state.name)
    deleted = [v for v in states.values() if v[-1] == "DELETE_SEGMENT_FINISHED"]
    assert deleted and all(v == ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
                                 "DELETE_SEGMENT_FINISHED"] for v in deleted)
    assert all(v[:2] == ["COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED"] for v in states.values())
    b.restart()
    assert list_offset(b.bootstrap, topic, -2) >= start


@pytest.mark.timeout(240)
def test_read_committed_from_the_remote_tier_skips_aborted_transactions(
        make_broker: BrokerFactory, tmp_path: Path) -> None:
    """A read_committed consumer from offset 0 of a tiered topic gets the committed records only, those read
    from the remote tier included: the aborted transactions come from the remote segments' transaction
    indexes (and the local ones past them)."""
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic = unique("txn")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tx"), "linger.ms": 1,
                  "batch.size": 4096})
    p.init_transactions(30)
    committed: list[bytes] = []
    for i in range(45):
        p.begin_transaction()
        values = [f"{i}-{j}-".encode() + b"x" * 150 for j in range(40)]
        for v in values:
            p.produce(topic, value=v, partition=0)
        if i % 3 == 1:
            assert p.flush(30) == 0  # the records are in the log before the abort (else never sent)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
    end = list_offset(b.bootstrap, topic, -1)
    wait_until(lambda: list_offset(b.bootstrap, topic, -4) > end // 2, 90, "half the log in the remote tier only",
               interval=0.5)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, len(committed), **{"isolation.level": "read_committed"})
    assert [m.value for m in got] == committed
    everything = consume_confluent(b.bootstrap, topic, {0: 0}, 45 * 40, **{"isolation.level": "read_uncommitted"})
    assert len(everything) == 45 * 40  # the aborted records are in the log, for read_uncommitted


@pytest.mark.timeout(240)
def test_the_s3_store_end_to_end(make_broker: BrokerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with remote.log.storage.manager.class.name=s3, against moto's S3 server: the segments are
    objects of the bucket, and a consumer from offset 0 reads them back through ranged GETs."""
    from .test_tiered_storage import running_moto

    with running_moto(tmp_path / "moto.log") as s3:
        s3.client().create_bucket(Bucket="tiers")
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
            monkeypatch.setenv(k, v)  # boto3's credential chain, in the broker process
        overrides = {**tiered_overrides(tmp_path / "unused"), "remote.log.storage.manager.class.name": "s3",
                     "rsm.config.bucket": "tiers", "rsm.config.prefix": "cluster-1/",
                     "rsm.config.endpoint.url": s3.endpoint, "rsm.config.region": "us-east-1"}
        b = make_broker(overrides)
        topic = unique("s3")
        create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                             "local.retention.bytes": LOCAL_RETENTION})
        msgs = make_messages(2000, "s3", value_size=150)
        acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
        wait_until(lambda: list_offset(b.bootstrap, topic, -4) > 1000, 90, "the local log to hold the tail",
                   interval=0.5)
        keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="tiers", Prefix=f"cluster-1/{topic}-0-")
                .get("Contents", [])]
        assert sum(k.endswith(".log") for k in keys) >= 10, keys[:10]
        assert list_offset(b.bootstrap, topic, -2) == 0
        check_consumed(Expectation(msgs, acks), consume_confluent(b.bootstrap, topic, {0: 0}, len(msgs)))
        b.stop()


def test_an_s3_store_without_a_bucket_stops_the_broker(make_broker: BrokerFactory, tmp_path: Path) -> None:
    b = make_broker({**tiered_overrides(tmp_path / "r"), "remote.log.storage.manager.class.name": "s3"}, start=False)
    with pytest.raises(AssertionError):
        b.start(timeout=30)
    assert "remote.log.storage.manager.class.name=s3 needs rsm.config.bucket" in b.log_text()


def list_offsets_at(bootstrap: str, topic: str, spec: int, version: int = 11,
                    isolation: int = 0) -> tuple[int, int, int, int]:
    """(error code, offset, timestamp, leader epoch) of ListOffsets ``version`` for partition 0, built with the
    fields that version has."""
    lo = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    part: dict[str, Any] = {"partition_index": 0, "timestamp": spec}
    if version >= 4:
        part["current_leader_epoch"] = -1
    fields: dict[str, Any] = {"replica_id": -1, "topics": (
        lo.ListOffsetsTopic(name=topic, partitions=(lo.ListOffsetsPartition(**part),)),)}
    if version >= 2:
        fields["isolation_level"] = isolation
    if version >= 10:
        fields["timeout"] = datetime.timedelta(seconds=20)
    with WireClient(bootstrap) as w:
        r = w.request(2, version, **fields)
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1))


UNSUPPORTED_VERSION = 35


@pytest.mark.timeout(240)
def test_list_offsets_by_timestamp_and_the_tiered_specs(make_broker: BrokerFactory, tmp_path: Path) -> None:
    """Kafka 4.4's ListOffsets on a tiered partition: a timestamp whose first record lies in a segment now only
    in the remote tier is found from the remote segments' time indexes (confluent-kafka's offsets_for_times);
    earliest (-2) is the remote log start, earliest local (-4) the local log start, latest tiered (-5) the
    highest offset copied, earliest pending upload (-6, v11) the offset after it; each spec is refused with
    UNSUPPORTED_VERSION below the version that brought it; a topic that is not tiered answers -4 as -2 and
    -5 and -6 with no offset and no epoch."""
    b = make_broker(tiered_overrides(tmp_path / "remote"))
    topic = unique("lots")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    n = 3000
    base = int(time.time() * 1000) - 600_000  # record i at base + i
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, **SMALL_BATCHES})
    for i in range(n):
        p.produce(topic, value=b"%06d" % i + b"v" * 150, partition=0, timestamp=base + i)
    assert p.flush(30) == 0

    seen = {"start": -1, "since": 0.0}

    def settled() -> bool:  # the log holds the tail only, every closed segment is copied, and the local start has
        local = b.segment_files(topic, 0)  # not moved for 2 s (ten retention checks: local retention is done)
        start, now = list_offset(b.bootstrap, topic, -4), time.monotonic()
        if start != seen["start"]:
            seen.update(start=start, since=now)
        return (len(local) <= LOCAL_RETENTION // SEGMENT + 2 and start > n // 2 and now - seen["since"] >= 2.0
                and list_offset(b.bootstrap, topic, -5) == int(local[-1].name[:20]) - 1)

    wait_until(settled, 90, "the log to be tiered up to its active segment", interval=0.5)
    local_start = list_offset(b.bootstrap, topic, -4)
    highest = list_offset(b.bootstrap, topic, -5)
    _, _, _, epoch = list_offsets_at(b.bootstrap, topic, -1)
    assert epoch >= 0

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g")})
    try:
        def lookup(ts: int) -> TopicPartition:  # one partition a request: librdkafka merges a partition's asks
            [tp] = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=30)
            assert tp.error is None, tp
            return tp

        targets = [0, 1, 777, local_start - 1, local_start, local_start + 5, n - 1]
        got = [lookup(base + k) for k in targets]
        assert [tp.offset for tp in got] == targets
        assert {tp.leader_epoch for tp in got} == {epoch}  # the found batch's epoch
        assert lookup(base - 5_000).offset == 0
        assert lookup(base + n).offset == -1  # past every record: no offset (OFFSET_END)
    finally:
        c.close()
    # the same with the wire: the timestamp found, and the lookups of a read_committed consumer
    assert list_offsets_at(b.bootstrap, topic, base + 1234) == (0, 1234, base + 1234, epoch)
    assert list_offsets_at(b.bootstrap, topic, base + 1234, version=9, isolation=1) == (0, 1234, base + 1234, epoch)
    assert list_offsets_at(b.bootstrap, topic, base + 1234, version=1)[:2] == (0, 1234)

    # the specs (Kafka's UnifiedLog.fetchOffsetByTimestamp), with the epochs of Kafka's leader-epoch cache
    assert list_offsets_at(b.bootstrap, topic, -2) == (0, 0, -1, epoch)
    assert list_offsets_at(b.bootstrap, topic, -4) == (0, local_start, -1, epoch)
    assert list_offsets_at(b.bootstrap, topic, -5) == (0, highest, -1, epoch)
    assert list_offsets_at(b.bootstrap, topic, -6) == (0, highest + 1, -1, epoch)
    assert list_offsets_at(b.bootstrap, topic, -1) == (0, n, -1, epoch)
    # each spec from the version that brought it (Kafka's ReplicaManager.isListOffsetsTimestampUnsupported)
    for spec, first in ((-3, 7), (-4, 8), (-5, 9), (-6, 11)):
        assert list_offsets_at(b.bootstrap, topic, spec, version=first - 1)[0] == UNSUPPORTED_VERSION, spec
        assert list_offsets_at(b.bootstrap, topic, spec, version=first)[0] == 0, spec
    assert list_offsets_at(b.bootstrap, topic, -7)[0] == UNSUPPORTED_VERSION  # no such spec

    plain = unique("plain")
    create_topic(b.bootstrap, plain, 1)
    pp = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(5):
        pp.produce(plain, value=b"x", partition=0, timestamp=base + i)
    assert pp.flush(30) == 0
    _, _, _, plain_epoch = list_offsets_at(b.bootstrap, plain, -1)
    assert list_offsets_at(b.bootstrap, plain, -4) == list_offsets_at(b.bootstrap, plain, -2) == (0, 0, -1, plain_epoch)
    assert list_offsets_at(b.bootstrap, plain, -5) == (0, -1, -1, -1)
    assert list_offsets_at(b.bootstrap, plain, -6) == (0, -1, -1, -1)
    assert list_offsets_at(b.bootstrap, plain, base + 3) == (0, 3, base + 3, plain_epoch)


def _alter(bootstrap: str, topic: str, configs: dict[str, str]) -> str | None:
    """IncrementalAlterConfigs SET of ``configs`` on ``topic``: None, or the INVALID_CONFIG message."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    try:
        admin.incremental_alter_configs([res])[res].result(20)
    except KafkaException as e:
        err = e.args[0]
        assert err.name() == "INVALID_CONFIG", err
        return str(err.str())
    return None


@pytest.mark.timeout(240)
def test_turning_remote_storage_off_as_kafka_4_4_allows_it(make_broker: BrokerFactory, tmp_path: Path) -> None:
    """KIP-950 in Kafka 4.4: remote.storage.enable goes from true to false only with remote.log.delete.on.disable
    (else INVALID_CONFIG with Kafka's message); remote.log.copy.disable needs local.retention.* equal to
    retention.*; turned off, the leader deletes every remote segment (DELETE_SEGMENT_STARTED then FINISHED) and
    its log starts at the local log start offset (Kafka's TopicConfigHandler.maybeUpdateRemoteLogComponents)."""
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic = unique("off")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    produce("confluent", b.bootstrap, topic, make_messages(2000, "off", value_size=150), partition=0,
            conf=SMALL_BATCHES)
    wait_until(lambda: list_offset(b.bootstrap, topic, -4) > 1000, 90, "the log to be tiered", interval=0.5)
    assert _alter(b.bootstrap, topic, {"remote.storage.enable": "false"}) == (
        "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data "
        "and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want "
        "to disable remote storage and delete all remote data, please set "
        "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
    assert _alter(b.bootstrap, topic, {"remote.log.copy.disable": "true"}) == (
        "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and `retention.bytes` must be "
        "set to the identical value because there will be no more logs copied to the remote storage.")
    assert list_offset(b.bootstrap, topic, -2) == 0 and remote_segments(remote, topic)

    assert _alter(b.bootstrap, topic, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}) is None
    def remote_logs() -> list[str]:
        try:
            return [str(p) for p in remote.glob(f"{topic}-0-*/*/*.log")]
        except FileNotFoundError:  # a directory deleted while it is listed
            return ["(being deleted)"]

    wait_until(lambda: not remote_logs(), 60, "the remote segments deleted", interval=0.5)
    local_start = int(b.segment_files(topic, 0)[0].name[:20])
    assert list_offset(b.bootstrap, topic, -2) == list_offset(b.bootstrap, topic, -4) == local_start > 0
    assert list_offset(b.bootstrap, topic, -5) == -1  # not tiered any more
    states = [r.state.name for _, r in metadata_events(b.bootstrap, topic) if hasattr(r, "state")]
    finished = states.count("COPY_SEGMENT_FINISHED")
    assert finished > 5 and states.count("DELETE_SEGMENT_STARTED") == states.count("DELETE_SEGMENT_FINISHED") \
        == finished
    # a consumer from offset 0 is out of range: it starts from the log start (auto.offset.reset=earliest)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, 5)
    assert got and got[0].offset == local_start
