"""Durability: clean stop/start, kill -9 during a produce loop, missing indexes, and a garbage segment tail."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import ack_producer
from .broker import BrokerFactory
from .clients import (
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume,
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

# producer batches well under the small segment sizes used here (a batch larger than segment.bytes is
# refused with RECORD_LIST_TOO_LARGE, as Kafka does)
SMALL_BATCHES = {"batch.size": 4096, "linger.ms": 1}


def counts(acks: list[tuple[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, _ in acks:
        out[p] = out.get(p, 0) + 1
    return out


@pytest.mark.timeout(120)
def test_clean_restart_keeps_data_and_offsets_continue(make_broker: BrokerFactory) -> None:
    b = make_broker(log_segment_bytes=32768)
    topic = unique("restart")
    create_topic(b.bootstrap, topic, 2)
    first = make_messages(1500, "before")
    acks1 = produce("confluent", b.bootstrap, topic, first, conf=SMALL_BATCHES)
    check_acks_contiguous(acks1)
    ends = counts(acks1)
    assert set(ends) == {0, 1}
    assert len(b.segment_files(topic, 0)) > 1, "expected several segments before the restart"

    b.stop()
    b.start()

    for p in (0, 1):
        assert watermarks(b.bootstrap, topic, p) == (0, ends[p]), f"partition {p} after restart"
    check_consumed(Expectation(first, acks1), consume("confluent", b.bootstrap, topic, {0: 0, 1: 0}, 1500))

    second = make_messages(500, "after")
    acks2 = produce("confluent", b.bootstrap, topic, second, conf=SMALL_BATCHES)
    check_acks_contiguous(acks2, start=ends)
    both = Expectation([*first, *second], [*acks1, *acks2])
    check_consumed(both, consume("kafka-python", b.bootstrap, topic, {0: 0, 1: 0}, 2000))

    # and once more: a second clean restart keeps everything
    b.stop()
    b.start()
    check_consumed(both, consume("aiokafka", b.bootstrap, topic, {0: 0, 1: 0}, 2000))


def _read_acks(path: Path) -> list[tuple[int, int, int]]:
    data = path.read_bytes()
    lines = data.split(b"\n")[:-1]  # drop a torn last line
    return [tuple(int(x) for x in line.split()) for line in lines]  # type: ignore[misc]


@pytest.mark.timeout(150)
def test_kill9_during_produce_loses_no_acknowledged_message(make_broker: BrokerFactory, tmp_path: Path) -> None:
    b = make_broker(log_segment_bytes=65536)
    topic = unique("kill9")
    create_topic(b.bootstrap, topic, 1)
    ackfile = tmp_path / "acks.txt"
    base_ts = now_ms() - 600_000
    size = 200
    with open(tmp_path / "producer.log", "wb") as plog:
        proc = subprocess.Popen(
            [sys.executable, ack_producer.__file__, b.bootstrap, topic, str(ackfile), str(base_ts), str(size)],
            stdout=plog, stderr=plog,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, "producer died: " + (tmp_path / "producer.log").read_text()
            if ackfile.exists() and ackfile.stat().st_size > 0 and len(_read_acks(ackfile)) >= 6000:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("producer did not get 6000 acknowledgements within 60 s")
        b.kill()  # mid-stream: the producer is still sending
        time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    acks = _read_acks(ackfile)
    assert len(acks) >= 6000
    for p, off, idx in acks:
        assert (p, off) == (0, idx), f"message {idx} acknowledged at {p}/{off}"
    acked_end = max(off for _, off, _ in acks) + 1

    b.start()
    low, high = watermarks(b.bootstrap, topic, 0)
    assert low == 0
    assert high >= acked_end, f"acknowledged up to offset {acked_end - 1} but the log ends at {high}"
    assert len(b.segment_files(topic, 0)) > 5, "expected the crash to hit a multi-segment log"

    got = consume_confluent(b.bootstrap, topic, {0: 0}, high)
    # a clean prefix: offsets 0..high-1, each holding exactly the message produced in that position
    assert [m.offset for m in got] == list(range(high))
    for m in got:
        assert m.key == f"key-{m.offset}".encode(), m
        assert m.value == ack_producer.value(m.offset, size), m
        assert m.timestamp == base_ts + m.offset, m

    # fetch by offset through the rebuilt offset indexes
    rng = random.Random(7)
    probes = sorted({0, 1, high // 2, high - 1, *rng.sample(range(high), 5)})
    for k in probes[:6]:
        got = consume_confluent(b.bootstrap, topic, {0: k}, 1)
        assert got and got[0].offset == k and got[0].value == ack_producer.value(k, size)

    # ListOffsets by timestamp through the rebuilt time indexes (Kafka: the first record, not batch,
    # whose timestamp is >= the target)
    for k in probes:
        assert offsets_for_times(b.bootstrap, topic, {0: base_ts + k}) == {0: k}, f"timestamp of offset {k}"
    assert offsets_for_times(b.bootstrap, topic, {0: base_ts + high + 1000}) == {0: -1}

    # the log accepts new data right after the recovered end
    more = make_messages(50, "post-crash")
    acks2 = produce("confluent", b.bootstrap, topic, more, partition=0)
    check_acks_contiguous(acks2, start={0: high})
    assert watermarks(b.bootstrap, topic, 0) == (0, high + 50)


@pytest.mark.timeout(120)
def test_missing_index_files_are_rebuilt(make_broker: BrokerFactory) -> None:
    b = make_broker(log_segment_bytes=32768)
    topic = unique("reindex")
    create_topic(b.bootstrap, topic, 1)
    base_ts = now_ms() - 600_000
    msgs = make_messages(2000, "reindex", base_ts=base_ts, ts_step=10)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    b.stop()
    removed = [p for p in b.partition_dir(topic, 0).iterdir() if p.suffix in (".index", ".timeindex")]
    assert removed, "no .index/.timeindex files found"
    for p in removed:
        p.unlink()
    b.start()
    assert watermarks(b.bootstrap, topic, 0) == (0, 2000)
    probes = (0, 1, 333, 999, 1000, 1500, 1999)
    for k in probes:
        got = consume_confluent(b.bootstrap, topic, {0: k}, 1)
        assert got[0].offset == k and got[0].value == msgs[k].value
    for k in probes:
        assert offsets_for_times(b.bootstrap, topic, {0: base_ts + 10 * k}) == {0: k}, f"exact ts of {k}"
        assert offsets_for_times(b.bootstrap, topic, {0: base_ts + 10 * k - 5}) == {0: k}, f"before {k}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["kill9", "clean-stop-marker-removed"])
def test_garbage_tail_is_truncated_on_start(make_broker: BrokerFactory, how: str) -> None:
    b = make_broker()
    topic = unique("garbage")
    create_topic(b.bootstrap, topic, 1)
    msgs = make_messages(600, "garbage")
    acks: list[tuple[int, int]] = []
    for i in range(0, 600, 50):  # one producer per chunk: at least 12 separate batches
        acks += produce("confluent", b.bootstrap, topic, msgs[i : i + 50], partition=0)
    check_acks_contiguous(acks)

    if how == "kill9":
        b.kill()
    else:
        b.stop()
        markers = list(b.logdir.rglob(".kafka_cleanshutdown"))
        assert markers, "no .kafka_cleanshutdown marker after a clean stop"
        for m in markers:
            m.unlink()

    seg = b.partition_dir(topic, 0) / "00000000000000000000.log"
    size = seg.stat().st_size
    batches = read_segment(seg)
    assert batches and batches[-1].end == size, "segment is not a plain sequence of batches"
    assert batches[-1].next_offset == 600
    intact = [bt for bt in batches if bt.end <= size - 100]
    valid_end, expected_end = intact[-1].end, intact[-1].next_offset
    assert expected_end < 600
    with open(seg, "r+b") as f:
        f.seek(size - 100)
        f.write(os.urandom(100))

    b.start()
    assert seg.stat().st_size == valid_end, "the corrupt tail was not truncated"
    assert watermarks(b.bootstrap, topic, 0) == (0, expected_end)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, expected_end)
    check_consumed(Expectation(msgs[:expected_end], acks[:expected_end]), got)

    more = make_messages(100, "after-garbage")
    acks2 = produce("confluent", b.bootstrap, topic, more, partition=0)
    check_acks_contiguous(acks2, start={0: expected_end})
    everything = Expectation([*msgs[:expected_end], *more], [*acks[:expected_end], *acks2])
    check_consumed(everything, consume_confluent(b.bootstrap, topic, {0: 0}, expected_end + 100))
