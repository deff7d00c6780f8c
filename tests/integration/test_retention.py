"""Segment roll, retention by size and time, DeleteRecords, and ListOffsets by timestamp."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .broker import Broker, BrokerFactory
from .clients import (
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume_confluent,
    create_topic,
    make_messages,
    now_ms,
    offsets_for_times,
    produce,
    read_segment,
    unique,
    watermarks,
)

SHARED_BROKER_OVERRIDES = {
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "0",
}
SEGMENT = 16384
# small producer batches so that many fit in a 16 KB segment
SMALL_BATCHES = {"batch.size": 4096, "linger.ms": 1}


def check_segment_chain(b: Broker, topic: str, start: int, end: int) -> list[int]:
    """The .log files are named by 20-digit base offsets, cover [start, end) without gaps, each with its
    .index and .timeindex. Returns the base offsets."""
    files = b.segment_files(topic, 0)
    assert files, "no segment files"
    bases = []
    expect = start
    for f in files:
        stem = f.name[: -len(".log")]
        assert len(stem) == 20, f.name
        base = int(stem)
        bases.append(base)
        assert base == expect, f"segment {f.name} should start at offset {expect}"
        for suffix in (".index", ".timeindex"):
            assert f.with_name(stem + suffix).exists(), f"{stem}{suffix} missing"
        batches = read_segment(f)
        assert sum(bt.size for bt in batches) == f.stat().st_size, f"{f.name} has trailing bytes"
        if batches:
            assert batches[0].base_offset == base, f.name
            expect = batches[-1].next_offset
        else:
            assert f is files[-1], f"empty segment {f.name} that is not the active one"
    assert expect == end
    return bases


@pytest.mark.timeout(90)
def test_small_segments_roll(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("roll")
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": SEGMENT})
    msgs = make_messages(2000, "roll", value_size=150)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    bases = check_segment_chain(b, topic, 0, 2000)
    total = sum(f.stat().st_size for f in b.segment_files(topic, 0))
    assert len(bases) >= total // SEGMENT, f"{len(bases)} segments for {total} bytes"
    assert len(bases) >= 15
    for f in b.segment_files(topic, 0):
        assert f.stat().st_size <= SEGMENT, f"{f.name} is {f.stat().st_size} bytes"
    assert watermarks(b.bootstrap, topic) == (0, 2000)
    check_consumed(Expectation(msgs, acks), consume_confluent(b.bootstrap, topic, {0: 0}, 2000))


@pytest.mark.timeout(90)
def test_retention_bytes_deletes_old_segments(shared_broker: Broker) -> None:
    b = shared_broker
    retention = 65536
    topic = unique("ret-bytes")
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": SEGMENT, "retention.bytes": retention})
    msgs = make_messages(2000, "ret-bytes", value_size=150)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)

    def size() -> int:
        return sum(f.stat().st_size for f in b.segment_files(topic, 0))

    wait_until(lambda: watermarks(b.bootstrap, topic)[0] > 0 and size() < retention + SEGMENT, 20,
               "retention.bytes to delete old segments")
    time.sleep(1.5)  # a few more retention passes: nothing more may go
    low, high = watermarks(b.bootstrap, topic)
    assert high == 2000
    files = b.segment_files(topic, 0)
    oldest = files[0].stat().st_size
    # Kafka's rule: delete the oldest segment while the log stays >= retention.bytes without it
    assert retention <= size() < retention + oldest, (size(), oldest)
    bases = check_segment_chain(b, topic, low, 2000)
    assert bases[0] == low, "log start offset must be the base offset of the oldest segment"
    assert not list(b.partition_dir(topic, 0).glob("*.deleted")), "deleted files left behind"

    # fetching below the log start resets to it (auto.offset.reset=earliest)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, 2000 - low)
    assert got and got[0].offset == low
    check_consumed(Expectation(msgs[low:], acks[low:]), got)


@pytest.mark.timeout(90)
def test_retention_ms_deletes_expired_segments(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("ret-ms")
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": SEGMENT, "retention.ms": 60_000})
    old = make_messages(1000, "old", value_size=150, base_ts=now_ms() - 600_000)
    acks_old = produce("confluent", b.bootstrap, topic, old, partition=0, conf=SMALL_BATCHES)
    recent_ts = now_ms()
    new = make_messages(300, "new", value_size=150, base_ts=recent_ts)
    acks_new = produce("confluent", b.bootstrap, topic, new, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous([*acks_old, *acks_new])

    wait_until(lambda: watermarks(b.bootstrap, topic)[0] > 0, 20, "retention.ms to delete old segments", interval=0.2)
    time.sleep(1.5)
    low, high = watermarks(b.bootstrap, topic)
    assert high == 1300
    assert 0 < low <= 1000, f"log start {low}: recent messages (from offset 1000) must all be kept"
    bases = check_segment_chain(b, topic, low, 1300)
    assert bases[0] == low
    # every expired segment went: the oldest remaining one holds a recent timestamp
    first = read_segment(b.segment_files(topic, 0)[0])
    assert max(bt.max_timestamp for bt in first) >= recent_ts
    got = consume_confluent(b.bootstrap, topic, {0: low}, 1300 - low)
    both = [*old, *new]
    check_consumed(Expectation(both[low:], [*acks_old, *acks_new][low:]), got)


@pytest.mark.timeout(90)
def test_delete_records_moves_log_start(make_broker: BrokerFactory) -> None:
    b = make_broker(log_segment_bytes=SEGMENT)
    topic = unique("delrec")
    create_topic(b.bootstrap, topic, 2)
    msgs0 = make_messages(1000, "p0", value_size=150)
    msgs1 = make_messages(300, "p1")
    acks0 = produce("confluent", b.bootstrap, topic, msgs0, partition=0, conf=SMALL_BATCHES)
    acks1 = produce("confluent", b.bootstrap, topic, msgs1, partition=1, conf=SMALL_BATCHES)
    check_acks_contiguous([*acks0, *acks1])

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # an offset in the middle of a segment, not on a batch boundary
    fs = admin.delete_records([TopicPartition(topic, 0, 437)], request_timeout=20, operation_timeout=10)
    res = next(iter(fs.values())).result(timeout=20)
    assert res.low_watermark == 437
    assert watermarks(b.bootstrap, topic, 0) == (437, 1000)
    assert watermarks(b.bootstrap, topic, 1) == (0, 300), "other partition untouched"

    # kafka-python's admin: -1 means up to the high watermark
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        out = kadmin.delete_records({KTP(topic, 1): -1})
        assert [v["low_watermark"] for v in out.values()] == [300]
    finally:
        kadmin.close()
    assert watermarks(b.bootstrap, topic, 1) == (300, 300)

    got = consume_confluent(b.bootstrap, topic, {0: 0}, 563)
    assert got and got[0].offset == 437
    check_consumed(Expectation(msgs0[437:], acks0[437:]), got)
    # earlier offsets are no longer served: a fetch at 0 jumps to the log start
    assert offsets_for_times(b.bootstrap, topic, {0: msgs0[0].timestamp}) == {0: 437}

    # the new log start survives a restart
    b.stop()
    b.start()
    assert watermarks(b.bootstrap, topic, 0) == (437, 1000)
    assert watermarks(b.bootstrap, topic, 1) == (300, 300)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, 563)
    check_consumed(Expectation(msgs0[437:], acks0[437:]), got)


@pytest.mark.timeout(90)
def test_offsets_for_times(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("ts")
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": SEGMENT})
    base = now_ms() - 3_600_000
    msgs = make_messages(1500, "ts", value_size=150, base_ts=base, ts_step=10)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    assert len(b.segment_files(topic, 0)) > 5
    for k in (0, 1, 2, 99, 100, 101, 500, 777, 1000, 1234, 1498, 1499):
        assert offsets_for_times(b.bootstrap, topic, {0: base + 10 * k}) == {0: k}, f"exact ts of {k}"
        assert offsets_for_times(b.bootstrap, topic, {0: base + 10 * k - 3}) == {0: k}, f"just before {k}"
    assert offsets_for_times(b.bootstrap, topic, {0: 0}) == {0: 0}
    assert offsets_for_times(b.bootstrap, topic, {0: base + 10 * 1499 + 1}) == {0: -1}
