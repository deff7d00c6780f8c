"""The CDC → ODS job: Spark Structured Streaming from the broker into ClickHouse (chDB).

One streaming query reads every configured topic through the ``odradek`` source (offsets in
``<checkpoint_dir>/ods``). Each micro-batch, in ``foreachBatch`` (the driver process, which owns the
chDB database):

1. ``etl.BatchTransform`` (extract, clean, conform for every table) collected once as Arrow;
2. good rows → ``ods.<table>_state`` (ReplacingMergeTree), bad rows → ``ods.quarantine``, each insert
   with an ``insert_deduplication_token`` made from the batch's offset ranges, so a batch that Spark
   replays after a crash is not loaded twice;
3. before that, the warehouse layer's history rows (``warehouse.history_rows``) for the batch, whose
   inserts feed the summing facts through materialized views inside ClickHouse, and the first
   versions of new keys (``warehouse.first_version_rows``) that feed the aggregating tables' views.

Progress is printed per batch: rows in, rows loaded per table, rows quarantined, lag per partition.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline import etl, warehouse
from odradek.pipeline.config import OdsTable, PipelineConfig
from odradek.pipeline.etl import SOURCE_COLUMNS
from odradek.pipeline.sink import LOADED_COLUMNS, QUARANTINE_COLUMNS, ChdbSink, q, sql_string
from odradek.pipeline.warm_up import warm_up


def batch_token(tbl: pa.Table) -> str:
    """A digest of the batch's (topic, partition, first offset, last offset, count): equal for a replay of
    the same range, different for any other batch, even if the checkpoint was reset."""
    if tbl.num_rows == 0:
        return "empty"
    g = tbl.select(["topic", "partition", "offset"]).group_by(["topic", "partition"]).aggregate(
        [("offset", "min"), ("offset", "max"), ("offset", "count")])
    parts = sorted(zip(g["topic"].to_pylist(), g["partition"].to_pylist(), g["offset_min"].to_pylist(),
                       g["offset_max"].to_pylist(), g["offset_count"].to_pylist(), strict=True))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def split(tbl: pa.Table, table: OdsTable) -> tuple[pa.Table, pa.Table, int]:
    """(ODS rows, quarantine rows, tombstones) from one table's cleaned batch; TRUNCATE events (``t``) are
    none of these (``truncations``)."""
    reason = tbl["_reason"]
    clean = pc.and_(pc.is_null(reason), pc.is_valid(tbl["value"]))
    truncate = pc.fill_null(pc.equal(tbl["_op"], "t"), False)
    good_mask = pc.and_(clean, pc.invert(truncate))
    bad_mask = pc.is_valid(reason)
    good = tbl.filter(good_mask)
    good = pa.table(
        [good[c] for c in table.columns] + [good[c] for c in ("_version", "_is_deleted", "_op", "_ts_ms")]
        + [good["topic"], good["partition"], good["offset"], good["timestamp"]],
        names=[*table.columns, *LOADED_COLUMNS],
    )
    bad = tbl.filter(bad_mask)
    bad = pa.table(
        [pa.array([table.table] * bad.num_rows, pa.string()), bad["topic"], bad["partition"], bad["offset"],
         bad["timestamp"], bad["_reason"], bad["key"], bad["value"]],
        names=list(QUARANTINE_COLUMNS),
    )
    tombstones = tbl.num_rows - good.num_rows - bad.num_rows - len(truncations(tbl))
    return good, bad, tombstones


def truncations(tbl: pa.Table) -> list[int]:
    """The versions (LSNs) of one table's good TRUNCATE events in a cleaned batch, ascending."""
    mask = pc.and_(pc.and_(pc.is_null(tbl["_reason"]), pc.is_valid(tbl["value"])),
                   pc.fill_null(pc.equal(tbl["_op"], "t"), False))
    return sorted(int(v) for v in tbl.filter(mask)["_version"].to_pylist())


@dataclass
class BatchStats:
    rows_in: int = 0
    loaded: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    tombstones: int = 0
    seconds: float = 0.0
    collect_seconds: float = 0.0  # the Spark job: read, transform, toArrow


class BatchProcessor:
    """The ``foreachBatch`` function."""

    def __init__(self, cfg: PipelineConfig, sink: ChdbSink) -> None:
        self.cfg = cfg
        self.sink = sink
        self.stats: dict[int, BatchStats] = {}
        self.lock = threading.Lock()
        self.transform = etl.BatchTransform(cfg.ods)
        self.warehouse = warehouse.parse(cfg)

    def __call__(self, df: Any, batch_id: int) -> None:
        t0 = time.monotonic()
        stats = BatchStats()
        arrow = self.transform(df).toArrow()
        stats.collect_seconds = time.monotonic() - t0
        for i, table in enumerate(self.cfg.ods):
            tbl = table_rows(arrow, i, table)
            if tbl.num_rows == 0:
                continue
            token = batch_token(tbl)
            good, bad, tombstones = split(tbl, table)
            load(self.sink, self.warehouse, table, good, bad, token, truncations(tbl))
            stats.rows_in += tbl.num_rows
            stats.loaded[table.table] = good.num_rows
            stats.quarantined += bad.num_rows
            stats.tombstones += tombstones
        stats.seconds = time.monotonic() - t0
        with self.lock:
            self.stats[batch_id] = stats


