"""Produce / consume / admin helpers over the three Python clients, plus checks shared by the tests.

Every consumer here uses ``assign`` with explicit start offsets (no consumer group)."""

from __future__ import annotations

import asyncio
import hashlib
import struct
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLIENTS = ("confluent", "kafka-python", "aiokafka")
CODECS = ("gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Out:
    """A message to produce."""

    index: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


@dataclass(frozen=True)
class Msg:
    """A consumed message, normalised across clients. ``ts_type``: "create" | "append" | "none"."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    ts_type: str


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def make_messages(n: int, tag: str, *, value_size: int = 100, base_ts: int | None = None,
                  ts_step: int = 1, keyed: bool = True) -> list[Out]:
    """Deterministic keyed messages with three headers (one repeated key, one empty value) and
    explicit, distinct CreateTime timestamps in the recent past."""
    if base_ts is None:
        base_ts = now_ms() - 600_000
    out = []
    for i in range(n):
        filler = hashlib.sha256(f"{tag}/{i}".encode()).hexdigest().encode()
        body = (filler * (value_size // len(filler) + 1))[:value_size]
        headers: Headers = (("idx", str(i).encode()), ("tag", tag.encode()), ("idx", b""))
        out.append(Out(i, f"key-{i}".encode() if keyed else None, f"{tag}:{i}:".encode() + body,
                       headers, base_ts + i * ts_step))
    return out


# ============================================================================ admin


def wait_for_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 15.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} not visible with {partitions} partitions: {last!r}")


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: Mapping[str, object] | None = None,
                 client: str = "confluent") -> None:
    cfg: dict[str, str] = {k: str(v) for k, v in (config or {}).items()}
    if client == "confluent":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                           config=cfg)], operation_timeout=10)
        fs[topic].result(timeout=20)
    elif client == "kafka-python":
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
        try:
            admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                         "configs": cfg}}, raise_errors=True)
        finally:
            admin.close()
    elif client == "aiokafka":
        asyncio.run(_aiokafka_create_topic(bootstrap, topic, partitions, cfg))
    else:
        raise ValueError(client)
    wait_for_topic(bootstrap, topic, partitions)


async def _aiokafka_create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    await admin.start()
    try:
        resp = await admin.create_topics([AioNewTopic(topic, partitions, 1, topic_configs=config)])
        errors = [(t[0], t[1]) for t in resp.topic_errors]
        assert errors == [(topic, 0)], f"aiokafka create_topics errors: {resp.topic_errors}"
    finally:
        await admin.close()


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start offset, high watermark) through ListOffsets (confluent, uncached)."""
    c = _confluent_consumer(bootstrap)
    try:
        return tuple(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False))  # type: ignore[return-value]
    finally:
        c.close()


def offsets_for_times(bootstrap: str, topic: str, queries: dict[int, int]) -> dict[int, int]:
    """{partition: timestamp} -> {partition: offset} (ListOffsets by timestamp)."""
    c = _confluent_consumer(bootstrap)
    try:
        res = c.offsets_for_times([TopicPartition(topic, p, ts) for p, ts in queries.items()], timeout=10)
        for tp in res:
            assert tp.error is None, f"offsets_for_times error: {tp.error}"
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


# ============================================================================ produce


def produce(client: str, bootstrap: str, topic: str, msgs: Sequence[Out], compression: str = "none",
            partition: int | None = None, conf: Mapping[str, object] | None = None) -> list[tuple[int, int]]:
    """Produce all messages; return the acknowledged (partition, offset) of each, in input order.
    ``conf``: extra producer settings in the client's own spelling."""
    extra = dict(conf or {})
    if client == "confluent":
        return produce_confluent(bootstrap, topic, msgs, compression, partition, extra)
    if client == "kafka-python":
        return produce_kafka_python(bootstrap, topic, msgs, compression, partition, extra)
    if client == "aiokafka":
        return asyncio.run(_produce_aiokafka(bootstrap, topic, msgs, compression, partition, extra))
    raise ValueError(client)


