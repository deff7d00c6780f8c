"""Transactions through the ``odradek`` Spark data source, against a real broker and a real local Spark.

The source honours ``kafka.isolation.level``: read_committed reads no aborted record and stops at an open
transaction's first offset; read_uncommitted reads everything. The sink with ``exactlyOnce=true`` writes
each task of a micro-batch in one transaction that also records the batch id, so a micro-batch replayed
after a failure (its entry removed from the checkpoint's commit log, as when the driver dies after the
tasks wrote) is fenced instead of duplicated, and a zombie attempt holding the task's transaction open is
fenced; without it the same replay duplicates the batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from integration.broker import Broker


def txn_producer(bootstrap: str) -> Any:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}", "linger.ms": 5})
    p.init_transactions(30)
    return p


def values(spark: Any, broker: Broker, topic: str, isolation: str) -> list[bytes]:
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("kafka.isolation.level", isolation).load())
    return sorted(bytes(r["value"]) for r in df.select("value").collect())


def test_source_isolation_level(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    p = txn_producer(pipeline_broker.bootstrap)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"aborted-%02d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"committed-%02d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"open-%02d" % i, partition=0)
    p.flush(30)  # left open: read_committed stops at its first offset

    committed = [b"committed-%02d" % i for i in range(10)]
    assert values(spark, pipeline_broker, topic, "read_committed") == committed
    everything = sorted([b"aborted-%02d" % i for i in range(10)] + committed + [b"open-%02d" % i for i in range(5)])
    assert values(spark, pipeline_broker, topic, "read_uncommitted") == everything
    p.commit_transaction(30)
    assert values(spark, pipeline_broker, topic, "read_committed") == sorted(committed + [b"open-%02d" % i
                                                                                          for i in range(5)])


def run_copy(spark: Any, broker: Broker, src: str, dst: str, ckpt: Path, exactly_once: bool) -> Any:
    w = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "60")
         .load().selectExpr("key", "value")
         .writeStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(ckpt)))
    if exactly_once:
        w = w.option("exactlyOnce", "true")
    q = w.trigger(availableNow=True).start()
    assert q.awaitTermination(180), "Trigger.AvailableNow did not stop"
    assert q.exception() is None, q.exception()
    return q


def forget_last_commit(ckpt: Path) -> int:
    """The failure: the driver died after the tasks of the last micro-batch wrote, before Spark recorded the
    batch in its commit log. The restarted query replays that batch."""
    commits = sorted((f for f in (ckpt / "commits").iterdir() if f.name.isdigit()), key=lambda f: int(f.name))
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    return int(last.name)


def copy_with_replay(spark: Any, broker: Broker, new_topic: Callable[..., str], tmp: Path,
                     exactly_once: bool) -> tuple[list[bytes], list[bytes]]:
    src = new_topic(3)
    dst = new_topic(2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent = [b"v-%04d" % i for i in range(150)]
    for i, v in enumerate(sent):
        p.produce(src, key=b"k%d" % i, value=v, partition=i % 3)
    assert p.flush(30) == 0
    ckpt = tmp / ("eo" if exactly_once else "plain")
    q = run_copy(spark, broker, src, dst, ckpt, exactly_once)
    assert sorted(values(spark, broker, dst, "read_committed")) == sorted(sent)
    replayed = forget_last_commit(ckpt)
    assert replayed >= 1, "expected several micro-batches"
    zombie = None
    if exactly_once:
        # a zombie attempt of task 0 still holds its transaction open when the replay starts
        zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"odradek-sink-{q.id}-0"})
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(dst, value=b"zombie", partition=0)
        assert zombie.flush(30) == 0
    q = run_copy(spark, broker, src, dst, ckpt, exactly_once)
    assert q.lastProgress is not None and q.lastProgress["batchId"] == replayed, q.lastProgress
    if zombie is not None:
        with pytest.raises(KafkaException) as fenced:
            zombie.commit_transaction(30)
        assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                               KafkaError.INVALID_PRODUCER_EPOCH), fenced.value
    got = values(spark, broker, dst, "read_committed")
    if zombie is not None:
        assert b"zombie" in values(spark, broker, dst, "read_uncommitted")
    return sent, got


def test_exactly_once_sink_replay_not_duplicated(spark: Any, pipeline_broker: Broker,
                                                 new_topic: Callable[..., str], tmp_path: Path) -> None:
    sent, got = copy_with_replay(spark, pipeline_broker, new_topic, tmp_path, exactly_once=True)
    assert got == sorted(sent)


def test_plain_sink_replay_duplicates(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                                      tmp_path: Path) -> None:
    """The same replay without exactlyOnce writes the batch twice (Spark's at-least-once sink): what the
    test above guards against does happen."""
    sent, got = copy_with_replay(spark, pipeline_broker, new_topic, tmp_path, exactly_once=False)
    assert sorted(set(got)) == sorted(sent)
    assert len(got) > len(sent)
