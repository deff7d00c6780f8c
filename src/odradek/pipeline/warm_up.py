"""Warming the job up before its streaming query starts, on throwaway data that never reaches a table.

A fresh Spark application is slow for its first seconds of work: Python workers start, the JVM
generates code for the plan and only compiles its hot paths (JSON parsing, casts, the Arrow
conversions of a Python data source and of ``toArrow``) after they have run many times. Measured
on local[2] at 1,000 events/s, the first micro-batches after a one-record dry run took 0.7-1.5 s
against 0.3-0.4 s later, so events produced in the first seconds waited up to 3 s.

``warm_up`` therefore, before the query:

1. starts one Python worker per default-parallelism slot (a throwaway job importing the source's
   modules; Spark keeps idle workers for later tasks, ``spark.python.worker.reuse``);
2. dry-runs a micro-batch's Spark job on the newest ``RECENT_RECORDS`` records of each partition of
   the real topics, read through the ``odradek`` source (connections, the reader), collected, not
   written;
3. runs the same transform over synthetic change events (``format("odradek_warm_up")``, a Python
   data source with the Kafka source's schema whose values are Debezium events for each configured
   table, every declared column filled), collected as Arrow and dropped, in rounds of
   ``SYNTHETIC_ROWS`` until, after ``MIN_ROUNDS``, a round is no longer faster than the one before
   (at most ``MAX_ROUNDS`` rounds, ``BUDGET_SECONDS`` for the whole warm-up).

Nothing is written to the warehouse and no offsets are stored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from odradek.pipeline.column_type import ColumnType
from odradek.pipeline.config import OdsTable
from odradek.pipeline.etl import SOURCE_COLUMNS

RECENT_RECORDS = 200  # per partition: the newest records of the real topics the dry run reads
SYNTHETIC_ROWS = 2_000  # per round, over all tasks (a micro-batch of two seconds at 1,000 events/s)
MAX_ROUNDS = 12
MIN_ROUNDS = 8  # 16,000 rows: the rounds were still getting faster after 6 on a loaded machine
BUDGET_SECONDS = 20.0
NUMBER = "__N__"  # in a sample value: replaced by the record's number
SMALL = "__S__"  # replaced by the record's number modulo 100 (fits every integer type)


def sample_value(ct: ColumnType) -> str:
    """A JSON scalar that conforms to ``ct`` (``NUMBER`` and ``SMALL`` stand for per-record integers)."""
    b = ct.base
    if re.fullmatch(r"U?Int\d+", b):
        return SMALL
    if b in ("Float32", "Float64") or b.startswith("Decimal"):
        return f'"{NUMBER}.25"'
    if b in ("Bool", "Boolean"):
        return "true"
    if b == "UUID":
        return '"123e4567-e89b-12d3-a456-426614174000"'
    m = re.fullmatch(r"FixedString\((\d+)\)", b)
    if m:
        return json.dumps("x" * min(8, int(m.group(1))))
    if b in ("Date", "Date32"):
        return '"2024-01-02"'
    if b.startswith("DateTime"):
        return f"17000000{NUMBER}"
    return f'"payload {NUMBER} {"x" * 40}"'


def sample_events(table: OdsTable) -> list[tuple[str, str, str]]:
    """(topic, key, value) templates: a create, an update and a delete event of ``table`` per topic."""
    after = "{" + ", ".join(f"{json.dumps(c)}: {sample_value(ct)}" for c, ct in table.columns.items()) + "}"
    key = "{" + ", ".join(f"{json.dumps(c)}: {sample_value(table.columns[c])}" for c in table.key) + "}"
    source = f'{{"db": "warm_up", "table": {json.dumps(table.table)}, "lsn": {NUMBER}, "ts_ms": 17000000{NUMBER}}}'
    out = []
    for topic in table.topics:
        for op, before, image in (("c", "null", after), ("u", after, after), ("d", after, "null")):
            value = (f'{{"op": "{op}", "before": {before}, "after": {image}, "source": {source}, '
                     f'"ts_ms": 17000000{NUMBER}}}')
            out.append((topic, key, value))
    return out


@dataclass
class _Task(InputPartition):
    index: int
    rows: int


class _SyntheticReader(DataSourceReader):
    def __init__(self, samples: list[tuple[str, str, str]], rows: int, tasks: int) -> None:
        self.samples = samples
        self.rows = rows
        self.tasks = tasks

    def partitions(self) -> Sequence[InputPartition]:
        per = -(-self.rows // self.tasks)
        return [_Task(i, per) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from odradek.pipeline.source import arrow_schema, kafka_schema

        assert isinstance(partition, _Task)
        schema = arrow_schema(kafka_schema(False))
        base = partition.index * partition.rows
        cols: dict[str, list[Any]] = {f.name: [] for f in schema}
        for j in range(partition.rows):
            n = str(base + j + 1)
            topic, key, value = self.samples[j % len(self.samples)]
            small = str((base + j + 1) % 100)
            cols["key"].append(key.replace(NUMBER, n).replace(SMALL, small).encode())
            cols["value"].append(value.replace(NUMBER, n).replace(SMALL, small).encode())
            cols["topic"].append(topic)
            cols["partition"].append(partition.index)
            cols["offset"].append(base + j)
            cols["timestamp"].append(1_700_000_000_000_000 + j)
            cols["timestampType"].append(0)
        yield pa.RecordBatch.from_arrays([pa.array(cols[f.name], f.type) for f in schema], schema=schema)


class SyntheticSource(DataSource):
    """``format("odradek_warm_up")``: the Kafka source's schema, synthetic change events (options
    ``samples``: JSON list of [topic, key, value] templates, ``rows``, ``tasks``)."""

    @classmethod
    def name(cls) -> str:
        return "odradek_warm_up"

    def schema(self) -> StructType:
        from odradek.pipeline.source import kafka_schema

        return kafka_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        samples = [tuple(s) for s in json.loads(self.options["samples"])]
        return _SyntheticReader(samples, int(self.options["rows"]), max(1, int(self.options["tasks"])))


def _warm(batches: Iterator[Any]) -> Iterator[Any]:
    """A throwaway task's body: the modules a source task needs, imported in this Python worker."""
    from odradek.pipeline import arrow_records, source, wire_fetch  # noqa: F401

    yield from batches


