"""The confluent-kafka side of the Spark source: offsets lookup for planning and range reads for tasks.

Planning (driver-side Python process) uses an ``AdminClient``: topic metadata and ``ListOffsets``
(earliest / latest / by timestamp) for many partitions in one round trip. Tasks (executor Python
workers) read one ``[start, end)`` range of one partition with a ``Consumer`` that is ``assign``ed and
positioned at ``start`` — no group membership, nothing committed to the broker — and turn the records
into Arrow record batches in Spark's Kafka-source layout. Consumers are pooled per process, since
Spark reuses Python workers across tasks and connecting costs more than a small micro-batch.

Only standard Kafka APIs are used (Metadata, ListOffsets, Fetch), so any Kafka-compatible broker works.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from odradek.pipeline.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    SourceOptions,
    TopicPartitionKey,
)

log = logging.getLogger("odradek.pipeline.source")

ARROW_BATCH_ROWS = 32_768
ARROW_BATCH_BYTES = 16 << 20


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, topic deleted or recreated)."""


def data_loss(message: str, fail: bool) -> None:
    """Spark's rule: fail (``failOnDataLoss=true``, the default) or log a warning and go on."""
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in the broker "
            "(deleted by retention, or the topic was deleted or recreated). If you want the query to go on "
            "in that case, set the source option 'failOnDataLoss' to 'false'."
        )
    log.warning("%s. Some data may have been lost; going on because failOnDataLoss is false.", message)


# ----------------------------------------------------------------------------- planning


