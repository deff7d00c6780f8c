"""The ``odradek`` Spark data source against a real broker process with a real local Spark.

Batch reads equal what was produced field for field; streaming reads honour maxOffsetsPerTrigger, resume
from the checkpoint with no gap and no duplicate, and Trigger.AvailableNow stops; the writer (batch and
streaming) round-trips; data deleted by retention fails the query or is skipped with a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from integration.broker import Broker

Record = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...] | None, int]
"""(partition, offset, key, value, headers or None, timestamp ms)"""

# recent enough that retention (7 days by default, by record timestamp) keeps them
BASE_TS = (int(time.time()) - 3600) * 1000


def produce(bootstrap: str, topic: str, n: int, partitions: int = 3, seed: int = 1,
            start: int = 0) -> list[Record]:
    """``n`` records spread over the partitions: some null keys, some null values, some without
    headers, headers with null values, explicit CreateTime timestamps. Returns what the broker stored."""
    rnd = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    out: list[Record] = []
    errors: list[str] = []

    def on_delivery(i: int, key: bytes | None, value: bytes | None, headers: Any, ts: int) -> Any:
        # delivery reports carry no headers: keep what was sent
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
                return
            out.append((msg.partition(), msg.offset(), key, value, tuple(headers) if headers else None, ts))
        return cb

    for i in range(start, start + n):
        key = None if i % 17 == 0 else f"key-{i}".encode()
        value = None if i % 23 == 0 else bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 40)))
        headers = None if i % 3 == 0 else [("idx", str(i).encode()), ("empty", None), ("idx", b"dup")]
        ts = BASE_TS + i * 1000
        kw: dict[str, Any] = {"key": key, "value": value, "partition": i % partitions, "timestamp": ts,
                              "on_delivery": on_delivery(i, key, value, headers, ts)}
        if headers:
            kw["headers"] = headers
        p.produce(topic, **kw)
    assert p.flush(30) == 0
    assert not errors, errors
    assert len(out) == n
    return sorted(out)


def rows_to_records(rows: list[Any]) -> list[Record]:
    out: list[Record] = []
    for r in rows:
        ts = r["timestamp"]
        ms = int(ts.replace(tzinfo=dt.UTC).timestamp() * 1000) if ts.tzinfo is None else int(ts.timestamp() * 1000)
        hs = r["headers"]
        out.append((r["partition"], r["offset"], r["key"], r["value"],
                    tuple((h["key"], h["value"]) for h in hs) if hs is not None else None, ms))
    return sorted(out)


def read_batch(spark: Any, broker: Broker, topic: str, **options: str) -> Any:
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_produced(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    produced = produce(pipeline_broker.bootstrap, topic, 600)
    df = read_batch(spark, pipeline_broker, topic, includeHeaders="true", coalesceBelowRecords="0")
    assert df.rdd.getNumPartitions() == 3  # one task per partition
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    rows = df.collect()
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    assert rows_to_records(rows) == produced
    # a small batch read by one task for all three partitions (coalesceBelowRecords, by default below 20,000
    # records) gives the same rows
    coalesced = read_batch(spark, pipeline_broker, topic, includeHeaders="true")
    assert coalesced.rdd.getNumPartitions() == 1
    assert rows_to_records(coalesced.collect()) == produced
    # without includeHeaders the column is absent, as in Spark
    plain = read_batch(spark, pipeline_broker, topic)
    assert "headers" not in plain.columns

    # per-partition starting/ending offsets (-2 earliest, -1 latest) and a starting timestamp
    ranged = read_batch(spark, pipeline_broker, topic,
                        startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": -1}}),
                        endingOffsets=json.dumps({topic: {"0": 50, "1": 5, "2": -1}}))
    got = sorted((r["partition"], r["offset"]) for r in ranged.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 50)] + [(1, o) for o in range(5)]
    since = read_batch(spark, pipeline_broker, topic, startingTimestamp=str(BASE_TS + 300 * 1000))
    got = sorted((r["partition"], r["offset"]) for r in since.select("partition", "offset").collect())
    assert got == sorted((r[0], r[1]) for r in produced if r[5] >= BASE_TS + 300 * 1000)

    # subscribePattern and assign select the same data
    by_pattern = (spark.read.format("odradek").option("kafka.bootstrap.servers", pipeline_broker.bootstrap)
                  .option("subscribePattern", topic.replace("-", "[-]")).load().count())
    assigned = (spark.read.format("odradek").option("kafka.bootstrap.servers", pipeline_broker.bootstrap)
                .option("assign", json.dumps({topic: [0, 2]})).load().count())
    assert by_pattern == 600
    assert assigned == 400


def test_data_loss_fails_or_skips(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    produce(pipeline_broker.bootstrap, topic, 50, partitions=1)
    admin = AdminClient({"bootstrap.servers": pipeline_broker.bootstrap})
    fut = admin.delete_records([TopicPartition(topic, 0, 20)])
    for f in fut.values():
        f.result(30)
    start = json.dumps({topic: {"0": 5}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read_batch(spark, pipeline_broker, topic, startingOffsets=start).collect()
    rows = read_batch(spark, pipeline_broker, topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r["offset"] for r in rows) == list(range(20, 50))


class BatchCollector:
    """An idempotent foreachBatch sink: batch id → the batch's (partition, offset, value); a replayed
    batch replaces itself."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, int, bytes | None]]] = {}
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [(r["partition"], r["offset"], r["value"]) for r in df.select("partition", "offset", "value").collect()]
        with self.lock:
            self.batches[batch_id] = rows

    def all(self) -> list[tuple[int, int, bytes | None]]:
        with self.lock:
            return sorted(r for rows in self.batches.values() for r in rows)


