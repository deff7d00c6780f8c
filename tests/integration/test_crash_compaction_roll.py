"""kill -9 while the cleaner compacts and while segments roll, and the files such a crash leaves
(issue 33, item 2): a real broker restarts, no acknowledged update is lost (the latest acknowledged
value of every key, or a later one, is read back at its offset), and leftover ``.cleaned``, ``.swap``
and ``.deleted`` files do not break the start (Kafka's LogLoader completes a swap, removes the rest)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from . import ack_producer
from .broker import Broker, BrokerFactory
from .clients import Msg, consume_confluent, create_topic, make_messages, produce, unique, watermarks

KEYS = 300
SIZE = 150
CLEANER = {"log_cleaner_backoff_ms": 100, "log_segment_delete_delay_ms": 500}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": 8192, "min.cleanable.dirty.ratio": 0.01,
             "delete.retention.ms": 1000, "segment.ms": 600000}


def _read_acks(path: Path) -> dict[int, int]:
    """offset -> message index of every acknowledged message (complete lines only)."""
    out: dict[int, int] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[int(parts[1])] = int(parts[2])
    return out


def _cleans(b: Broker) -> int:
    return b.log_text().count("Cleaned log")


def _produce_then_kill(b: Broker, topic: str, ackfile: Path, rng: random.Random, logf: Path) -> None:
    """Keyed updates until the cleaner has installed another clean, then kill -9 at a random moment
    while the producer still sends (the cleaner works on and segments roll all along)."""
    cleans = _cleans(b)
    with open(logf, "ab") as plog:
        proc = subprocess.Popen(
            [sys.executable, ack_producer.__file__, b.bootstrap, topic, str(ackfile), str(int(time.time() * 1000)),
             str(SIZE), str(KEYS), "4096"], stdout=plog, stderr=plog,  # batches below segment.bytes (8192)
        )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, "producer died: " + logf.read_text()
            if len(_read_acks(ackfile)) >= 3000 and _cleans(b) > cleans:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"no clean within 90 s ({len(_read_acks(ackfile))} acks)\n{b.log_tail()}")
        time.sleep(rng.uniform(0.0, 0.4))
        b.kill()
    finally:
        proc.kill()
        proc.wait()


def _read_to(b: Broker, topic: str, high: int, timeout: float = 60.0) -> list[Msg]:
    """Every record of partition 0 below ``high`` (a compacted log has gaps: read until the record at
    ``high - 1``, always the last one's, since the active segment is never cleaned)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"unused-{unique()}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    out: list[Msg] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while (not out or out[-1].offset < high - 1) and time.monotonic() < deadline:
            for m in c.consume(num_messages=2000, timeout=0.2):
                assert not m.error(), m.error()
                out.append(Msg(0, m.offset(), m.key(), m.value(), (), m.timestamp()[1], "create"))
    finally:
        c.close()
    assert out and out[-1].offset == high - 1, f"read up to {out[-1].offset if out else None} of {high}"
    return out


def _check_latest_values(b: Broker, topic: str, acked: dict[int, int]) -> int:
    """Every key's latest acknowledged update (or a later one) is in the log, with its value; returns
    the number of records read."""
    low, high = watermarks(b.bootstrap, topic, 0)
    assert low == 0
    assert high >= max(acked) + 1, f"acknowledged up to offset {max(acked)} but the log ends at {high}"
    got = _read_to(b, topic, high)
    offsets = [m.offset for m in got]
    assert offsets == sorted(set(offsets)), "offsets must increase strictly"
    by_offset = {m.offset: m for m in got}
    latest_read: dict[bytes, int] = {}
    for m in got:
        assert m.key is not None
        latest_read[m.key] = m.offset
    latest_acked: dict[bytes, int] = {}
    for off, idx in sorted(acked.items()):
        latest_acked[f"key-{idx % KEYS}".encode()] = off
    for key, off in latest_acked.items():
        assert latest_read.get(key, -1) >= off, f"{key!r}: acknowledged at {off}, latest read {latest_read.get(key)}"
        if off in by_offset:
            assert by_offset[off].value == ack_producer.value(acked[off], SIZE), f"value at offset {off}"
    return len(got)


def _leftovers(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith((".cleaned", ".swap")))


@pytest.mark.timeout(600)
def test_kill9_during_compaction_and_rolls_loses_no_acknowledged_update(
    make_broker: BrokerFactory, tmp_path: Path
) -> None:
    b = make_broker(**CLEANER)
    topic = unique("crashclean")
    create_topic(b.bootstrap, topic, 1, COMPACTED)
    rng = random.Random(33)
    acked: dict[int, int] = {}
    rounds = 4
    for r in range(rounds):
        ackfile = tmp_path / f"acks-{r}.txt"
        _produce_then_kill(b, topic, ackfile, rng, tmp_path / "producer.log")
        round_acks = _read_acks(ackfile)
        assert round_acks, f"round {r}: nothing acknowledged"
        acked.update(round_acks)
        b.start()
        text = b.log_text().rsplit("===== start #", 1)[-1]
        assert "Traceback" not in text and " ERROR " not in text, text
        n = _check_latest_values(b, topic, acked)
        print(f"round {r}: {len(round_acks)} acks, {n} records read, cleans so far {_cleans(b)}, "
              f"segments {len(b.segment_files(topic))}")
    assert len(b.segment_files(topic)) > 3


def _segments(d: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in d.glob("*.log"))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("state", ["old-deleted-swap-pending", "swap-half-renamed", "cleaned-only", "roll-half-made"])
def test_files_left_by_a_crash_mid_swap_or_roll_do_not_break_start(
    make_broker: BrokerFactory, state: str
) -> None:
    """The states a kill -9 leaves between the steps of a swap (odradek.log.clean_task: .cleaned ->
    .swap, old segments -> .deleted, .swap -> live names) and of a roll (new segment's files made one
    by one), made by hand from a real log: every record is read back after the start, no leftover stays."""
    b = make_broker(log_segment_bytes=4096)
    topic = unique("swapstate")
    create_topic(b.bootstrap, topic, 1)
    msgs = make_messages(600, topic, value_size=100)
    produce("confluent", b.bootstrap, topic, msgs, partition=0, conf={"batch.size": 2048, "linger.ms": 1})
    b.kill()
    d = b.partition_dir(topic)
    bases = _segments(d)
    assert len(bases) >= 5, bases
    s1, s2, s3 = bases[1], bases[2], bases[3]

    def name(base: int, suffix: str) -> Path:
        return d / f"{base:020d}{suffix}"

    if state == "old-deleted-swap-pending":
        # a clean of [s1, s3) merged two segments (nothing removed), renamed .swap, the old ones .deleted
        name(s1, ".log.swap").write_bytes(name(s1, ".log").read_bytes() + name(s2, ".log").read_bytes())
        for base in (s1, s2):
            for suffix in (".log", ".index", ".timeindex"):
                if name(base, suffix).exists():
                    os.rename(name(base, suffix), name(base, suffix + ".deleted"))
    elif state == "swap-half-renamed":
        # the same clean, its .log already live again but its index still .swap and s2 not yet removed
        merged = name(s1, ".log").read_bytes() + name(s2, ".log").read_bytes()
        shutil.copy(name(s1, ".index"), name(s1, ".index.swap"))
        name(s1, ".log.swap").write_bytes(merged)
        os.rename(name(s2, ".log"), name(s2, ".log.deleted"))
    elif state == "cleaned-only":
        # a clean written but not yet renamed .swap: the .cleaned files are dropped, the log is as it was
        name(s1, ".log.cleaned").write_bytes(name(s1, ".log").read_bytes()[:1000])
        name(s1, ".index.cleaned").write_bytes(b"\0" * 16)
        name(s3, ".timeindex.cleaned").write_bytes(b"")
    else:
        # a roll cut short: the new segment's index files made, its .log not (and the reverse one further)
        last = bases[-1]
        name(last + 10_000, ".index").write_bytes(b"")
        name(last + 10_000, ".timeindex").write_bytes(b"")

    b.start()
    text = b.log_text().rsplit("===== start #", 1)[-1]
    assert "Traceback" not in text and " ERROR " not in text, text
    assert _leftovers(d) == [] and not list(d.glob("*.deleted")), os.listdir(d)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, 600, timeout=30)
    assert [m.offset for m in got] == list(range(600))
    assert [m.value for m in got] == [m.value for m in msgs]
    assert watermarks(b.bootstrap, topic, 0) == (0, 600)


