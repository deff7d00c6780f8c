"""pipeline/debezium.py on hand-made Debezium envelopes, in the shape Kafka Connect's JSON converter writes
them (schemas disabled: the bare event; enabled: ``{"schema": ..., "payload": ...}``), and the job's
handling of a TRUNCATE event in the ODS (chDB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from odradek.pipeline import debezium, etl, job, warehouse
from odradek.pipeline.column_type import ColumnType
from odradek.pipeline.config import ConfigError, OdsTable, PipelineConfig
from odradek.pipeline.sink import ChdbSink

SOURCE = {"version": "3.6.1.Final", "connector": "postgresql", "name": "pg", "db": "postgres", "schema": "shop",
          "table": "customers", "snapshot": "false", "xmin": None}


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int, tx: int = 700,
          snapshot: str = "false", wrap: bool = False) -> bytes:
    ev = {"before": before, "after": after, "source": {**SOURCE, "lsn": lsn, "txId": tx, "snapshot": snapshot,
                                                        "ts_ms": 1_700_000_000_000 + lsn,
                                                        "sequence": json.dumps([str(lsn - 1), str(lsn)])},
          "op": op, "ts_ms": 1_700_000_000_500 + lsn, "transaction": None}
    if wrap:  # value.converter.schemas.enable=true (the schema itself is not read)
        return json.dumps({"schema": {"type": "struct", "name": "pg.shop.customers.Envelope"}, "payload": ev}).encode()
    return json.dumps(ev).encode()


def key(cid: int, wrap: bool = False) -> bytes:
    k: dict[str, Any] = {"customer_id": cid}
    if wrap:
        return json.dumps({"schema": {"type": "struct"}, "payload": k}).encode()
    return json.dumps(k).encode()


def frame(spark: Any, records: list[tuple[bytes | None, bytes | None]], topic: str = "pg.shop.customers") -> Any:
    rows = [(k, v, topic, 0, i, None) for i, (k, v) in enumerate(records)]
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                       "timestamp timestamp")


def row(cid: int, email: str) -> dict[str, Any]:
    return {"customer_id": cid, "full_name": f"C {cid}", "email": email}


def test_events_decode_bare_and_wrapped_envelopes_snapshots_and_tombstones(spark: Any) -> None:
    records = [
        (key(1), event("r", None, row(1, "a"), 100, snapshot="first")),
        (key(2, wrap=True), event("c", None, row(2, "b"), 200, wrap=True)),
        (key(2), event("d", row(2, "b"), None, 300)),
        (key(2), None),  # the tombstone after the delete
        (None, event("t", None, None, 400)),
    ]
    got = [r.asDict() for r in debezium.events(frame(spark, records)).orderBy("offset").collect()]
    assert [r["op"] for r in got] == ["r", "c", "d", None, "t"]
    assert [r["lsn"] for r in got] == [100, 200, 300, None, 400]
    assert [r["tombstone"] for r in got] == [False, False, False, True, False]
    assert [r["snapshot"] for r in got] == [True, False, False, False, False]
    assert got[1]["after"] == {"customer_id": "2", "full_name": "C 2", "email": "b"}
    assert got[1]["key"] == {"customer_id": "2"} and got[1]["tx_id"] == 700
    assert got[2]["before"]["email"] == "b" and got[2]["after"] is None
    assert got[1]["ts_ms"] == 1_700_000_000_700 and got[1]["source_ts_ms"] == 1_700_000_000_200
    assert list(debezium.EVENT_COLUMNS) == list(got[0])


def test_latest_per_key_orders_by_lsn_not_arrival_and_applies_pk_changes(spark: Any) -> None:
    records = [
        # key 1: an update (LSN 300) arrives before the insert it follows (LSN 100)
        (key(1), event("u", row(1, "a"), row(1, "new"), 300)),
        (key(1), event("c", None, row(1, "a"), 100)),
        # a primary-key change 2 → 5: delete of 2 and tombstone, create of 5, with one LSN
        (key(2), event("r", None, row(2, "b"), 50, snapshot="true")),
        (key(2), event("d", row(2, "b"), None, 400)),
        (key(2), None),
        (key(5), event("c", None, row(5, "b"), 400)),
        # key 3: deleted, then a stale update re-delivered afterwards (lower LSN) must not revive it
        (key(3), event("d", row(3, "c"), None, 600)),
        (key(3), event("u", row(3, "x"), row(3, "c"), 550)),
        (None, event("t", None, None, 50)),
    ]
    latest = debezium.latest_per_key(debezium.events(frame(spark, records)), ["customer_id"])
    got = {r["customer_id"]: (r["op"], r["lsn"], r["is_deleted"], (r["after"] or {}).get("email"))
           for r in latest.collect()}
    assert got == {"1": ("u", 300, False, "new"), "2": ("d", 400, True, None), "5": ("c", 400, False, "b"),
                   "3": ("d", 600, True, None)}
    trunc = debezium.truncations(debezium.events(frame(spark, records))).collect()
    assert [(t["topic"], t["lsn"]) for t in trunc] == [("pg.shop.customers", 50)]


def cfg_for(tmp_path: Path) -> PipelineConfig:
    table = OdsTable("customers", ("pg.shop.customers",), ("customer_id",), "source.lsn",
                     {"customer_id": ColumnType.parse("Int64"), "full_name": ColumnType.parse("String"),
                      "email": ColumnType.parse("Nullable(String)")})
    return PipelineConfig("127.0.0.1:1", tmp_path / "wh", tmp_path / "ck", [table])


def test_debezium_mode_maps_tables_to_topics(tmp_path: Path) -> None:
    cfg = debezium.debezium_mode(cfg_for(tmp_path), "pg", ["shop.customers"])
    assert cfg.ods[0].topics == ("pg.shop.customers",) and cfg.topics == ["pg.shop.customers"]
    for prefix, tables, msg in (("", ["shop.customers"], "--topic-prefix"), ("pg", [], "--tables"),
                                ("pg", ["customers"], "not schema.table"), ("pg", ["shop.orders"], "no [[ods]]")):
        with pytest.raises(ConfigError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            debezium.debezium_mode(cfg_for(tmp_path), prefix, tables)


def test_the_job_applies_truncate_and_keeps_later_rows_exactly_once(spark: Any, tmp_path: Path) -> None:
    """A batch: rows at LSN 100..300, a TRUNCATE at 250, a row at 400. The ODS keeps only the row at 400
    and the one updated at 300 (after the TRUNCATE); a replay of the batch changes nothing."""
    cfg = cfg_for(tmp_path)
    table = cfg.ods[0]
    records = [
        (key(1), event("c", None, row(1, "a"), 100)),
        (key(2), event("c", None, row(2, "b"), 200)),
        (key(3), event("c", None, row(3, "c"), 210)),
        (key(3), event("u", row(3, "c"), row(3, "c2"), 300)),
        (None, event("t", None, None, 250)),
        (key(4), event("c", None, row(4, "d"), 400)),
        (key(1), None),
    ]
    arrow = etl.BatchTransform(cfg.ods)(frame(spark, records)).toArrow()
    tbl = job.table_rows(arrow, 0, table)
    good, bad, tombstones = job.split(tbl, table)
    assert (good.num_rows, bad.num_rows, tombstones, job.truncations(tbl)) == (5, 0, 1, [250])
    sink = ChdbSink(cfg.warehouse_path)
    sink.open()
    try:
        sink.ensure_schema(cfg)
        wh = warehouse.parse(cfg)
        for _ in range(2):  # the replay of a batch after a crash: same token
            job.load(sink, wh, table, good, bad, job.batch_token(tbl), job.truncations(tbl))
        live = sink.query_arrow("SELECT customer_id, email FROM ods.customers ORDER BY customer_id").to_pylist()
        assert live == [{"customer_id": 3, "email": "c2"}, {"customer_id": 4, "email": "d"}]
        n = sink.query_arrow("SELECT count() AS n FROM ods.customers_state WHERE _op = 't'")
        assert n.to_pylist() == [{"n": 2}]  # keys 1 and 2, once
    finally:
        sink.close()
    assert isinstance(tbl, pa.Table)
