"""The job's warm-up (``odradek.pipeline.warm_up``): the synthetic change events it runs the micro-batch
transform on are well-formed rows of every configured table (so the warm-up exercises the code paths real
events take, not the quarantine's), and a warm-up against a real topic reads it without changing it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc
from confluent_kafka import Producer
from integration.broker import Broker

from odradek.pipeline import etl, warm_up
from odradek.pipeline.column_type import ColumnType
from odradek.pipeline.config import OdsTable
from odradek.pipeline.job import table_rows

TYPES = ("Int64", "UInt8", "Int32", "String", "Nullable(String)", "LowCardinality(String)", "Float64",
         "Nullable(Float32)", "Decimal(12, 2)", "Bool", "UUID", "FixedString(4)", "Date", "Date32", "DateTime",
         "DateTime64(3)", "Nullable(DateTime64(6, 'UTC'))")


def tables() -> list[OdsTable]:
    wide = OdsTable("wide", ("warm.wide",), ("id",), "source.lsn",
                    {"id": ColumnType.parse("Int64"), **{f"c{i}": ColumnType.parse(t) for i, t in enumerate(TYPES)}})
    keyed = OdsTable("keyed", ("warm.keyed.a", "warm.keyed.b"), ("code", "n"), "ts_ms",
                     {"code": ColumnType.parse("String"), "n": ColumnType.parse("Int32"),
                      "note": ColumnType.parse("Nullable(String)")})
    return [wide, keyed]


def test_synthetic_events_are_clean_rows_of_every_table(spark: Any) -> None:
    ods = tables()
    transform = etl.BatchTransform(ods)
    spark.dataSource.register(warm_up.SyntheticSource)
    samples = [s for t in ods for s in warm_up.sample_events(t)]
    df = (spark.read.format("odradek_warm_up").option("samples", json.dumps(samples)).option("rows", "600")
          .option("tasks", "2").load().select(*etl.SOURCE_COLUMNS))
    arrow = transform(df).toArrow()
    assert arrow.num_rows == 600
    for i, table in enumerate(ods):
        rows = table_rows(arrow, i, table)
        assert rows.num_rows > 0, table.table
        assert rows["_reason"].null_count == rows.num_rows, pc.unique(rows["_reason"]).to_pylist()
        assert set(rows["_op"].to_pylist()) == {"c", "u", "d"}
        live = rows.filter(pc.equal(rows["_op"], "c"))
        for c in table.columns:  # every declared column conformed to a value (none left null)
            assert live[c].null_count == 0, (table.table, c)


def test_warm_up_reads_a_real_topic_and_leaves_it_alone(spark: Any, pipeline_broker: Broker,
                                                        new_topic: Callable[..., str]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(3)
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap})
    for i in range(30):
        p.produce(topic, key=b'{"id": %d}' % i, value=b'{"op": "c", "after": {"id": %d}, "source": {"lsn": 1}}' % i,
                  partition=i % 3)
    assert p.flush(30) == 0
    table = OdsTable("t", (topic,), ("id",), "source.lsn", {"id": ColumnType.parse("Int64")})
    seen: list[int] = []

    def transform(df: Any) -> Any:
        out = etl.BatchTransform([table])(df)
        seen.append(1)
        return out

    t0 = time.monotonic()
    report = warm_up.warm_up(spark, {"kafka.bootstrap.servers": pipeline_broker.bootstrap, "subscribe": topic},
                             transform, [table])
    assert report.seconds <= time.monotonic() - t0 + 0.1
    assert 1 <= len(report.rounds_ms) <= warm_up.MAX_ROUNDS
    # fewer rounds than the minimum only when the time budget ran out
    assert len(report.rounds_ms) >= warm_up.MIN_ROUNDS or report.seconds >= warm_up.BUDGET_SECONDS
    assert len(seen) == 1 + len(report.rounds_ms)  # the dry run on the topic, then the synthetic rounds
    c = Consumer({"bootstrap.servers": pipeline_broker.bootstrap, "group.id": "warm-up-check"})
    try:
        ends = [c.get_watermark_offsets(TopicPartition(topic, part), 10) for part in range(3)]
    finally:
        c.close()
    assert [hi for _lo, hi in ends] == [10, 10, 10]  # nothing written to the topic