@dataclass
class WarmUpReport:
    seconds: float
    rounds_ms: list[int]

    def describe(self) -> str:
        return (f"warmed up in {self.seconds:.1f} s (Python workers, a dry run of a micro-batch's job on the newest "
                f"records, {len(self.rounds_ms)} rounds on synthetic events: "
                + ", ".join(str(ms) for ms in self.rounds_ms) + " ms)")


def warm_up(spark: Any, source_options: dict[str, str], transform: Callable[[Any], Any],
            tables: list[OdsTable]) -> WarmUpReport:
    """See the module docstring. ``transform`` is the micro-batch's DataFrame → DataFrame."""
    from odradek.pipeline.kafka_client import OffsetLookup
    from odradek.pipeline.options import SourceOptions, offsets_option_json

    t0 = time.monotonic()
    n = max(1, int(spark.sparkContext.defaultParallelism))
    spark.range(0, n, 1, n).mapInArrow(_warm, "id long").write.format("noop").mode("overwrite").save()
    opts = {k: v for k, v in source_options.items() if k not in ("startingOffsets", "maxOffsetsPerTrigger")}
    lookup = OffsetLookup(SourceOptions.parse(opts, streaming=False))
    try:
        tps = lookup.partitions()
        if tps:
            latest = lookup.latest(tps)
            earliest = lookup.earliest(tps)
            start = {tp: max(earliest[tp], latest[tp] - RECENT_RECORDS) for tp in tps}
            if any(latest[tp] > start[tp] for tp in tps):
                df = (spark.read.format("odradek").options(**opts)
                      .option("startingOffsets", offsets_option_json(start))
                      .option("endingOffsets", offsets_option_json(latest)).load().select(*SOURCE_COLUMNS))
                transform(df).toArrow()
    finally:
        lookup.close()
    rounds = synthetic_rounds(spark, transform, tables, n, deadline=t0 + BUDGET_SECONDS)
    return WarmUpReport(time.monotonic() - t0, rounds)


def synthetic_rounds(spark: Any, transform: Callable[[Any], Any], tables: list[OdsTable], tasks: int,
                     deadline: float) -> list[int]:
    """Rounds of the transform over synthetic events until one is no faster than the one before (after
    ``MIN_ROUNDS``), ``MAX_ROUNDS`` or the deadline; the milliseconds of each round."""
    samples = [s for t in tables for s in sample_events(t)]
    if not samples:
        return []
    spark.dataSource.register(SyntheticSource)
    df = (spark.read.format("odradek_warm_up").option("samples", json.dumps(samples))
          .option("rows", str(SYNTHETIC_ROWS)).option("tasks", str(tasks)).load().select(*SOURCE_COLUMNS))
    out: list[int] = []
    while len(out) < MAX_ROUNDS and time.monotonic() < deadline:
        t = time.monotonic()
        transform(df).toArrow()
        out.append(int((time.monotonic() - t) * 1000))
        if len(out) >= MIN_ROUNDS and out[-1] >= out[-2]:
            break
    return out