@pytest.mark.timeout(180)
def test_kill9_inside_a_swap_install_keeps_aborted_transactions_hidden(make_broker: BrokerFactory) -> None:
    """The install of a clean renames the cleaned segment's .index, .timeindex and .txnindex from .swap
    before its .log. A kill -9 between the two, then a start: the swap is completed with the indexes
    already installed, the .txnindex included (it is the only record, below the recovery point, of
    which records were aborted). A read_committed consumer still sees no aborted record."""
    b = make_broker(log_segment_bytes=4096)
    topic = unique("swaptxn")
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid"), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, key=f"a{i}".encode(), value=f"aborted-{i}".encode(), partition=0)
    p.flush(30)
    p.abort_transaction(30)
    msgs = make_messages(300, topic, value_size=100)
    produce("confluent", b.bootstrap, topic, msgs, partition=0, conf={"batch.size": 2048, "linger.ms": 1})
    b.stop()  # a clean stop: the next start reads the indexes as they are, nothing is recovered
    d = b.partition_dir(topic)
    first = _segments(d)[0]
    prefix = str(d / f"{first:020d}")
    assert Path(prefix + ".txnindex").stat().st_size > 0, "the abort should be indexed in the first segment"
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        shutil.copyfile(prefix + suffix, prefix + suffix + ".swap")  # the "cleaned" copy
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        os.replace(prefix + suffix, prefix + suffix + ".deleted")  # the old segment, renamed for deletion
    for suffix in (".index", ".timeindex", ".txnindex"):
        os.replace(prefix + suffix + ".swap", prefix + suffix)  # the install, cut short before the .log

    b.start()
    assert Path(prefix + ".txnindex").exists(), os.listdir(d)
    got = consume_confluent(b.bootstrap, topic, {0: 0}, 300, timeout=30, **{"isolation.level": "read_committed"})
    values = [m.value for m in got]
    assert not [v for v in values if v and v.startswith(b"aborted-")], "aborted records served to read_committed"
    assert values == [m.value for m in msgs]