def produce_confluent(bootstrap: str, topic: str, msgs: Sequence[Out], compression: str = "none",
                      partition: int | None = None, extra: dict[str, object] | None = None,
                      timeout: float = 60.0) -> list[tuple[int, int]]:
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "compression.type": compression,
                               "linger.ms": 5, "acks": "all", "enable.idempotence": False}
    conf.update(extra or {})
    p = Producer(conf)
    results: list[tuple[int, int] | None] = [None] * len(msgs)
    errors: list[str] = []

    def cb_for(pos: int):  # type: ignore[no-untyped-def]
        def cb(err, m):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"message {pos}: {err}")
            else:
                results[pos] = (m.partition(), m.offset())
        return cb

    for pos, m in enumerate(msgs):
        kwargs: dict[str, object] = dict(key=m.key, value=m.value, headers=list(m.headers),
                                         timestamp=m.timestamp, on_delivery=cb_for(pos))
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} messages not delivered within {timeout}s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def produce_kafka_python(bootstrap: str, topic: str, msgs: Sequence[Out], compression: str = "none",
                         partition: int | None = None, extra: dict[str, object] | None = None
                         ) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    conf: dict[str, object] = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                   compression_type=None if compression == "none" else compression)
    conf.update(extra or {})
    p = KafkaProducer(**conf)
    try:
        futs = [p.send(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp_ms=m.timestamp,
                       partition=partition) for m in msgs]
        p.flush(timeout=60)
        out = []
        for f in futs:
            md = f.get(timeout=30)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=10)


async def _produce_aiokafka(bootstrap: str, topic: str, msgs: Sequence[Out], compression: str,
                            partition: int | None, extra: dict[str, object]) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    conf: dict[str, object] = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                   compression_type=None if compression == "none" else compression)
    conf.update(extra)
    p = AIOKafkaProducer(**conf)
    await p.start()
    try:
        futs = []
        for m in msgs:
            futs.append(await p.send(topic, value=m.value, key=m.key, headers=list(m.headers),
                                     timestamp_ms=m.timestamp, partition=partition))
        mds = await asyncio.wait_for(asyncio.gather(*futs), 60)
        return [(md.partition, md.offset) for md in mds]
    finally:
        await p.stop()


# ============================================================================ consume


def consume(client: str, bootstrap: str, topic: str, starts: dict[int, int], count: int,
            timeout: float = 60.0, max_partition_fetch_bytes: int | None = None) -> list[Msg]:
    """Assign ``{partition: start offset}`` and read until ``count`` messages arrived (then linger a
    moment to catch any extra ones). Returns what was read, in arrival order."""
    limit = max_partition_fetch_bytes
    if client == "confluent":
        extra = {"max.partition.fetch.bytes": limit} if limit else {}
        return consume_confluent(bootstrap, topic, starts, count, timeout, **extra)
    if client == "kafka-python":
        return consume_kafka_python(bootstrap, topic, starts, count, timeout, limit)
    if client == "aiokafka":
        return asyncio.run(_consume_aiokafka(bootstrap, topic, starts, count, timeout, limit))
    raise ValueError(client)


def _confluent_consumer(bootstrap: str, **extra: object) -> Consumer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"odradek-tests-unused-{uuid.uuid4().hex[:8]}",  # required by the binding; never joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
    }
    conf.update(extra)
    return Consumer(conf)


_CONFLUENT_TS = {0: "none", 1: "create", 2: "append"}


