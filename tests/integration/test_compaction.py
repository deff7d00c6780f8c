"""Log compaction against a real broker: confluent-kafka producing updates and tombstones to
compacted topics, the cleaner compacting them in the background, consumers reading from the start."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from waiting import wait_until

from .broker import Broker, BrokerFactory
from .clients import Msg, Out, consume_confluent, create_topic, now_ms, produce, read_segment, unique

CLEANER = {"log_cleaner_backoff_ms": 500, "log_segment_delete_delay_ms": 1000}


def cleaner_checkpoint(b: Broker, topic: str, partition: int = 0) -> int | None:
    path = b.logdir / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        t, p, off = line.split(" ")
        if t == topic and int(p) == partition:
            return int(off)
    return None


def active_segment(b: Broker, topic: str) -> Path:
    return b.segment_files(topic)[-1]


def fully_cleaned(b: Broker, topic: str) -> bool:
    """The cleaner checkpoint has reached the active segment (everything else is clean)."""
    files = b.segment_files(topic)
    return bool(files) and cleaner_checkpoint(b, topic) == int(files[-1].name[:20])


def read_all(b: Broker, topic: str, at_least: int) -> list[Msg]:
    return consume_confluent(b.bootstrap, topic, {0: 0}, at_least, timeout=30)


@pytest.mark.timeout(240)
def test_updates_compact_to_latest_value_per_key(make_broker: BrokerFactory) -> None:
    b = make_broker(**CLEANER)
    topic = unique("compact")
    create_topic(b.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": 65536, "min.cleanable.dirty.ratio": 0.01,
        "delete.retention.ms": 1000,
    })
    keys, updates = 1000, 100_000
    ts = now_ms()
    msgs = [
        Out(i, f"key-{i % keys:04d}".encode(), f"v{i}:".encode() + b"x" * 40, (), ts)
        for i in range(updates)
    ]
    expect = {m.key: m.value for m in msgs}
    t0 = time.monotonic()
    produce("confluent", b.bootstrap, topic, msgs, partition=0, conf={"batch.size": 16384, "linger.ms": 5})
    produced_s = time.monotonic() - t0
    segments_before = len(b.segment_files(topic))  # the cleaner already runs while producing
    t_cleaning = time.monotonic()
    wait_until(lambda: fully_cleaned(b, topic), 120, "the cleaner to reach the active segment", interval=0.2)
    waited = time.monotonic() - t_cleaning
    active_records = sum(bt.record_count for bt in read_segment(active_segment(b, topic)))
    got = read_all(b, topic, keys)
    assert len(got) <= keys + active_records, (len(got), active_records)
    offsets = [m.offset for m in got]
    assert offsets == sorted(set(offsets))  # strictly increasing
    latest = {m.key: m.value for m in got}
    assert latest == expect
    # each surviving value is the one produced at that offset (offsets preserved)
    assert all(int(m.value.split(b":")[0][1:]) == m.offset for m in got if m.value)  # type: ignore[union-attr]
    size_after = sum(p.stat().st_size for p in b.segment_files(topic))
    print(
        f"\n{updates} updates over {keys} keys: produced in {produced_s:.1f}s ({segments_before} segments at the last ack); "
        f"fully compacted {waited:.1f}s after the last ack; {len(got)} records left "
        f"({active_records} in the active segment), {size_after} bytes in {len(b.segment_files(topic))} segments"
    )
    for line in b.log_tail(400).splitlines():
        if "Cleaned log" in line:
            print(line)


@pytest.mark.timeout(180)
def test_tombstones_disappear_after_delete_retention(make_broker: BrokerFactory) -> None:
    b = make_broker(**CLEANER)
    topic = unique("tomb")
    retention_ms = 4000
    create_topic(b.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": 16384, "min.cleanable.dirty.ratio": 0.01,
        "delete.retention.ms": retention_ms,
    })
    ts = now_ms()
    first = [Out(i, f"key-{i:03d}".encode(), f"first-{i}".encode() * 5, (), ts) for i in range(200)]
    tombstones = [Out(200 + i, f"key-{i:03d}".encode(), None, (), ts) for i in range(50)]
    # enough later updates (keys 100..199) to roll the tombstones out of the active segment
    later = [
        Out(250 + i, f"key-{100 + i % 100:03d}".encode(), f"later-{i}".encode() * 5, (), ts) for i in range(1000)
    ]
    for part in (first, tombstones, later):
        produce("confluent", b.bootstrap, topic, part, partition=0, conf={"batch.size": 4096, "linger.ms": 5})
    expect: dict[bytes, bytes | None] = {}
    for m in first + tombstones + later:
        expect[m.key] = m.value  # type: ignore[index]
    live = {k: v for k, v in expect.items() if v is not None}
    assert len(live) == 150

    wait_until(lambda: fully_cleaned(b, topic), 60, "the first clean", interval=0.2)
    seen = time.monotonic()
    got = read_all(b, topic, 150)
    tomb_keys = {m.key for m in got if m.value is None}
    # right after the first clean the tombstones are still there (delete horizon not reached)
    assert tomb_keys == {m.key for m in tombstones}
    assert {m.key: m.value for m in got if m.value is not None} == live

    def no_tombstones() -> bool:
        return not any(m.value is None for m in read_all(b, topic, 150))

    wait_until(no_tombstones, 60, "the tombstones to be removed", interval=0.2)
    waited = time.monotonic() - seen
    print(f"\ntombstones removed {time.monotonic() - seen:.1f}s after the first clean was seen "
          f"(delete.retention.ms={retention_ms}, waited {waited:.1f}s)")
    got = read_all(b, topic, 150)
    latest = {m.key: m.value for m in got}
    assert latest == live  # every live key at its latest value, deleted keys gone
    assert len(got) <= 150 + sum(bt.record_count for bt in read_segment(active_segment(b, topic)))


@pytest.mark.timeout(60)
def test_keyless_record_rejected_on_compacted_topic(make_broker: BrokerFactory) -> None:
    b = make_broker(**CLEANER)
    topic = unique("nokey")
    create_topic(b.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 10000, "enable.idempotence": False})
    errors: list[KafkaError | None] = []
    p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(20) == 0  # (a batch with a keyless record is rejected as a whole, as by Kafka)
    p.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(20) == 0
    assert len(errors) == 2
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None
    got = read_all(b, topic, 1)
    assert [(m.key, m.value) for m in got] == [(b"k", b"keyed")]


def _control_batches(b: Broker, topic: str) -> list[int]:
    """Base offsets of the control batches (transaction markers) in the topic's segments."""
    from odradek.protocol.records import iter_batches

    out = []
    for seg in b.segment_files(topic):
        data = seg.read_bytes()
        out += [h.base_offset for _pos, h in iter_batches(data[:complete_length(data)]) if h.is_control]
    return out


