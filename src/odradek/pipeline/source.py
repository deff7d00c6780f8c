"""Spark data source ``odradek``: Kafka topics as a Spark source and sink, through PySpark's Python
Data Source API and confluent-kafka.

    from odradek.pipeline.source import OdradekDataSource
    spark.dataSource.register(OdradekDataSource)
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())                                      # batch
    sdf = spark.readStream.format("odradek").option(...).option("maxOffsetsPerTrigger", 1000).load()
    df.selectExpr("key", "value").write.format("odradek").option("topic", "copy").option(...).save()

Schema and options are those of Spark's built-in Kafka source (see ``options.py``):
``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` and, with ``includeHeaders=true``, ``headers array<struct<key:string,value:binary>>``
(null when a record has no headers, as in Spark).

Streaming offsets are ``{"topic:partition": next_offset}`` dicts, kept by Spark in the query's
checkpoint; nothing is committed to the broker. A restarted query replays a planned batch with exactly
the same ranges, so a deterministic sink sees the same rows again. Trigger.AvailableNow is supported
(``SupportsTriggerAvailableNow``) and honours ``maxOffsetsPerTrigger``.

The sink writes the rows' ``value`` (required), ``key``, ``headers`` and ``partition`` (optional) to the
row's ``topic`` column or to the ``topic`` option (which wins, as in Spark) with an idempotent producer
(``enable.idempotence=true``): at-least-once across task retries, no duplicates from producer retries.
A streaming sink with ``exactlyOnce=true`` (and the ``topic`` option) writes each task of a micro-batch
in one transaction that records the batch id, so a replayed micro-batch is fenced instead of written
twice: exactly-once for ``read_committed`` readers (``exactly_once.py``; ``transactionalIdPrefix``
names the transactional ids, default ``odradek-sink``).

With ``shareGroup`` the streaming source reads a share group (KIP-932) instead of owning offset ranges:
``shareTasks`` tasks per micro-batch, records acknowledged after the batch commits, at-least-once
(``share_source.py`` explains the design and exactly when duplicates happen).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.pipeline import exactly_once, kafka_client, share_source
from odradek.pipeline.kafka_client import OffsetLookup, data_loss
from odradek.pipeline.options import (
    Offsets,
    OptionError,
    SourceOptions,
    TopicPartitionKey,
    kafka_params,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
)

log = logging.getLogger("odradek.pipeline.source")

def kafka_schema(include_headers: bool) -> StructType:
    """``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int[, headers array<struct<key:string,value:binary>>]`` (built without a Spark
    context, since planning and task processes have none)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


