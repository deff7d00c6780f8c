"""Spark's own JVM Kafka connector (spark-sql-kafka-0-10, what every Spark user's job reads Kafka with) against
Odradek: a batch read with headers and read_committed over an aborted transaction, and a Structured Streaming
query from one topic to another, run twice from the same checkpoint (the second run takes only the new records).

Maven Central serves the connector up to 4.2.0 while pyspark here is 4.3.0: 4.2.0 (with its kafka-clients 3.9.2)
is loaded into Spark 4.3, fetched by peers/kafka_peer.py ``fetch_spark_kafka``. Spark runs in a child process of
its own: the connector must be on the driver's class path from the JVM's start, and another test file's session
may already hold this process's JVM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import kafka_peer
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from integration.broker import Broker
from integration.clients import create_topic, unique

pytestmark = pytest.mark.timeout(420)

SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, upper

bootstrap, jars, source, aborted, sink, checkpoint, phase = sys.argv[1:8]
spark = (SparkSession.builder.master("local[2]").appName("spark-kafka-judge")
         .config("spark.jars", jars).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {}
if phase == "batch":
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("includeHeaders", "true")
          .load())
    rows = df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition", "offset", "headers").collect()
    out["rows"] = [[r.k, r.v, r.partition, r.offset, [[h.key, bytes(h.value).decode()] for h in (r.headers or [])]]
                   for r in rows]
    committed = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", aborted)
                 .option("kafka.isolation.level", "read_committed").load())
    out["committed"] = sorted(r.v for r in committed.selectExpr("CAST(value AS STRING) v").collect())
else:
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "700").load())
    query = (stream.select(col("key"), upper(col("value").cast("string")).alias("value"))
             .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(240)
    out["batches"] = len(query.recentProgress)
    out["rows_in"] = sum(p["numInputRows"] for p in query.recentProgress)
spark.stop()
print("RESULT " + json.dumps(out))
"""


def spark_run(tmp_path: Path, bootstrap: str, source: str, aborted: str, sink: str, phase: str) -> dict[str, object]:
    jars = ",".join(str(j) for j in kafka_peer.fetch_spark_kafka())
    script = tmp_path / "spark_kafka_judge.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), bootstrap, jars, source, aborted, sink,
                           str(tmp_path / "checkpoint"), phase], capture_output=True, text=True, timeout=360,
                          stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result: dict[str, object] = json.loads(lines[-1][len("RESULT "):])
    return result


def produce(b: Broker, topic: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=i % 3,
                  headers=[("seq", str(i).encode())])
    assert p.flush(30) == 0


def read_sink(b: Broker, topic: str, n: int) -> list[tuple[str, str]]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("check"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[str, str]] = []
    while len(out) < n:
        m = c.poll(10)
        assert m is not None, f"{len(out)} of {n} records in {topic}"
        if m.error() is None:
            out.append((m.key().decode(), m.value().decode()))
    extra = c.poll(1)
    c.close()
    assert extra is None or extra.error() is not None, "more records than written"
    return out


def test_spark_jvm_connector_batch_streaming_and_read_committed(kafka_jars: Path, odradek: Broker,
                                                                 tmp_path: Path) -> None:
    source, aborted, sink = unique("spark-src"), unique("spark-txn"), unique("spark-sink")
    create_topic(odradek.bootstrap, source, 3)
    create_topic(odradek.bootstrap, aborted, 1)
    create_topic(odradek.bootstrap, sink, 1)
    produce(odradek, source, 0, 1500)
    tp = Producer({"bootstrap.servers": odradek.bootstrap, "transactional.id": unique("spark-tid")})
    tp.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        tp.begin_transaction()
        for i in range(3):
            tp.produce(aborted, value=f"{outcome}-{i}".encode())
        tp.flush(30)
        (tp.commit_transaction if outcome == "commit" else tp.abort_transaction)(30)

    batch = spark_run(tmp_path, odradek.bootstrap, source, aborted, sink, "batch")
    rows = batch["rows"]
    assert isinstance(rows, list) and len(rows) == 1500
    for k, v, partition, offset, headers in rows:
        i = int(k[1:])
        assert (v, partition, offset, headers) == (f"value-{i}", i % 3, i // 3, [["seq", str(i)]])
    assert batch["committed"] == sorted([f"commit-{i}" for i in range(3)] * 2)  # the aborted three skipped

    first = spark_run(tmp_path, odradek.bootstrap, source, aborted, sink, "stream")
    assert first["rows_in"] == 1500 and first["batches"] >= 3  # maxOffsetsPerTrigger=700
    produce(odradek, source, 1500, 600)
    second = spark_run(tmp_path, odradek.bootstrap, source, aborted, sink, "stream")
    assert second["rows_in"] == 600  # resumed from the checkpoint's offsets
    written = read_sink(odradek, sink, 2100)
    assert sorted(written) == sorted((f"k{i}", f"VALUE-{i}") for i in range(2100))