def complete_length(data: bytes) -> int:
    from odradek.protocol.records import complete_batches_length

    return complete_batches_length(data)


@pytest.mark.timeout(240)
def test_cleaner_removes_aborted_transactions_then_markers(make_broker: BrokerFactory) -> None:
    """A compacted topic written by a transactional producer: the cleaner drops the aborted
    transaction's records (read_uncommitted no longer sees them; they never shadow committed values),
    and, after delete.retention.ms, a marker whose transaction has no data left (Kafka's cleaner)."""
    from confluent_kafka import Consumer, TopicPartition

    b = make_broker(**CLEANER)
    topic = unique("txn-compact")
    create_topic(b.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": 16384, "min.cleanable.dirty.ratio": 0.01,
        "delete.retention.ms": 2000,
    })
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid"), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, key=b"k%02d" % i, value=b"committed-%02d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, key=b"k%02d" % i, value=b"aborted-%02d" % i, partition=0)
    assert p.flush(30) == 0
    p.abort_transaction(30)
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 4096})

    def filler(n: int = 300) -> None:
        for i in range(n):
            plain.produce(topic, key=b"f%03d" % (i % 100), value=b"x" * 100, partition=0)
        assert plain.flush(30) == 0

    def read_values(isolation: str) -> dict[bytes, bytes]:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"), "isolation.level": isolation,
                      "enable.partition.eof": True, "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            out: dict[bytes, bytes] = {}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = c.poll(1)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    continue
                if m.key().startswith(b"k"):
                    out[m.key()] = m.value()
            return out
        finally:
            c.close()

    filler()
    assert len(_control_batches(b, topic)) == 2  # the COMMIT and the ABORT
    # the aborted records are in the log until the cleaner's first pass (which, on a slow machine, may
    # already have run by the time this read gets there)
    before = read_values("read_uncommitted")
    assert any(v.startswith(b"aborted") for v in before.values()) or fully_cleaned(b, topic), before
    wait_until(lambda: fully_cleaned(b, topic), 60, "the first clean", interval=0.2)
    want = {b"k%02d" % i: b"committed-%02d" % i for i in range(50)}
    assert read_values("read_uncommitted") == want  # the aborted records are gone from the log
    assert read_values("read_committed") == want

    # the ABORT marker (offset 101, after 50 records, the COMMIT marker and 50 aborted records) goes once
    # a clean after delete.retention.ms finds no data of its transaction left; the COMMIT marker stays
    # while its transaction's records do (nothing overwrites them here)
    assert _control_batches(b, topic) == [50, 101]

    def abort_marker_gone() -> bool:
        filler(100)
        return _control_batches(b, topic) == [50]

    wait_until(abort_marker_gone, 90, "the ABORT marker to be removed", interval=1.0)
    assert read_values("read_uncommitted") == want


@pytest.mark.timeout(120)
def test_a_dynamic_cleaner_backoff_applies_at_once(make_broker: BrokerFactory) -> None:
    """log.cleaner.backoff.ms is a dynamic cluster-wide config in Kafka (its LogCleaner is Reconfigurable); here
    it was read once at start-up and a change was refused (found by the Java authorization judge, whose broker
    config call Kafka 4.4 served). A broker whose cleaner sleeps 10 minutes compacts within seconds once an
    IncrementalAlterConfigs sets 100 ms."""
    b = make_broker(log_cleaner_backoff_ms=600_000, log_segment_delete_delay_ms=500)
    topic = unique("compact-dyn")
    create_topic(b.bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": 4096,
                                         "min.cleanable.dirty.ratio": 0.01})
    ts = now_ms()
    produce("confluent", b.bootstrap, topic,
            [Out(i, f"k{i % 10}".encode(), f"v{i}".encode() + b"x" * 50, (), ts) for i in range(2000)], partition=0,
            conf={"batch.size": 2048, "linger.ms": 1})
    time.sleep(1.5)  # well past the start-up backoff a broker of the old code also used for its first run
    assert cleaner_checkpoint(b, topic) is None and len(b.segment_files(topic)) > 5
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    broker_id = str(next(iter(admin.list_topics(timeout=15).brokers)))
    res = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=[
        ConfigEntry("log.cleaner.backoff.ms", "100", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)
    wait_until(lambda: fully_cleaned(b, topic), 30, "the cleaner to run after the new backoff", interval=0.2)
    latest = {m.key: m.value for m in read_all(b, topic, 10)}
    assert latest == {f"k{k}".encode(): f"v{1990 + k}".encode() + b"x" * 50 for k in range(10)}