@dataclass
class KafkaInputPartition(InputPartition):
    """One task: ``topic:partition`` offsets ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass
class CoalescedInputPartition(InputPartition):
    """One task for a small batch: every range, read one after the other."""

    ranges: list[KafkaInputPartition]


def _split(tp: TopicPartitionKey, start: int, end: int, pieces: int) -> list[KafkaInputPartition]:
    if pieces <= 1 or end - start < 2:
        return [KafkaInputPartition(tp[0], tp[1], start, end)]
    step = -(-(end - start) // pieces)
    return [KafkaInputPartition(tp[0], tp[1], s, min(s + step, end)) for s in range(start, end, step)]


PARALLELISM_ENV = "ODRADEK_SPARK_PARALLELISM"
TASKS_PER_CORE = 1
SPLIT_MIN_RECORDS = 50_000


def default_parallelism() -> int:
    """The Spark application's default parallelism as ``build_session`` hands it to the source's Python
    processes (``ODRADEK_SPARK_PARALLELISM`` in the workers' environment); else this machine's cores."""
    raw = os.environ.get(PARALLELISM_ENV, "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return os.cpu_count() or 1


def default_min_partitions(total: int, parallelism: int) -> int:
    """The tasks a read gets when ``minPartitions`` is not given: one per core of the application
    (Spark's default parallelism), but no more than one per ``SPLIT_MIN_RECORDS`` records, so a small
    micro-batch keeps one task per topic partition while a large read of fewer topic partitions than
    cores still uses every core. (On 2 cores, one task per partition already reads 1.3-1.4 M rows/s of
    100 B records once the JVM is warm, so the split only shows with more cores than partitions; more
    tasks than cores measured slower: 6 tasks 0.8 M rows/s against 1.3-1.4 M for 3 or 4.)"""
    return max(1, min(TASKS_PER_CORE * max(1, parallelism), total // SPLIT_MIN_RECORDS))


def plan_ranges(ranges: dict[TopicPartitionKey, tuple[int, int]], min_partitions: int | None,
                coalesce_below: int = 0, parallelism: int | None = None) -> list[InputPartition]:
    """One input partition per topic partition with data, split further (largest first, in proportion to
    size) when ``minPartitions`` asks for more tasks than there are topic partitions; without
    ``minPartitions``, ``default_min_partitions`` of the records and ``parallelism`` (default:
    ``default_parallelism()``). One input partition for all of them when they hold fewer than
    ``coalesce_below`` records together (and ``minPartitions`` does not ask for more than one task)."""
    live = {tp: r for tp, r in sorted(ranges.items()) if r[1] > r[0]}
    total = sum(e - s for s, e in live.values())
    if len(live) > 1 and total < coalesce_below and (min_partitions or 1) <= 1:
        return [CoalescedInputPartition([KafkaInputPartition(t, p, s, e) for (t, p), (s, e) in live.items()])]
    if not min_partitions:
        min_partitions = default_min_partitions(total, default_parallelism() if parallelism is None else parallelism)
    if min_partitions <= len(live):
        return [KafkaInputPartition(t, p, s, e) for (t, p), (s, e) in live.items()]
    out: list[InputPartition] = []
    for tp, pieces in _shares(live, min_partitions, total).items():
        out.extend(_split(tp, *live[tp], pieces))
    return out


def _shares(live: dict[TopicPartitionKey, tuple[int, int]], tasks: int, total: int) -> dict[TopicPartitionKey, int]:
    """``tasks`` pieces dealt to the ranges in proportion to their sizes (largest remainders first), at
    least one each: three equal ranges and four tasks give 2 + 1 + 1, where rounding each share gave 3."""
    exact = {tp: tasks * (e - s) / total for tp, (s, e) in live.items()}
    pieces = {tp: max(1, int(x)) for tp, x in exact.items()}
    left = tasks - sum(pieces.values())
    for tp in sorted(exact, key=lambda k: (-(exact[k] - int(exact[k])), k))[:max(0, left)]:
        pieces[tp] += 1
    return pieces


class _Planner:
    """State shared by the batch and streaming readers: parsed options and a lazily created offset
    lookup that is dropped when Spark pickles the reader for executors."""

    streaming = False

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = dict(options)
        self.opts = SourceOptions.parse(self.options, streaming=self.streaming)
        self.schema = schema
        self._lookup: OffsetLookup | None = None

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.opts)
        return self._lookup

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state

    def _read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        ranges = partition.ranges if isinstance(partition, CoalescedInputPartition) else [partition]
        schema = arrow_schema(self.schema)
        for r in ranges:
            if isinstance(r, KafkaInputPartition):
                yield from kafka_client.read_range(self.opts, schema, r.topic, r.partition, r.start, r.end)


class OdradekBatchReader(_Planner, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        tps = self.lookup.partitions()
        if not tps:
            return []
        start = self.lookup.resolve(self.opts.starting, tps, "starting")
        end = self.lookup.resolve(self.opts.ending, tps, "ending")
        ranges: dict[TopicPartitionKey, tuple[int, int]] = {}
        for tp in tps:
            s, e = start[tp], end[tp]
            if s > e:
                raise OptionError(
                    f"{tp[0]}:{tp[1]}: starting offset {s} is after ending offset {e} "
                    f"(startingOffsets={self.opts.starting.describe()}, endingOffsets={self.opts.ending.describe()})"
                )
            ranges[tp] = (s, e)
        return plan_ranges(ranges, self.opts.min_partitions, self.opts.coalesce_below)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, (KafkaInputPartition, CoalescedInputPartition)):
            return iter(())  # Spark's stand-in when there is nothing to read
        return self._read(partition)


class OdradekStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    streaming = True

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self._target: Offsets | None = None  # Trigger.AvailableNow: offsets not to go past
        self._latest: Offsets = {}

    # -- offsets

    def initialOffset(self) -> dict[str, int]:
        tps = self.lookup.partitions()
        return offsets_to_json(self.lookup.resolve(self.opts.starting, tps, "starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.lookup.partitions()
        self._target = self.lookup.latest(tps)
        log.info("Trigger.AvailableNow: reading up to %s", offsets_to_json(self._target))

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = offsets_from_json(start)
        tps = self.lookup.partitions()
        latest = self.lookup.latest(tps)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target}
        gone = sorted(tp for tp in begin if tp not in latest and (self._target is None or tp in self._target))
        if gone:
            data_loss("partitions " + ", ".join(f"{t}:{p}" for t, p in gone) + " no longer exist",
                      self.opts.fail_on_data_loss)
        effective = {tp: begin[tp] for tp in latest if tp in begin}
        new = [tp for tp in latest if tp not in begin]
        if new:
            effective.update(self.lookup.earliest(new))
        for tp, o in list(effective.items()):
            if latest[tp] < o:
                data_loss(f"{tp[0]}:{tp[1]}: the latest offset {latest[tp]} is below the checkpointed offset {o} "
                          "(the topic was recreated or truncated)", self.opts.fail_on_data_loss)
                effective[tp] = latest[tp]
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(effective, latest, limit.max_rows)
        else:
            end = dict(latest)
        if end == begin:
            return start
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, int] | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [tp for tp in finish if tp not in begin]
        earliest = self.lookup.earliest(new) if new else {}
        ranges: dict[TopicPartitionKey, tuple[int, int]] = {}
        for tp, e in finish.items():
            s = begin[tp] if tp in begin else earliest.get(tp, 0)
            if s > e:
                s = e  # reported as data loss when the offset was planned
            ranges[tp] = (s, e)
        return plan_ranges(ranges, self.opts.min_partitions, self.opts.coalesce_below)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, (KafkaInputPartition, CoalescedInputPartition)):
            return iter(())  # Spark's stand-in when there is nothing to read
        return self._read(partition)

    def commit(self, end: dict[str, int]) -> None:
        log.debug("committed %s", end)

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


# ----------------------------------------------------------------------------- sink


@dataclass
class ProducedMessage(WriterCommitMessage):
    rows: int


class _Producing:
    """Rows → records. Columns: ``value`` (required), ``key``, ``topic``, ``headers``, ``partition``."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        lowered = {k.lower(): k for k in options}
        self.topic: str | None = options.get(lowered.get("topic", "topic"))
        self.kafka = kafka_params(options)
        names = set(schema.fieldNames())
        if "value" not in names:
            raise OptionError("the data to write to Kafka needs a 'value' column (string or binary)")
        if self.topic is None and "topic" not in names:
            raise OptionError("no topic: give the 'topic' option or a 'topic' column")
        self.names = names
        if "transactional.id" in self.kafka:
            raise OptionError("Kafka option 'transactional.id' is not supported: set 'exactlyOnce' to 'true' and "
                              "the sink derives one transactional id per task from the query id")
        raw = str(options.get(lowered.get("exactlyonce", "exactlyOnce"), "false")).strip().lower()
        if raw not in ("true", "false"):
            raise OptionError(f"option 'exactlyOnce' must be true or false, got {raw!r}")
        self.exactly_once = raw == "true"
        self.prefix = str(options.get(lowered.get("transactionalidprefix", "transactionalIdPrefix"),
                                      exactly_once.DEFAULT_PREFIX))
        if self.exactly_once and self.topic is None:
            raise OptionError("exactlyOnce=true needs the 'topic' option (its partition 0 carries the batch "
                              "marker committed with each transaction)")

    def _conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"enable.idempotence": True, "linger.ms": 5, "acks": "all"}
        conf.update(self.kafka)
        return conf

    def produce(self, rows: Iterator[Any]) -> int:
        if self.exactly_once:
            return self._produce_exactly_once(rows)
        from confluent_kafka import Producer

        return self._produce(rows, Producer(self._conf()))

    def _produce_exactly_once(self, rows: Iterator[Any]) -> int:
        """The task's rows in one transaction that also commits the batch marker; nothing when the
        marker shows that this batch's task committed before (a replay)."""
        from confluent_kafka import Producer

        assert self.topic is not None
        ident = exactly_once.current_task()
        tid = ident.transactional_id(self.prefix)
        conf = self._conf()
        conf["transactional.id"] = tid
        producer = Producer(conf)
        # first: fence any earlier attempt of this task and end its transaction (committed or aborted)
        producer.init_transactions(60)
        if exactly_once.already_written(self.kafka, ident, self.prefix, self.topic, 60.0):
            log.info("batch %d partition %d: already committed by %s; replay skipped", ident.batch_id,
                     ident.partition_id, tid)
            return 0
        producer.begin_transaction()
        return self._produce(rows, producer, ident)

    def _produce(self, rows: Iterator[Any], producer: Any, ident: exactly_once.TaskIdentity | None = None) -> int:
        from confluent_kafka import KafkaException

        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        n = 0
        for row in rows:
            d = row.asDict(recursive=False) if hasattr(row, "asDict") else dict(row)
            topic = self.topic or d.get("topic")
            if not topic:
                raise ValueError(f"row {n} has no topic and no 'topic' option is set")
            kw: dict[str, Any] = {"value": _to_bytes(d.get("value")), "on_delivery": on_delivery}
            if "key" in d:
                kw["key"] = _to_bytes(d.get("key"))
            hs = d.get("headers")
            if hs:
                kw["headers"] = [(h["key"], _to_bytes(h["value"])) for h in hs]
            if d.get("partition") is not None:
                kw["partition"] = int(d["partition"])
            while True:
                try:
                    producer.produce(topic, **kw)
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
            if n % 1000 == 0:
                producer.poll(0)
            if errors:
                break
        remaining = producer.flush(60)
        if errors:
            if ident is not None:
                producer.abort_transaction(60)
            raise KafkaException(f"{len(errors)} record(s) not delivered; first error: {errors[0]}")
        if remaining:
            raise RuntimeError(f"{remaining} record(s) still undelivered after 60 s")
        if ident is not None:
            assert self.topic is not None
            group = exactly_once.marker_group_metadata(self.kafka, ident, self.prefix)
            producer.send_offsets_to_transaction([exactly_once.marker(ident, self.topic)], group, 60)
            producer.commit_transaction(60)
        return n


def _to_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    return str(v).encode()


class OdradekWriter(DataSourceWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.producing = _Producing(options, schema)
        if self.producing.exactly_once:
            raise OptionError("exactlyOnce=true is for streaming writes (writeStream): a batch write has no "
                              "batch id to fence a replay with")

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return ProducedMessage(self.producing.produce(iterator))


class OdradekStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.producing = _Producing(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return ProducedMessage(self.producing.produce(iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, ProducedMessage))
        log.info("batch %d: %d record(s) written", batchId, rows)


# ----------------------------------------------------------------------------- data source


class OdradekDataSource(DataSource):
    """``format("odradek")``: Spark's Kafka source and sink, for any Kafka-compatible broker."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        include = str(self._opt("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include)

    def _opt(self, name: str, default: str) -> str:
        for k, v in self.options.items():
            if k.lower() == name.lower():
                return str(v)
        return default

    def reader(self, schema: StructType) -> DataSourceReader:
        if share_source.is_share_mode(self.options):
            raise OptionError("'shareGroup' is a streaming read mode (readStream): a batch read has no micro-batch "
                              "commit to acknowledge records after")
        return OdradekBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if share_source.is_share_mode(self.options):
            return share_source.OdradekShareStreamReader(dict(self.options), schema, default_parallelism())
        return OdradekStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("save mode Overwrite is not allowed for Kafka; use Append")
        return OdradekWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return OdradekStreamWriter(dict(self.options), schema)


def register(spark: Any) -> None:
    """``spark.dataSource.register(OdradekDataSource)``."""
    spark.dataSource.register(OdradekDataSource)
