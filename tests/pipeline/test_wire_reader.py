"""The source's Fetch reader (``wire_fetch``: record batches decoded into Arrow in C) against
librdkafka's consumer (``reader=librdkafka``) on a real broker: the same rows for compressed and
uncompressed batches, null keys and values, sub-ranges, LogAppendTime, and read_committed with
aborted transactions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from integration.broker import Broker

from odradek.pipeline import arrow_records, kafka_client
from odradek.pipeline.options import SourceOptions
from odradek.pipeline.source import arrow_schema, kafka_schema


def read(bootstrap: str, topic: str, partition: int, start: int, end: int, reader: str,
         committed: bool = False) -> pa.Table:
    raw = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "reader": reader,
           "kafkaConsumer.pollTimeoutMs": "20000"}
    if committed:
        raw["kafka.isolation.level"] = "read_committed"
    opts = SourceOptions.parse(raw, streaming=False)
    schema = arrow_schema(kafka_schema(False))
    batches = list(kafka_client.read_range(opts, schema, topic, partition, start, end))
    return pa.Table.from_batches(batches, schema)


def test_c_decoder_is_built() -> None:
    assert arrow_records.AVAILABLE, "odradek._speedups lacks batches_to_columns: rebuild the extension"


@pytest.mark.parametrize("compression", ["none", "lz4", "gzip", "zstd"])
def test_same_rows_as_librdkafka(pipeline_broker: Broker, new_topic: Callable[..., str], compression: str) -> None:
    from confluent_kafka import Producer

    topic = new_topic(partitions=2)
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap, "linger.ms": 5, "compression.type": compression})
    n = 5000
    now = int(time.time() * 1000)  # recent: the shared broker checks retention every 500 ms
    for i in range(n):
        key = None if i % 7 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else (b"" if i % 13 == 0 else b"v" * (i % 300))
        p.produce(topic, key=key, value=value, partition=i % 2, timestamp=now - n + i)
        if i % 1000 == 0:
            p.flush()  # several batches
    assert p.flush(30) == 0
    for part in (0, 1):
        for start, end in ((0, n // 2), (17, 1234), (1000, 1001)):
            wire = read(pipeline_broker.bootstrap, topic, part, start, end, "wire")
            ref = read(pipeline_broker.bootstrap, topic, part, start, end, "librdkafka")
            assert wire.num_rows == end - start
            assert wire.equals(ref), (part, start, end)


def test_log_append_time(pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    from confluent_kafka import Producer

    topic = new_topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap})
    for i in range(100):
        p.produce(topic, value=b"x%d" % i, timestamp=int(time.time() * 1000) - 60_000)
    assert p.flush(30) == 0
    wire = read(pipeline_broker.bootstrap, topic, 0, 0, 100, "wire")
    ref = read(pipeline_broker.bootstrap, topic, 0, 0, 100, "librdkafka")
    assert wire.equals(ref)
    assert set(wire.column("timestampType").to_pylist()) == {1}


def test_read_committed_drops_aborted(pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    from confluent_kafka import Producer

    topic = new_topic(partitions=1)
    plain = Producer({"bootstrap.servers": pipeline_broker.bootstrap})
    txn: Any = Producer({"bootstrap.servers": pipeline_broker.bootstrap,
                         "transactional.id": f"wire-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    expected = []
    for round_ in range(6):
        txn.begin_transaction()
        for i in range(50):
            txn.produce(topic, value=b"t%d-%d" % (round_, i), partition=0)
        plain.produce(topic, value=b"p%d" % round_, partition=0)
        plain.flush(30)
        expected.append(b"p%d" % round_)
        if round_ % 2:
            txn.flush(30)  # written to the log, then aborted
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            expected.extend(b"t%d-%d" % (round_, i) for i in range(50))
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": pipeline_broker.bootstrap})
    end = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})[TopicPartition(topic, 0)].result().offset
    wire = read(pipeline_broker.bootstrap, topic, 0, 0, end, "wire", committed=True)
    ref = read(pipeline_broker.bootstrap, topic, 0, 0, end, "librdkafka", committed=True)
    assert sorted(wire.column("value").to_pylist()) == sorted(expected)
    assert wire.equals(ref)
    uncommitted = read(pipeline_broker.bootstrap, topic, 0, 0, end, "wire")
    assert uncommitted.num_rows == 6 * 51
    assert uncommitted.equals(read(pipeline_broker.bootstrap, topic, 0, 0, end, "librdkafka"))


def test_many_responses_and_abandoned_reads(pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    """Small fetch responses (the next Fetch is in flight while a batch is consumed): the rows are all
    there once, and a read abandoned mid-range leaves no unread response on a pooled connection."""
    from confluent_kafka import Producer

    topic = new_topic(partitions=1)
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap, "linger.ms": 2})
    for i in range(20_000):
        p.produce(topic, key=b"%d" % i, value=b"v" * 50)
    assert p.flush(30) == 0
    raw = {"kafka.bootstrap.servers": pipeline_broker.bootstrap, "subscribe": topic,
           "kafka.max.partition.fetch.bytes": "16384"}
    opts = SourceOptions.parse(raw, streaming=False)
    schema = arrow_schema(kafka_schema(False))
    for _ in range(3):
        it = kafka_client.read_range(opts, schema, topic, 0, 0, 20_000)
        first = next(it)
        assert first.num_rows > 0
        it.close()  # abandoned with the next Fetch in flight
    whole = pa.Table.from_batches(list(kafka_client.read_range(opts, schema, topic, 0, 0, 20_000)), schema)
    assert whole.column("offset").to_pylist() == list(range(20_000))
    assert whole.column("key").to_pylist() == [b"%d" % i for i in range(20_000)]


@pytest.mark.parametrize("reader", ["wire", "librdkafka"])
def test_corrupt_batch_on_disk_fails_the_read(pipeline_broker: Broker, new_topic: Callable[..., str],
                                              reader: str) -> None:
    """A record batch whose bytes changed on the broker's disk (a value byte: under the CRC-32C) fails the
    read with an error naming the topic, partition and offset, in both readers (``kafka.check.crcs``
    on by default); with ``kafka.check.crcs=false`` the Fetch reader reads the changed bytes as rows."""
    from confluent_kafka import Producer

    topic = new_topic(partitions=1)
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap, "linger.ms": 0})
    for i in range(3):  # three batches: offsets 0, 1, 2
        p.produce(topic, key=b"k%d" % i, value=b"value-%d-" % i + b"x" * 40, partition=0)
        assert p.flush(30) == 0
    segment = pipeline_broker.segment_files(topic, 0)[0]
    data = segment.read_bytes()
    at = data.index(b"value-1-")  # the second batch (base offset 1)
    with open(segment, "r+b") as f:
        f.seek(at)
        f.write(b"VALUE")
    with pytest.raises(Exception) as info:
        read(pipeline_broker.bootstrap, topic, 0, 0, 3, reader)
    text = str(info.value)
    assert topic in text and ("offset 1" in text or "offset: 1" in text), text
    if reader == "wire":
        assert isinstance(info.value, arrow_records.CorruptRecordException), repr(info.value)
        assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 1)
        opts = SourceOptions.parse({"kafka.bootstrap.servers": pipeline_broker.bootstrap, "subscribe": topic,
                                    "kafka.check.crcs": "false", "kafkaConsumer.pollTimeoutMs": "20000"},
                                   streaming=False)
        schema = arrow_schema(kafka_schema(False))
        rows = pa.Table.from_batches(list(kafka_client.read_range(opts, schema, topic, 0, 0, 3)), schema)
        assert rows.column("value").to_pylist()[1].startswith(b"VALUE-1-")
