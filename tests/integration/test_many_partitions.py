"""Many partitions on one broker (the smoke version of bench/partitions_bench.py): 2,000 partitions are
created, written across all of them, and survive a clean restart and a kill -9 with every acknowledged
record, the broker holding a bounded number of descriptors. The limits are generous (the suite runs on a
loaded machine); the bench measures the real figures at 10,000 partitions."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from .broker import Broker, BrokerFactory
from .clients import unique

PARTITIONS = 2000
VALUE = b"x" * 1024


def produce_spread(bootstrap: str, topic: str, n: int, acks: str = "all") -> dict[int, int]:
    """``n`` 1 KB records spread over every partition; returns the acknowledged count per partition."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False,
                  "sticky.partitioning.linger.ms": 0})
    counts: dict[int, int] = {}
    errors: list[str] = []

    def cb(err, m):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))
        else:
            counts[m.partition()] = counts.get(m.partition(), 0) + 1

    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    assert left == 0 and not errors, f"{left} undelivered, errors {errors[:3]}"
    return counts


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                            request_timeout=60)
    return {tp.partition: f.result(timeout=60).offset for tp, f in fs.items()}


def open_fds(b: Broker) -> int:
    assert b.pid is not None
    return len(os.listdir(f"/proc/{b.pid}/fd"))


@pytest.mark.timeout(600)
def test_2000_partitions_create_produce_and_restart(make_broker: BrokerFactory) -> None:
    b = make_broker()
    topic = unique("many")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    t0 = time.monotonic()
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                        operation_timeout=120, request_timeout=120)[topic].result(120)
    assert time.monotonic() - t0 < 60
    assert open_fds(b) < 200, "a partition nobody wrote to holds no descriptor"
    files = [f for d in b.logdir.glob(f"{topic}-*") for f in d.iterdir() if f.suffix in (".log", ".index")]
    assert files == [], "segment files are made on first use"

    counts = produce_spread(b.bootstrap, topic, 20_000)
    assert len(counts) > PARTITIONS * 0.95, f"only {len(counts)} partitions written"
    assert open_fds(b) < PARTITIONS + 200, "one descriptor per written segment at most (no index maps)"
    assert high_watermarks(b.bootstrap, topic) == {p: counts.get(p, 0) for p in range(PARTITIONS)}

    b.stop()
    t0 = time.monotonic()
    b.start()
    assert time.monotonic() - t0 < 60
    assert high_watermarks(b.bootstrap, topic) == {p: counts.get(p, 0) for p in range(PARTITIONS)}

    more = produce_spread(b.bootstrap, topic, 10_000)
    for p, n in more.items():
        counts[p] = counts.get(p, 0) + n
    b.kill()
    t0 = time.monotonic()
    b.start()
    assert time.monotonic() - t0 < 120
    # acks=all on one broker: every acknowledged record is in the page cache, which a kill -9 keeps
    assert high_watermarks(b.bootstrap, topic) == {p: counts.get(p, 0) for p in range(PARTITIONS)}
    after = produce_spread(b.bootstrap, topic, 2_000)
    assert sum(after.values()) == 2_000
    b.stop()