def stream(spark: Any, broker: Broker, topic: str, ckpt: Path, sink: BatchCollector, available_now: bool,
           **options: str) -> Any:
    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0 seconds")
    return writer.start()


def test_stream_micro_batches_stop_restart(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                                           checkpoint: Path) -> None:
    topic = new_topic(3)
    first = produce(pipeline_broker.bootstrap, topic, 150, seed=2)
    sink = BatchCollector()

    # 1. Trigger.AvailableNow with maxOffsetsPerTrigger: several micro-batches, then the query stops
    q = stream(spark, pipeline_broker, topic, checkpoint, sink, True, maxOffsetsPerTrigger="40")
    assert q.awaitTermination(120), "Trigger.AvailableNow did not stop"
    assert q.exception() is None
    assert len(sink.batches) >= 4, sink.batches.keys()
    assert all(len(rows) <= 40 for rows in sink.batches.values())
    assert sink.all() == [(p, o, v) for p, o, _k, v, _h, _t in first]
    end = json.loads(q.lastProgress["sources"][0]["endOffset"])
    assert end == {f"{topic}:{p}": 50 for p in range(3)}

    # 2. a continuous query, stopped while data keeps arriving, then restarted from the checkpoint
    second = produce(pipeline_broker.bootstrap, topic, 150, seed=3, start=150)
    q = stream(spark, pipeline_broker, topic, checkpoint, sink, False, maxOffsetsPerTrigger="25")
    before = len(sink.batches)
    deadline = time.monotonic() + 90
    while len(sink.batches) < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    q.stop()
    assert len(sink.batches) >= before + 2
    assert len(sink.all()) < 300, "stopped too late to test a restart"
    third = produce(pipeline_broker.bootstrap, topic, 60, seed=4, start=300)
    q = stream(spark, pipeline_broker, topic, checkpoint, sink, True, maxOffsetsPerTrigger="1000")
    assert q.awaitTermination(120)
    assert q.exception() is None
    want = sorted((p, o, v) for p, o, _k, v, _h, _t in first + second + third)
    got = sink.all()
    assert len(got) == len(set(got)), "duplicates across micro-batches"
    assert got == want


def test_writer_round_trip(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                           checkpoint: Path) -> None:
    src = new_topic(3)
    dst = new_topic(2)
    produced = produce(pipeline_broker.bootstrap, src, 200, seed=5)

    # batch write: key, value, headers to the topic option
    df = read_batch(spark, pipeline_broker, src, includeHeaders="true").select("key", "value", "headers")
    (df.write.format("odradek").option("kafka.bootstrap.servers", pipeline_broker.bootstrap)
     .option("topic", dst).mode("append").save())
    back = read_batch(spark, pipeline_broker, dst, includeHeaders="true").collect()
    assert sorted(((r["key"], r["value"], _hs(r["headers"])) for r in back), key=repr) == sorted(
        ((k, v, h) for _p, _o, k, v, h, _t in produced), key=repr)

    # streaming write: the topic column routes each row (no topic option)
    dst2 = new_topic(3)
    q = (read_batch_stream(spark, pipeline_broker, src)
         .selectExpr("key", "value", "headers", f"'{dst2}' AS topic", "partition")
         .writeStream.format("odradek").option("kafka.bootstrap.servers", pipeline_broker.bootstrap)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    back2 = read_batch(spark, pipeline_broker, dst2, includeHeaders="true").collect()
    assert sorted(((r["partition"], r["key"], r["value"], _hs(r["headers"])) for r in back2), key=repr) == sorted(
        ((p, k, v, h) for p, _o, k, v, h, _t in produced), key=repr)


def read_batch_stream(spark: Any, broker: Broker, topic: str) -> Any:
    return (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true")
            .load())


def _hs(headers: Any) -> tuple[tuple[str, bytes | None], ...] | None:
    return tuple((h["key"], h["value"]) for h in headers) if headers else None