def load(sink: ChdbSink, wh: warehouse.Warehouse, table: OdsTable, good: pa.Table, bad: pa.Table, token: str,
         truncated: list[int] | None = None) -> None:
    """One table's share of a batch into the warehouse, every insert deduplicated by ``token``: the
    derived rows first (computed from the ODS as it was before this batch), then the ODS and the
    quarantine, then the batch's TRUNCATEs (``truncate``)."""
    for h in wh.histories_of(table.table):
        hist = warehouse.history_rows(sink, h, good)
        sink.insert(f"dw.{q(h.name)}", list(hist.column_names), hist, f"dw.{h.name}:{token}")
    if wh.feeds_first_versions(table.table):
        first = warehouse.first_version_rows(sink, table, good)
        feed = warehouse.first_versions_table(table)
        sink.insert(f"dw.{q(feed)}", list(first.column_names), first, f"dw.{feed}:{token}")
    sink.insert(f"ods.{q(table.state_table)}", list(good.column_names), good, f"ods.{table.table}:{token}")
    sink.insert("ods.quarantine", list(QUARANTINE_COLUMNS), bad, f"quarantine.{table.table}:{token}")
    for lsn in truncated or ():
        truncate(sink, table, lsn, f"ods.{table.table}:{token}:truncate:{lsn}")


def truncate(sink: ChdbSink, table: OdsTable, version: int, token: str) -> None:
    """A TRUNCATE at ``version``: a delete row (``_is_deleted = 1``, that version) for every live key whose
    version is older, so ``FINAL`` drops them while rows of later changes stay. Deduplicated by ``token``
    like every insert of the batch: a replay after a crash inserts nothing again."""
    state = f"ods.{q(table.state_table)}"
    cols = ", ".join(q(c) for c in table.columns)
    sink.execute(
        f"INSERT INTO {state} ({cols}, _version, _is_deleted, _op, _ts_ms, _topic, _partition, _offset, _timestamp) "
        f"SETTINGS insert_deduplicate = 1, insert_deduplication_token = {sql_string(token)} "
        f"SELECT {cols}, toUInt64({int(version)}), 1, 't', _ts_ms, _topic, _partition, _offset, _timestamp "
        f"FROM {state} FINAL WHERE _is_deleted = 0 AND _version < {int(version)}")


def table_rows(arrow: pa.Table, i: int, table: OdsTable) -> pa.Table:
    """Table ``i``'s rows of a ``BatchTransform`` result, its struct column flattened."""
    sub = arrow.filter(pc.is_in(arrow["topic"], value_set=pa.array(list(table.topics), pa.string())))
    if sub.num_rows == 0:
        return pa.table({})
    struct = sub[f"_t{i}"].combine_chunks()
    names = list(SOURCE_COLUMNS) + [struct.type.field(j).name for j in range(struct.type.num_fields)]
    return pa.Table.from_arrays([sub[c] for c in SOURCE_COLUMNS] + struct.flatten(), names=names)


def _lag(progress: Any) -> dict[str, int]:
    lag: dict[str, int] = {}
    for src in progress["sources"] or []:
        try:
            end = json.loads(src["endOffset"] or "{}") or {}
            latest = json.loads(src["latestOffset"] or "{}") or {}
        except (TypeError, ValueError, KeyError):
            continue
        if not isinstance(end, dict) or not isinstance(latest, dict):
            continue
        for tp, off in latest.items():
            lag[tp] = max(0, int(off) - int(end.get(tp, 0)))
    return lag


def format_progress(batch_id: int, stats: BatchStats, progress: Any | None) -> str:
    loaded = ", ".join(f"{t} +{n}" for t, n in stats.loaded.items()) or "nothing loaded"
    line = (f"batch {batch_id}: {stats.rows_in} in, {loaded}, {stats.quarantined} quarantined"
            + (f", {stats.tombstones} tombstones" if stats.tombstones else "")
            + f", {stats.seconds * 1000:.0f} ms (Spark job {stats.collect_seconds * 1000:.0f}, "
            f"warehouse {(stats.seconds - stats.collect_seconds) * 1000:.0f})")
    if progress is not None:
        lag = _lag(progress)
        if lag:
            line += " | lag " + " ".join(f"{tp}={n}" for tp, n in sorted(lag.items()))
        line += _durations(progress)
    return line