class OffsetLookup:
    """Metadata and offsets for the planner. Not picklable on purpose: readers drop it before Spark
    ships them to executors and create it again on demand."""

    def __init__(self, opts: SourceOptions) -> None:
        from confluent_kafka.admin import AdminClient

        self.opts = opts
        conf: dict[str, Any] = {k: v for k, v in opts.kafka.items() if k not in _CONSUMER_ONLY}
        self.timeout = max(1.0, opts.poll_timeout_ms / 1000.0)
        self.admin: Any = AdminClient(conf)

    def partitions(self) -> list[TopicPartitionKey]:
        md = self.admin.list_topics(timeout=self.timeout)
        available = {name: sorted(t.partitions) for name, t in md.topics.items() if t.error is None}
        return self.opts.topics.select(available)

    def list_offsets(self, spec_by_tp: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """``spec`` per partition: EARLIEST, LATEST or a timestamp (>= 0). Returns offsets; -1 for a
        timestamp later than every record."""
        from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec as KOffsetSpec

        if not spec_by_tp:
            return {}
        req: dict[Any, Any] = {}
        for (t, p), s in spec_by_tp.items():
            if s == EARLIEST:
                ks = KOffsetSpec.earliest()
            elif s == LATEST:
                ks = KOffsetSpec.latest()
            else:
                ks = KOffsetSpec.for_timestamp(int(s))
            req[TopicPartition(t, p)] = ks
        iso = (IsolationLevel.READ_COMMITTED if self.opts.kafka.get("isolation.level") == "read_committed"
               else IsolationLevel.READ_UNCOMMITTED)
        futures = self.admin.list_offsets(req, isolation_level=iso, request_timeout=self.timeout)
        out: dict[TopicPartitionKey, int] = {}
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = int(fut.result().offset)
            except KafkaException as e:
                raise RuntimeError(f"cannot list offsets of {tp.topic}:{tp.partition}: {e}") from e
        return out

    def earliest(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets(dict.fromkeys(tps, LATEST))

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartitionKey], which: str) -> dict[TopicPartitionKey, int]:
        """Concrete offsets for ``tps`` from a starting/ending spec."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            missing = [tp for tp in tps if tp not in spec.offsets]
            if missing:
                raise OptionError(
                    f"'{which}Offsets' must give an offset for every partition read; missing "
                    + ", ".join(f"{t}:{p}" for t, p in missing)
                )
            wanted = {tp: spec.offsets[tp] for tp in tps}
            special = {tp: o for tp, o in wanted.items() if o in (EARLIEST, LATEST)}
            wanted.update(self.list_offsets(special))
            return wanted
        if spec.kind == "timestamp":
            assert spec.timestamp is not None
            by_ts = dict.fromkeys(tps, spec.timestamp)
        else:
            missing = [tp for tp in tps if tp not in spec.offsets]
            if missing:
                raise OptionError(
                    f"'{which}OffsetsByTimestamp' must give a timestamp for every partition read; missing "
                    + ", ".join(f"{t}:{p}" for t, p in missing)
                )
            by_ts = {tp: spec.offsets[tp] for tp in tps}
        found = self.list_offsets(by_ts)
        none = [tp for tp, o in found.items() if o < 0]
        if none:
            if which == "starting" and self.opts.timestamp_strategy == "error":
                raise OptionError(
                    "no record at or after the starting timestamp in "
                    + ", ".join(f"{t}:{p}" for t, p in sorted(none))
                    + " (set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
                )
            found.update(self.latest(none))
        return found

    def close(self) -> None:
        self.admin = None


# Settings the AdminClient rejects or that only make sense for a consumer.
_CONSUMER_ONLY = {"group.id", "isolation.level", "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes",
                  "fetch.wait.max.ms", "fetch.queue.backoff.ms", "queued.max.messages.kbytes",
                  "queued.min.messages", "max.poll.records", "session.timeout.ms", "heartbeat.interval.ms",
                  "fetch.max.wait.ms", "check.crcs", "client.rack"}


# ----------------------------------------------------------------------------- reading

_pool_lock = threading.Lock()
_pool: dict[tuple[tuple[str, str], ...], list[Any]] = {}


def consumer_config(opts: SourceOptions) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "group.id": f"{opts.group_id_prefix}-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "isolation.level": "read_uncommitted",  # the Java client's default, as Spark's source has it
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 10,  # a pooled consumer re-assigned waits for its last fetch to return
        "queued.max.messages.kbytes": 65536,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 10485760,
        "check.crcs": True,  # Kafka's consumer default (librdkafka's is false); kafka.check.crcs=false turns it off
    }
    for k, v in opts.kafka.items():
        if k == "max.poll.records":
            continue
        conf[k] = v
    return conf


def _borrow(opts: SourceOptions) -> tuple[tuple[tuple[str, str], ...], Any]:
    from confluent_kafka import Consumer

    key = tuple(sorted(opts.kafka.items()))
    with _pool_lock:
        idle = _pool.get(key)
        if idle:
            return key, idle.pop()
    return key, Consumer(consumer_config(opts))


def _give_back(key: tuple[tuple[str, str], ...], consumer: Any, healthy: bool) -> None:
    if healthy:
        try:
            consumer.unassign()
        except Exception:  # a broken consumer is simply closed
            healthy = False
    if not healthy:
        with contextlib.suppress(Exception):
            consumer.close()
        return
    with _pool_lock:
        idle = _pool.setdefault(key, [])
        if len(idle) < 4:
            idle.append(consumer)
            return
    consumer.close()


class _Columns:
    """Column builders for one Arrow batch in Spark's Kafka-source layout."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int) -> None:
        self.schema = schema
        self.topic = topic
        self.partition = partition
        self.with_headers = "headers" in schema.names
        self.reset()

    def reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.ts: list[int] = []
        self.ts_types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msg: Any) -> None:
        k = msg.key()
        v = msg.value()
        self.keys.append(k)
        self.values.append(v)
        self.offsets.append(msg.offset())
        ts_type, ts = msg.timestamp()
        # confluent-kafka: 0 not available, 1 create time, 2 log append time; Kafka/Spark: -1, 0, 1.
        self.ts_types.append(ts_type - 1)
        self.ts.append(ts * 1000 if ts_type else -1000)
        self.nbytes += (len(k) if k else 0) + (len(v) if v else 0) + 40
        if self.with_headers:
            hs = msg.headers()
            self.headers.append([{"key": hk, "value": hv} for hk, hv in hs] if hs else None)

    def add_many(self, msgs: list[Any]) -> None:
        """``add`` for a run of data messages (no errors, all in range), with list comprehensions."""
        self.keys.extend([m.key() for m in msgs])
        vals = [m.value() for m in msgs]
        self.values.extend(vals)
        self.offsets.extend([m.offset() for m in msgs])
        tss = [m.timestamp() for m in msgs]
        self.ts_types.extend([t - 1 for t, _ in tss])
        self.ts.extend([ts * 1000 if t else -1000 for t, ts in tss])
        self.nbytes += sum(len(v) for v in vals if v) + 40 * len(msgs)
        if self.with_headers:
            self.headers.extend([[{"key": hk, "value": hv} for hk, hv in hs] if (hs := m.headers()) else None
                                 for m in msgs])

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        s = self.schema
        arrays = [
            pa.array(self.keys, type=s.field("key").type),
            pa.array(self.values, type=s.field("value").type),
            pa.array([self.topic] * n, type=s.field("topic").type),
            pa.array([self.partition] * n, type=s.field("partition").type),
            pa.array(self.offsets, type=s.field("offset").type),
            pa.array(self.ts, type=pa.int64()).cast(s.field("timestamp").type),
            pa.array(self.ts_types, type=s.field("timestampType").type),
        ]
        if self.with_headers:
            arrays.append(pa.array(self.headers, type=s.field("headers").type))
        rb = pa.RecordBatch.from_arrays(arrays, schema=s)
        self.reset()
        return rb