def consume_confluent(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                      timeout: float = 60.0, **extra: object) -> list[Msg]:
    c = _confluent_consumer(bootstrap, **extra)
    out: list[Msg] = []
    side_errors: list[str] = []
    try:
        c.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        deadline = time.monotonic() + timeout
        linger_until: float | None = None
        while True:
            now = time.monotonic()
            if now > deadline or (linger_until is not None and now > linger_until):
                break
            for m in c.consume(num_messages=2000, timeout=0.2):
                err = m.error()
                if err:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal() or m.topic() == topic:
                        raise AssertionError(f"consume error on {m.topic()} [{m.partition()}]: {err}")
                    # client-level events (e.g. no group coordinator: groups are never used here)
                    side_errors.append(str(err))
                    continue
                ts_type, ts = m.timestamp()
                out.append(Msg(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                               ts, _CONFLUENT_TS[ts_type]))
            if linger_until is None and len(out) >= count:
                linger_until = time.monotonic() + 0.3
    finally:
        c.close()
    if len(out) < count and side_errors:
        raise AssertionError(f"read {len(out)} of {count} messages; client errors: {side_errors[:5]}")
    return out


def consume_kafka_python(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                         timeout: float = 60.0, max_partition_fetch_bytes: int | None = None) -> list[Msg]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    extra = {"max_partition_fetch_bytes": max_partition_fetch_bytes} if max_partition_fetch_bytes else {}
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100, **extra)
    out: list[Msg] = []
    try:
        tps = {p: KTP(topic, p) for p in starts}
        c.assign(list(tps.values()))
        for p, off in starts.items():
            c.seek(tps[p], off)
        deadline = time.monotonic() + timeout
        linger_until: float | None = None
        while True:
            now = time.monotonic()
            if now > deadline or (linger_until is not None and now > linger_until):
                break
            for _tp, recs in c.poll(timeout_ms=200, max_records=5000).items():
                for r in recs:
                    out.append(Msg(r.partition, r.offset, r.key, r.value, tuple(tuple(h) for h in r.headers),
                                   r.timestamp, "append" if r.timestamp_type == 1 else "create"))
            if linger_until is None and len(out) >= count:
                linger_until = time.monotonic() + 0.3
    finally:
        c.close()
    return out


async def _consume_aiokafka(bootstrap: str, topic: str, starts: dict[int, int], count: int,
                            timeout: float, max_partition_fetch_bytes: int | None = None) -> list[Msg]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    extra = {"max_partition_fetch_bytes": max_partition_fetch_bytes} if max_partition_fetch_bytes else {}
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=100, **extra)
    await c.start()
    out: list[Msg] = []
    try:
        tps = {p: ATP(topic, p) for p in starts}
        c.assign(list(tps.values()))
        for p, off in starts.items():
            c.seek(tps[p], off)
        deadline = time.monotonic() + timeout
        linger_until: float | None = None
        while True:
            now = time.monotonic()
            if now > deadline or (linger_until is not None and now > linger_until):
                break
            data = await c.getmany(timeout_ms=200, max_records=5000)
            for _tp, recs in data.items():
                for r in recs:
                    out.append(Msg(r.partition, r.offset, r.key, r.value, tuple(tuple(h) for h in r.headers),
                                   r.timestamp, "append" if r.timestamp_type == 1 else "create"))
            if linger_until is None and len(out) >= count:
                linger_until = time.monotonic() + 0.3
    finally:
        await c.stop()
    return out


# ============================================================================ checks


@dataclass
class Expectation:
    """What a partitioned topic must contain after producing ``msgs`` with acknowledged ``acks``."""

    msgs: Sequence[Out]
    acks: Sequence[tuple[int, int]]
    by_pos: dict[tuple[int, int], Out] = field(init=False)

    def __post_init__(self) -> None:
        assert len(self.msgs) == len(self.acks)
        self.by_pos = {}
        for m, pos in zip(self.msgs, self.acks, strict=True):
            assert pos not in self.by_pos, f"two messages acknowledged at {pos}"
            self.by_pos[pos] = m

    def partitions(self) -> set[int]:
        return {p for p, _ in self.acks}