_PHASES = (("latestOffset", "offsets"), ("getBatch", "plan-source"), ("queryPlanning", "planning"),
           ("walCommit", "wal"), ("addBatch", "sink"), ("commitOffsets", "commit"), ("triggerExecution", "trigger"))


def _durations(progress: Any) -> str:
    """Spark's own split of the micro-batch (``durationMs``): planning the offsets, writing the offset
    log (walCommit), running the sink (addBatch: foreachBatch), writing the commit log."""
    try:
        d = progress["durationMs"] or {}
    except (KeyError, TypeError):
        return ""
    parts = [f"{short} {int(d[name])}" for name, short in _PHASES if name in d]
    return " | ms " + " ".join(parts) if parts else ""


def ods_kafka_options(cfg: PipelineConfig) -> dict[str, str]:
    """The source's ``kafka.*`` settings: the configured ones, with ``isolation.level=read_committed``
    unless set (the ODS must not load rows of aborted transactions)."""
    out = {"isolation.level": "read_committed"}
    out.update(cfg.kafka_options)
    return out


class Job:
    def __init__(self, cfg: PipelineConfig, master: str | None = None, available_now: bool = False,
                 out: TextIO = sys.stdout, log_level: str = "ERROR", stop_spark: bool = True) -> None:
        self.cfg = cfg
        self.stop_spark = stop_spark
        self.master = master or cfg.master
        self.available_now = available_now
        self.out = out
        self.log_level = log_level
        self.stopping = False

    def _print(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def run(self) -> int:
        from odradek.pipeline.server import QueryServer
        from odradek.pipeline.spark import build_session

        cfg = self.cfg
        sink = ChdbSink(cfg.warehouse_path)
        sink.open()
        server = QueryServer(sink, cfg.warehouse_path, warn=self._print)
        old_handlers: dict[signal.Signals, Any] = {}
        spark: Any = None
        try:
            sink.ensure_schema(cfg)
            warehouse.ensure(sink, cfg)
            server.start()
            spark = build_session(self.master, "odradek-pipeline", cfg.spark_conf, log_level=self.log_level)
            source_options = {"kafka.bootstrap.servers": cfg.bootstrap_servers, "subscribe": ",".join(cfg.topics),
                              "startingOffsets": cfg.starting_offsets,
                              "failOnDataLoss": str(cfg.fail_on_data_loss).lower()}
            source_options.update({f"kafka.{k}": v for k, v in ods_kafka_options(cfg).items()})
            source_options.update(cfg.source_options)
            if cfg.max_offsets_per_trigger:
                source_options["maxOffsetsPerTrigger"] = str(cfg.max_offsets_per_trigger)
            reader = spark.readStream.format("odradek").options(**source_options)
            processor = BatchProcessor(cfg, sink)
            if cfg.warm_up:
                try:
                    report = warm_up(spark, source_options, processor.transform, cfg.ods)
                    self._print(f"pipeline: {report.describe()}")
                except Exception as e:  # only an optimisation: the query reports real problems itself
                    self._print(f"pipeline: warm-up skipped: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            writer = (reader.load().select(*SOURCE_COLUMNS).writeStream.foreachBatch(processor)
                      .queryName("odradek_ods")
                      .option("checkpointLocation", str(cfg.checkpoint_dir / "ods")))
            if self.available_now:
                writer = writer.trigger(availableNow=True)
            else:
                writer = writer.trigger(processingTime=cfg.trigger_interval)
            for sig in (signal.SIGTERM, signal.SIGINT):
                old_handlers[sig] = signal.signal(sig, self._on_signal)
            self._print(f"pipeline: reading {', '.join(cfg.topics)} from {cfg.bootstrap_servers} into "
                        f"{cfg.warehouse_path} (master {self.master}"
                        + (", available-now" if self.available_now else "") + ")")
            query = writer.start()
            printed: set[int] = set()
            while True:
                done = query.awaitTermination(0.5)
                self._report(query, processor, printed)
                if done:
                    break
                if self.stopping:
                    query.stop()
                    self.stopping = False
            self._report(query, processor, printed, final=True)
            exc = query.exception()
            if exc is not None:
                self._print(f"pipeline: the query failed: {exc}")
                return 1
            total = sum(s.rows_in for s in processor.stats.values())
            self._print(f"pipeline: stopped after {len(processor.stats)} batch(es), {total} record(s)")
            return 0
        finally:
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
            server.stop()
            sink.close()
            if spark is not None and self.stop_spark:
                spark.stop()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _report(self, query: Any, processor: BatchProcessor, printed: set[int], final: bool = False) -> None:
        by_id: dict[int, Any] = {}
        for p in query.recentProgress:
            by_id[int(p["batchId"])] = p
        with processor.lock:
            ready = sorted(b for b in processor.stats if b not in printed)
            for b in ready:
                if b not in by_id and not final:
                    continue
                printed.add(b)
                self._print(format_progress(b, processor.stats[b], by_id.get(b)))
