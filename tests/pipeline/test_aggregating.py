"""``[[dw.aggregating]]``: an AggregatingMergeTree fed by a materialized view with -State combinators,
read with -Merge, loaded through the job's own ``job.load`` into a real chDB (no Spark here; the
end-to-end run with a kill -9 is in test_ods.py). Duplicates, stale re-deliveries, replayed batches and
merges must leave the merged states equal to the same aggregates computed from the ODS."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from odradek.pipeline import config, warehouse
from odradek.pipeline.job import load
from odradek.pipeline.sink import QUARANTINE_COLUMNS, ChdbSink

CFG = {
    "broker": {"bootstrap_servers": "127.0.0.1:9"},
    "warehouse": {"path": "./wh", "checkpoint_dir": "./ck"},
    "ods": [{"table": "payments", "topics": ["shop.payments"], "key": ["payment_id"], "version": "source.lsn",
             "columns": {"payment_id": "Int64", "customer_id": "Int64", "amount": "Decimal(12, 2)",
                         "day": "Int32"}}],
    "dw": {"aggregating": [{"name": "daily_payments", "ods": "payments", "key": {"day": "day"},
                            "aggregates": {"customers": "uniq(customer_id)",
                                           "amount_q": "quantiles(0.5, 0.9, 0.99)(amount)",
                                           "n": "count()"},
                            "where": "amount > 0"}]},
}


def rows(events: list[tuple[int, int, dict[str, Any]]]) -> pa.Table:
    """ODS rows (columns + lineage) for ``(lsn, offset, row)`` create events."""
    n = len(events)
    return pa.table({
        "payment_id": pa.array([e[2]["payment_id"] for e in events], pa.int64()),
        "customer_id": pa.array([e[2]["customer_id"] for e in events], pa.int64()),
        "amount": pa.array([Decimal(e[2]["amount"]) for e in events], pa.decimal128(12, 2)),
        "day": pa.array([e[2]["day"] for e in events], pa.int32()),
        "_version": pa.array([e[0] for e in events], pa.uint64()),
        "_is_deleted": pa.array([0] * n, pa.uint8()),
        "_op": pa.array(["c"] * n, pa.string()),
        "_ts_ms": pa.array([1] * n, pa.int64()),
        "_topic": pa.array(["shop.payments"] * n, pa.string()),
        "_partition": pa.array([0] * n, pa.int32()),
        "_offset": pa.array([e[1] for e in events], pa.int64()),
        "_timestamp": pa.array([None] * n, pa.timestamp("ms", tz="UTC")),
    })


NO_BAD = pa.table({c: pa.array([], pa.string()) for c in QUARANTINE_COLUMNS})


def test_aggregate_parsing() -> None:
    a = warehouse.Aggregate.parse("quantiles(0.5, 0.9)(amount * 2)", "w")
    assert (a.state(), a.merge("q")) == ("quantilesState(0.5, 0.9)(amount * 2)", "quantilesMerge(0.5, 0.9)(`q`)")
    u = warehouse.Aggregate.parse("uniq(a, b)", "w")
    assert (u.state(), u.merge("u"), u.plain()) == ("uniqState(a, b)", "uniqMerge(`u`)", "uniq(a, b)")
    for bad in ("uniq", "uniqState(x)", "f(x))(", "f(x) + 1"):
        with pytest.raises(config.ConfigError):
            warehouse.Aggregate.parse(bad, "w")


def test_merged_states_equal_recomputation_after_faults(tmp_path: Path) -> None:
    cfg = config.parse(CFG, tmp_path)
    wh = warehouse.parse(cfg)
    (agg,) = wh.aggregatings
    table = cfg.ods[0]
    sink = ChdbSink(tmp_path / "wh")
    sink.open()
    try:
        sink.ensure_schema(cfg)
        warehouse.ensure(sink, cfg)
        rnd = random.Random(17)
        sent: list[tuple[int, int, dict[str, Any]]] = []
        offset = 0
        batches: list[pa.Table] = []
        for b in range(30):
            batch = []
            for _ in range(rnd.randrange(20, 80)):
                if sent and rnd.random() < 0.2:  # a duplicate or stale re-delivery at a new offset
                    lsn, _off, row = rnd.choice(sent)
                    batch.append((lsn, offset, row))
                else:
                    lsn = len(sent) + 1
                    row = {"payment_id": lsn, "customer_id": rnd.randrange(1, 40),
                           "amount": f"{rnd.choice([0, rnd.randrange(1, 100000)]) / 100:.2f}", "day": rnd.randrange(5)}
                    sent.append((lsn, offset, row))
                    batch.append((lsn, offset, row))
                offset += 1
            tbl = rows(batch)
            batches.append(tbl)
            load(sink, wh, table, tbl, NO_BAD, f"batch-{b}")
            if b % 7 == 3:  # Spark replays a planned batch after a crash: same rows, same token
                load(sink, wh, table, batches[rnd.randrange(len(batches))], NO_BAD,
                     f"batch-{batches.index(batches[-1])}")
                load(sink, wh, table, tbl, NO_BAD, f"batch-{b}")
            if b == 20:
                sink.execute(f"OPTIMIZE TABLE dw.`{agg.name}` FINAL")
        merged = sink.query(warehouse.aggregating_merged_sql(agg), "CSV")
        recomputed = sink.query(warehouse.aggregating_recompute_sql(agg), "CSV")
        assert merged == recomputed
        assert merged.count(b"\n") == 5
        states = sink.query(f"SELECT toTypeName(customers), toTypeName(amount_q) FROM dw.`{agg.name}` LIMIT 1", "CSV")
        assert b"AggregateFunction(uniq, Int64)" in states and b"AggregateFunction(quantiles(0.5, 0.9, 0.99)" in states
        feed = sink.query(f"SELECT count() FROM dw.`{agg.feed}`", "CSV")
        assert int(feed) == len(sent)  # each key exactly once, whatever was re-delivered or replayed
    finally:
        sink.close()