def read_range(opts: SourceOptions, schema: pa.Schema, topic: str, partition: int, start: int,
               end: int) -> Iterator[pa.RecordBatch]:
    """Records of ``topic:partition`` with ``start <= offset < end`` as Arrow batches.

    Offsets below the log start offset (deleted by retention) are data loss: an error with
    ``failOnDataLoss=true``, else a warning and the read goes on from the log start. Gaps inside the
    range (compacted topics, transaction markers) are normal. If the range cannot be completed within
    ``kafkaConsumer.pollTimeoutMs`` (the records are not there), that is data loss too.
    """
    if end <= start:
        return
    from odradek.pipeline import wire_fetch

    if wire_fetch.usable(opts, "headers" in schema.names):
        yield from wire_fetch.read_range(opts, schema, topic, partition, start, end, data_loss)
        return
    from confluent_kafka import KafkaError, TopicPartition

    key, consumer = _borrow(opts)
    healthy = False
    cols = _Columns(schema, topic, partition)
    fail = opts.fail_on_data_loss
    timeout = opts.poll_timeout_ms / 1000.0
    try:
        tp = TopicPartition(topic, partition)
        low, _high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        if start < low:
            data_loss(f"{topic}:{partition}: offsets {start}..{min(end, low) - 1} are below the log start "
                      f"offset {low}", fail)
            start = low
            if start >= end:
                healthy = True
                return
        consumer.assign([TopicPartition(topic, partition, start)])
        nxt = start
        last_progress = time.monotonic()
        done = False
        while not done:
            msgs = consumer.consume(num_messages=max(1, min(10_000, end - nxt)), timeout=0.1)
            if not msgs:
                if time.monotonic() - last_progress > timeout:
                    data_loss(f"{topic}:{partition}: offsets {nxt}..{end - 1} could not be fetched within "
                              f"{timeout:.0f}s (kafkaConsumer.pollTimeoutMs)", fail)
                    break
                continue
            last_progress = time.monotonic()
            if (msgs[-1].error() is None and msgs[0].offset() >= nxt and msgs[-1].offset() < end
                    and not any([m.error() is not None for m in msgs])):
                cols.add_many(msgs)  # the common case: only data messages, all inside the range
                nxt = msgs[-1].offset() + 1
                if len(cols) >= ARROW_BATCH_ROWS or cols.nbytes >= ARROW_BATCH_BYTES:
                    yield cols.batch()
                if nxt >= end:
                    done = True
                continue
            for m in msgs:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:
                            done = True
                            break
                        continue
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, _high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
                        data_loss(f"{topic}:{partition}: offset {nxt} is out of range (log start {low})", fail)
                        if low >= end or low <= nxt:
                            done = True
                            break
                        nxt = low
                        consumer.assign([TopicPartition(topic, partition, nxt)])
                        break
                    if err.retriable() or code == KafkaError._TRANSPORT:
                        continue
                    raise RuntimeError(f"reading {topic}:{partition}: {err}")
                off = m.offset()
                if off >= end:
                    done = True
                    break
                if off < nxt:
                    continue
                cols.add(m)
                nxt = off + 1
                if len(cols) >= ARROW_BATCH_ROWS or cols.nbytes >= ARROW_BATCH_BYTES:
                    yield cols.batch()
            if nxt >= end:
                done = True
        if len(cols):
            yield cols.batch()
        healthy = True
    finally:
        _give_back(key, consumer, healthy)
