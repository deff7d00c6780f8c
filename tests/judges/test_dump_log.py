"""Kafka 4.4's kafka-dump-log (DumpLogSegments) reads Odradek's own files after a clean stop: segments of plain,
compressed and transactional batches (with their COMMIT and ABORT markers), offset and time indexes (Kafka's
sanity check and index verification), transaction indexes, producer snapshots, and the records of
__consumer_offsets (a classic group's offsets and a share group's ShareGroup* records) and __transaction_state
through Kafka's own decoders. Byte compatibility is what lets a
user's tools and an operator's habits carry over."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from integration.broker import Broker, BrokerFactory
from integration.clients import create_topic

from .conftest import Tool

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker that took plain, compressed, keyed and transactional records and a group's commit, then
    stopped cleanly (indexes and snapshots written); a share consumer joined a share group and left."""
    factory = BrokerFactory(tmp_path_factory.mktemp("dump"))
    b = factory({"log.index.interval.bytes": "256", "transaction.state.log.num.partitions": "1",
                 "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
    create_topic(b.bootstrap, "plain", 1)
    create_topic(b.bootstrap, "txn", 1)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 50})
        for i in range(40):
            p.produce("plain", key=f"{codec}-{i}".encode(), value=(f"{codec}-value-{i}-" * 8).encode(),
                      headers=[("codec", codec.encode())], timestamp=1_700_000_000_000 + i)
        assert p.flush(30) == 0
    tp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "dump-tid"})
    tp.init_transactions(30)
    for outcome in ("commit", "abort"):
        tp.begin_transaction()
        for i in range(5):
            tp.produce("txn", value=f"{outcome}-{i}".encode())
        tp.flush(30)
        (tp.commit_transaction if outcome == "commit" else tp.abort_transaction)(30)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dump-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("plain", 0, 42)], asynchronous=False)
    c.close()
    share = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": "dump-share", "client.id": "dump-client"})
    share.subscribe(["plain"])  # a share group (KIP-932): joins, gets its assignment, leaves
    end = time.monotonic() + 3
    while time.monotonic() < end:
        share.poll(0.2)
    share.close()
    b.stop()
    yield b


def segment(b: Broker, topic: str, suffix: str) -> Path:
    [path] = b.segment_files(topic, 0, suffix)
    return path


def test_segment_batches_and_records(kafka: Tool, stopped: Broker) -> None:
    out = kafka("kafka-dump-log", "--files", str(segment(stopped, "plain", ".log")), "--print-data-log").stdout
    batches = [line for line in out.splitlines() if line.startswith("baseOffset: ")]
    records = [line for line in out.splitlines() if line.startswith("| offset: ")]
    assert len(records) == 200
    assert all("isvalid: true" in line and "magic: 2" in line for line in batches)
    codecs = {m.group(1) for line in batches if (m := re.search(r"compresscodec: (\w+)", line))}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}
    first = records[0]
    assert first.startswith("| offset: 0 CreateTime: 1700000000000 keySize: 6 valueSize: ")
    assert "headerKeys: [codec] key: none-0 payload: none-value-0-" in first
    assert [int(r.split()[2]) for r in records] == list(range(200))
    assert "key: zstd-39 payload: zstd-value-39-" in records[-1]


def test_indexes_pass_kafkas_sanity_check_and_verification(kafka: Tool, stopped: Broker) -> None:
    index, timeindex, log = (segment(stopped, "plain", s) for s in (".index", ".timeindex", ".log"))
    assert index.stat().st_size > 0 and timeindex.stat().st_size > 0  # 256-byte interval: several entries
    out = kafka("kafka-dump-log", "--files", str(index)).stdout
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)
    assert len(entries) == index.stat().st_size // 8
    positions = [int(p) for _, p in entries]
    assert positions == sorted(positions) and positions[-1] < log.stat().st_size
    tout = kafka("kafka-dump-log", "--files", str(timeindex)).stdout
    assert len(re.findall(r"^timestamp: (\d+) offset: (\d+)$", tout, re.M)) == timeindex.stat().st_size // 12
    for path in (index, timeindex):
        sane = kafka("kafka-dump-log", "--files", str(path), "--index-sanity-check").stdout
        assert f"{path} passed sanity check." in sane
        verified = kafka("kafka-dump-log", "--files", str(path), "--verify-index-only").stdout
        assert "Mismatches" not in verified and "not match" not in verified.lower(), verified


def test_transactional_batches_markers_and_txn_index(kafka: Tool, stopped: Broker) -> None:
    out = kafka("kafka-dump-log", "--files", str(segment(stopped, "txn", ".log")), "--print-data-log").stdout
    batches = [line for line in out.splitlines() if line.startswith("baseOffset: ")]
    assert len(batches) == 4
    data = [b for b in batches if "isControl: false" in b]
    control = [b for b in batches if "isControl: true" in b]
    assert len(data) == 2 and len(control) == 2
    assert all("isTransactional: true" in b and "producerId: -1" not in b for b in batches)
    markers = re.findall(r"endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)", out)
    assert [m[0] for m in markers] == ["COMMIT", "ABORT"]
    txn_index = stopped.segment_files("txn", 0, ".txnindex")
    assert txn_index, "an aborted transaction leaves a .txnindex entry"
    tout = kafka("kafka-dump-log", "--files", str(txn_index[0])).stdout
    [entry] = re.findall(r"version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)",
                         tout)
    assert (int(entry[1]), int(entry[2])) == (6, 11)  # the aborted records and their marker


