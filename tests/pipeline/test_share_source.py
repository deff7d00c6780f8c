"""The ``odradek`` source's share-group read mode (``shareGroup``, pipeline/share_source.py) with a real local Spark
and a real broker process: more tasks than partitions all read, every record reaches the sink, none is delivered
twice while nothing fails, and after a Python worker is killed -9 in a batch that then fails, every record still
arrives and the only duplicates are the failed batch's records (at-least-once)."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from integration.broker import Broker, BrokerFactory
from waiting import wait_until


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    factory = BrokerFactory(tmp_path_factory.mktemp("share-source-broker"))
    yield factory({"group.share.record.lock.duration.ms": 15_000,
                   "share.coordinator.state.topic.num.partitions": 3,
                   "group.share.heartbeat.interval.ms": 1000,
                   "group.share.min.heartbeat.interval.ms": 1000,
                   "group.share.min.record.lock.duration.ms": 1000})
    factory.close()


def make_topic(b: Broker, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def earliest_group(b: Broker, group: str) -> None:
    """share.auto.offset.reset=earliest on the group, so records produced before the query starts are read."""
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def produce(b: Broker, topic: str, start: int, n: int, partitions: int = 2) -> set[bytes]:
    """``n`` records in batches of 5 (a share-partition hands out whole batches, so small batches let several
    tasks share one partition)."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    values = set()
    for i in range(start, start + n):
        v = f"v{i}".encode()
        values.add(v)
        p.produce(topic, value=v, partition=i % partitions)
        if i % 10 == 9:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    return values


class Sink:
    """foreachBatch: every delivery (batch id, Spark task, value) appended, nothing replaced; ``fail_when`` can make
    a batch fail after its rows were recorded (a sink that wrote, then failed)."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[int, int, bytes]] = []
        self.lock = threading.Lock()
        self.fail_when: Callable[[int, list[bytes]], bool] | None = None
        self.failed_rows: list[bytes] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql.functions import spark_partition_id

        rows = df.select(spark_partition_id().alias("task"), "value").collect()
        with self.lock:
            self.deliveries.extend((batch_id, r["task"], bytes(r["value"])) for r in rows)
        values = [bytes(r["value"]) for r in rows]
        if self.fail_when is not None and self.fail_when(batch_id, values):
            self.fail_when = None
            self.failed_rows = values
            raise RuntimeError(f"sink failed after writing batch {batch_id}")

    def values(self) -> Counter[bytes]:
        with self.lock:
            return Counter(v for _b, _t, v in self.deliveries)


def start(spark: Any, b: Broker, topic: str, group: str, ckpt: Path, sink: Sink) -> Any:
    return (spark.readStream.format("odradek").option("kafka.bootstrap.servers", b.bootstrap)
            .option("subscribe", topic).option("shareGroup", group).option("shareTasks", "4")
            .option("shareFetchWaitMs", "500").load()
            .writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
            .trigger(processingTime="200 milliseconds").start())


def batch_id(q: Any) -> int:
    """The last micro-batch the query finished (empty ones included)."""
    progress = q.lastProgress
    return int(progress["batchId"]) if progress else -1


def python_workers() -> list[int]:
    """Spark's Python workers under this test process: forked by the pyspark daemon, so a process running
    pyspark.daemon whose parent runs it too."""
    cmd: dict[int, str] = {}
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd[int(d)] = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue

    def mine(pid: int) -> bool:
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parent.get(pid, 0)
        return False

    return sorted(p for p, c in cmd.items() if "pyspark.daemon" in c and "pyspark.daemon" in cmd.get(parent[p], "")
                  and mine(p))


def test_more_tasks_than_partitions_every_record_once(spark: Any, share_broker: Broker, checkpoint: Path) -> None:
    topic = make_topic(share_broker, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    earliest_group(share_broker, group)
    want = produce(share_broker, topic, 0, 300)
    sink = Sink()
    q = start(spark, share_broker, topic, group, checkpoint, sink)
    try:
        wait_until(lambda: set(sink.values()) >= want, 90, "every record in the sink", interval=0.1)
        more = produce(share_broker, topic, 300, 100)  # a second wave while the query runs
        wait_until(lambda: set(sink.values()) >= want | more, 30, "the second wave in the sink", interval=0.1)
        # more batches: each acknowledges the previous ones' records; none may come back
        last = batch_id(q)
        wait_until(lambda: batch_id(q) >= last + 3, 30, "three more batches", interval=0.1)
    finally:
        q.stop()
    assert q.exception() is None
    got = sink.values()
    assert set(got) == want | more
    assert [v for v, n in got.items() if n > 1] == []
    with sink.lock:
        tasks = {t for _b, t, _v in sink.deliveries}
    assert len(tasks) > 2, f"only tasks {tasks} of 4 got records from 2 partitions"


def test_worker_killed_in_a_failed_batch_at_least_once(spark: Any, share_broker: Broker, checkpoint: Path) -> None:
    topic = make_topic(share_broker, 2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    earliest_group(share_broker, group)
    first = produce(share_broker, topic, 0, 200)
    sink = Sink()
    q = start(spark, share_broker, topic, group, checkpoint, sink)
    killed: list[int] = []
    try:
        wait_until(lambda: set(sink.values()) >= first, 45, "the first wave in the sink", interval=0.1)
        # two more batches, so that every worker's tasks acknowledged the first wave's records
        last = batch_id(q)
        wait_until(lambda: batch_id(q) >= last + 2, 30, "two more batches", interval=0.1)

        second: set[bytes] = set()

        def fail(_batch: int, values: list[bytes]) -> bool:
            # the first batch with records of the second wave: kill -9 the Python workers (those holding the
            # batch's records unacknowledged among them), then fail the batch
            if not any(v in second for v in values):
                return False
            for pid in python_workers():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            return True

        sink.fail_when = fail
        second |= produce(share_broker, topic, 200, 200)
        with pytest.raises(Exception, match="sink failed after writing"):
            q.awaitTermination(45)
        assert killed, "no Python worker found to kill"
        assert sink.failed_rows
        # restart from the checkpoint: the failed batch runs again, with the records the group gives now
        q = start(spark, share_broker, topic, group, checkpoint, sink)
        wait_until(lambda: set(sink.values()) >= first | second, 90, "every record after the restart",
                   interval=0.1, detail=lambda: (len(first | second) - len(set(sink.values())), batch_id(q),
                                                 q.exception(), len(sink.failed_rows)))
    finally:
        q.stop()
    got = sink.values()
    assert set(got) == first | second  # at-least-once: nothing lost
    duplicates = {v for v, n in got.items() if n > 1}
    # the only duplicates: records of the failed batch (written by the sink, never acknowledged), each twice
    assert duplicates <= set(sink.failed_rows), sorted(duplicates - set(sink.failed_rows))[:10]
    assert all(got[v] == 2 for v in duplicates)
    print(f"killed {len(killed)} Python worker(s); failed batch {len(sink.failed_rows)} rows; "
          f"{len(duplicates)} duplicate(s)")