def check_acks_contiguous(acks: Iterable[tuple[int, int]], start: dict[int, int] | None = None) -> None:
    """Per partition, acknowledged offsets are exactly start..start+n-1 and rise in produce order."""
    per: dict[int, list[int]] = {}
    for p, o in acks:
        per.setdefault(p, []).append(o)
    for p, offs in per.items():
        first = (start or {}).get(p, 0)
        assert offs == list(range(first, first + len(offs))), (
            f"partition {p}: acknowledged offsets not contiguous in produce order from {first}: "
            f"{_describe_gaps(offs, first)}"
        )


def _describe_gaps(offs: list[int], first: int) -> str:
    want = list(range(first, first + len(offs)))
    for i, (a, b) in enumerate(zip(offs, want, strict=True)):
        if a != b:
            return f"at position {i} got {a}, expected {b} (first offsets {offs[:5]})"
    return "?"


def check_consumed(expect: Expectation, got: Sequence[Msg], *, check_ts_type: bool = True) -> None:
    """Every acknowledged message consumed exactly once at its offset, byte-exact, in per-partition
    order, and nothing else."""
    seen: dict[tuple[int, int], Msg] = {}
    dups = 0
    for m in got:
        if (m.partition, m.offset) in seen:
            dups += 1
        seen[(m.partition, m.offset)] = m
    assert dups == 0, f"{dups} messages delivered twice"
    extra = sorted(set(seen) - set(expect.by_pos))
    missing = sorted(set(expect.by_pos) - set(seen))
    assert not missing, f"{len(missing)} acknowledged messages not consumed, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} unexpected messages consumed, e.g. {extra[:5]}"
    assert len(got) == len(expect.msgs)
    # per-partition order: arrival order within a partition follows offsets
    last: dict[int, int] = {}
    for m in got:
        assert m.offset > last.get(m.partition, -1), f"partition {m.partition}: offset {m.offset} out of order"
        last[m.partition] = m.offset
    bad = []
    for pos, want in expect.by_pos.items():
        m = seen[pos]
        if (m.key, m.value, m.headers, m.timestamp) != (want.key, want.value, want.headers, want.timestamp) or (
            check_ts_type and m.ts_type != "create"
        ):
            bad.append((pos, want, m))
    assert not bad, f"{len(bad)} messages differ; first: expected {bad[0][1]!r}\n got {bad[0][2]!r}"


def starts_from_zero(partitions: Iterable[int]) -> dict[int, int]:
    return {p: 0 for p in partitions}


# ============================================================================ health


def assert_served(bootstrap: str, timeout: float = 20.0) -> None:
    """A fresh confluent-kafka client gets metadata and completes a produce/consume round trip."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=timeout)
    assert md.brokers, "metadata lists no brokers"
    topic = unique("health")
    create_topic(bootstrap, topic, 1)
    value = uuid.uuid4().bytes
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    acked: list[tuple[int, int]] = []
    errs: list[object] = []
    p.produce(topic, key=b"k", value=value, partition=0,
              on_delivery=lambda e, m: errs.append(e) if e else acked.append((m.partition(), m.offset())))
    assert p.flush(timeout) == 0 and not errs, f"health produce failed: {errs}"
    assert acked == [(0, 0)], acked
    got = consume_confluent(bootstrap, topic, {0: 0}, 1, timeout=timeout)
    assert [(m.offset, m.value) for m in got] == [(0, value)], got


# ============================================================================ segment files


BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True)
class FileBatch:
    position: int
    base_offset: int
    size: int
    last_offset_delta: int
    max_timestamp: int
    record_count: int

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


def read_segment(path: Path) -> list[FileBatch]:
    """Batches of a segment file, stopping at the first one that does not frame (no CRC check)."""
    data = path.read_bytes()
    out = []
    pos = 0
    while len(data) - pos >= BATCH_HEAD.size:
        (base, length, _epoch, magic, _crc, _attrs, lod, _bts, max_ts, _pid, _pe, _seq,
         count) = BATCH_HEAD.unpack_from(data, pos)
        if length < 49 or pos + 12 + length > len(data) or magic != 2:
            break
        out.append(FileBatch(pos, base, 12 + length, lod, max_ts, count))
        pos += 12 + length
    return out