def test_producer_snapshot(kafka: Tool, stopped: Broker) -> None:
    snapshots = stopped.segment_files("txn", 0, ".snapshot")
    assert snapshots, "a clean stop writes a producer snapshot"
    out = kafka("kafka-dump-log", "--files", str(snapshots[-1])).stdout
    assert re.search(r"producerId: \d+ producerEpoch: \d+ coordinatorEpoch: \d+ currentTxnFirstOffset: OptionalLong.empty "
                     r"lastTimestamp: \d+ firstSequence: -?\d+ lastSequence: -?\d+ lastOffset: \d+ "
                     r"offsetDelta: \d+ timestamp: \d+", out), out


def test_internal_topics_through_kafkas_decoders(kafka: Tool, stopped: Broker) -> None:
    offsets = segment(stopped, "__consumer_offsets", ".log")
    out = kafka("kafka-dump-log", "--files", str(offsets), "--offsets-decoder").stdout
    assert re.search(r'key: \{"type":"1","data":\{"group":"dump-group","topic":"plain","partition":0\}\} '
                     r'payload: \{"version":"\d+","data":\{"offset":42,', out), out
    txn = segment(stopped, "__transaction_state", ".log")
    tout = kafka("kafka-dump-log", "--files", str(txn), "--transaction-log-decoder").stdout
    assert 'key: {"type":"0","data":{"transactionalId":"dump-tid"}}' in tout, tout
    assert re.findall(r'"transactionStatus":"(\w+)"', tout) == [
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort"]



def test_share_group_records_through_kafkas_decoder(kafka: Tool, stopped: Broker) -> None:
    """The share group's records (KIP-932) as Kafka 4.4's GroupCoordinatorRecordSerde reads them: the member's
    subscription, the group epoch, the share-state topics, the target assignment and its epoch, the member's
    current assignment, then its tombstones and the next epochs when it left."""
    offsets = segment(stopped, "__consumer_offsets", ".log")
    out = kafka("kafka-dump-log", "--files", str(offsets), "--offsets-decoder").stdout
    lines = [line for line in out.splitlines() if '"groupId":"dump-share"' in line]
    member = r'"groupId":"dump-share","memberId":"([^"]+)"'
    topic = r'\{"topicId":"[^"]{22}","partitions":\[0\]\}'
    expected = [
        rf'"type":"10","data":\{{{member}\}}\}} payload: \{{"version":"0","data":\{{"rackId":null,'
        r'"clientId":"dump-client","clientHost":"/127.0.0.1","subscribedTopicNames":\["plain"\]\}\}',
        r'"type":"11","data":\{"groupId":"dump-share"\}\} payload: \{"version":"0","data":\{"epoch":2,'
        r'"metadataHash":-?\d+\}\}',
        r'"type":"15","data":\{"groupId":"dump-share"\}\} payload: \{"version":"0","data":\{"initializingTopics":\[\],'
        r'"initializedTopics":\[\{"topicId":"[^"]{22}","topicName":"plain","partitions":\[0\]\}\],'
        r'"deletingTopics":\[\]\}\}',
        rf'"type":"13","data":\{{{member}\}}\}} payload: \{{"version":"0","data":\{{"topicPartitions":\[{topic}\]\}}\}}',
        r'"type":"12","data":\{"groupId":"dump-share"\}\} payload: \{"version":"0","data":\{"assignmentEpoch":2,'
        r'"assignmentTimestamp":\d+\}\}',
        rf'"type":"14","data":\{{{member}\}}\}} payload: \{{"version":"0","data":\{{"memberEpoch":2,'
        rf'"previousMemberEpoch":0,"state":0,"assignedPartitions":\[{topic}\]\}}\}}',
        rf'"type":"14","data":\{{{member}\}}\}} payload: <DELETE>',
        rf'"type":"13","data":\{{{member}\}}\}} payload: <DELETE>',
        rf'"type":"10","data":\{{{member}\}}\}} payload: <DELETE>',
        r'"type":"11","data":\{"groupId":"dump-share"\}\} payload: \{"version":"0","data":\{"epoch":3,',
        r'"type":"12","data":\{"groupId":"dump-share"\}\} payload: \{"version":"0","data":\{"assignmentEpoch":3,',
    ]
    assert len(lines) == len(expected), "\n".join(lines)
    for line, pattern in zip(lines, expected, strict=True):
        assert re.search(r'key: \{' + pattern, line), (pattern, line)
