"""The warehouse sink: ClickHouse tables for the ODS (and the warehouse layer), embedded through chDB.

Behind ``WarehouseSink`` so that a ClickHouse server (``clickhouse-connect``) can replace chDB.

Tables (database ``ods``):

- ``ods.<table>_state``: ``ReplacingMergeTree(_version, _is_deleted) ORDER BY (<business key>)`` with the
  declared columns, ``_version UInt64``, ``_is_deleted UInt8``, ``_op``, ``_ts_ms`` and lineage
  (``_topic``, ``_partition``, ``_offset``, ``_timestamp`` = the record's broker timestamp,
  ``_loaded_at``). Every version is inserted; merges keep the highest version per key, and a delete
  is a row with ``_is_deleted = 1`` — so a stale insert arriving after a delete (lower version) loses.
- ``ods.<table>``: a view ``SELECT <declared columns> FROM ods.<table>_state FINAL WHERE _is_deleted = 0``:
  one row per live key with its latest version, whatever the merge state.
- ``ods.quarantine``: rejected records (table, topic, partition, offset, timestamp, reason, raw key and
  value), ``ReplacingMergeTree ORDER BY (topic, partition, offset)``.

Exactly-once: every table has ``non_replicated_deduplication_window``; each insert carries an
``insert_deduplication_token`` derived from the batch's offset ranges, so a batch replayed after a crash
(Spark replays a planned batch with exactly the same ranges) is dropped by ClickHouse, including the
blocks it would push through materialized views.

chDB allows one process per database directory: the Spark driver owns it while a job runs (see
``server.py`` for querying a running job).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from odradek.pipeline.config import OdsTable, PipelineConfig

DEDUP_WINDOW = 10_000
LINEAGE = (
    "_version UInt64, _is_deleted UInt8, _op LowCardinality(String), _ts_ms Nullable(Int64), "
    "_topic LowCardinality(String), _partition Int32, _offset Int64, "
    "_timestamp Nullable(DateTime64(3, 'UTC')), _loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)"
)
LOADED_COLUMNS = ("_version", "_is_deleted", "_op", "_ts_ms", "_topic", "_partition", "_offset", "_timestamp")
QUARANTINE_DDL = (
    "CREATE TABLE IF NOT EXISTS ods.quarantine (`table` LowCardinality(String), topic LowCardinality(String), "
    "partition Int32, offset Int64, timestamp Nullable(DateTime64(3, 'UTC')), reason String, "
    "key Nullable(String), value Nullable(String), _loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
    "ENGINE = ReplacingMergeTree ORDER BY (topic, partition, offset) "
    f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}"
)
QUARANTINE_COLUMNS = ("table", "topic", "partition", "offset", "timestamp", "reason", "key", "value")

FORMATS = {"table": "PrettyCompactMonoBlock", "jsonl": "JSONEachRow", "csv": "CSVWithNames", "tsv": "TSVWithNames"}


class SinkError(RuntimeError):
    pass


def q(name: str) -> str:
    """A backquoted ClickHouse identifier that no name can break out of.

    ClickHouse reads escape sequences inside backquotes, so a backslash must be escaped as well as the
    backtick: with the backtick only doubled, a name ending in a backslash, or holding a backslash before a
    backtick, ended the quoting early and the rest of the name was SQL. A NUL is
    refused. Names from the config are also checked against a strict pattern when it is read
    (``config._ident``); this is the second line."""
    if "\x00" in name:
        raise SinkError(f"identifier {name!r} contains a NUL character")
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def sql_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def state_ddl(t: OdsTable) -> str:
    cols = ", ".join(f"{q(c)} {ct.ch}" for c, ct in t.columns.items())
    return (
        f"CREATE TABLE IF NOT EXISTS ods.{q(t.state_table)} ({cols}, {LINEAGE}) "
        f"ENGINE = ReplacingMergeTree(_version, _is_deleted) ORDER BY ({', '.join(q(k) for k in t.key)}) "
        f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}"
    )


def view_ddl(t: OdsTable) -> str:
    cols = ", ".join(q(c) for c in t.columns)
    return (f"CREATE OR REPLACE VIEW ods.{q(t.table)} AS SELECT {cols} FROM ods.{q(t.state_table)} FINAL "
            "WHERE _is_deleted = 0")


class WarehouseSink(Protocol):
    def open(self) -> None: ...

    def execute(self, sql: str) -> None: ...

    def ensure_schema(self, cfg: PipelineConfig) -> None: ...

    def insert(self, table: str, columns: list[str], rows: pa.Table, token: str) -> None: ...

    def query(self, sql: str, fmt: str = "table") -> bytes: ...

    def query_arrow(self, sql: str) -> pa.Table: ...

    def close(self) -> None: ...


class ChdbSink:
    """chDB (embedded ClickHouse) at ``path``; thread-safe (one lock around the session)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session: Any = None
        self.lock = threading.RLock()

    def open(self) -> None:
        from chdb import session as chs

        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self.session = chs.Session(str(self.path))
        except RuntimeError as e:
            raise SinkError(
                f"cannot open the warehouse {self.path}: {e} (chDB allows one process per database directory; "
                "is a pipeline job or another query running on it?)"
            ) from e

    def _run(self, sql: str, fmt: str = "CSV") -> Any:
        if self.session is None:
            raise SinkError("the warehouse is not open")
        with self.lock:
            try:
                return self.session.query(sql, fmt)
            except Exception as e:  # chDB raises RuntimeError with ClickHouse's message
                raise SinkError(str(e).strip()) from e

    def execute(self, sql: str) -> None:
        self._run(sql)

    def ensure_schema(self, cfg: PipelineConfig) -> None:
        self.execute("CREATE DATABASE IF NOT EXISTS ods")
        self.execute(QUARANTINE_DDL)
        for t in cfg.ods:
            self.execute(state_ddl(t))
            for c, ct in t.columns.items():
                self.execute(f"ALTER TABLE ods.{q(t.state_table)} ADD COLUMN IF NOT EXISTS {q(c)} {ct.ch}")
            self.execute(view_ddl(t))

    def insert(self, table: str, columns: list[str], rows: pa.Table, token: str) -> None:
        """``INSERT INTO table (columns) SELECT columns FROM Python(rows)`` with the dedup token; NULLs
        become the column default for non-Nullable columns (delete rows carry only their key)."""
        if rows.num_rows == 0:
            return
        cols = ", ".join(q(c) for c in columns)
        sql = (
            f"INSERT INTO {table} ({cols}) SETTINGS insert_deduplicate = 1, "
            f"insert_deduplication_token = {sql_string(token)}, input_format_null_as_default = 1, "
            "deduplicate_blocks_in_dependent_materialized_views = 1 "
            f"SELECT {cols} FROM Python(rows)"
        )
        self._run(sql)

    def query(self, sql: str, fmt: str = "table") -> bytes:
        res = self._run(sql, FORMATS.get(fmt, fmt))
        return bytes(res.bytes()) if res is not None else b""

    def query_arrow(self, sql: str) -> pa.Table:
        """The result as an Arrow table. ``Python(name)`` in ``sql`` reads a local variable of a calling
        frame (chDB looks it up on the stack)."""
        data = self.query(sql, "ArrowStream")
        if not data:
            return pa.table({})
        return pa.ipc.open_stream(data).read_all()

    def close(self) -> None:
        with self.lock:
            if self.session is not None:
                try:
                    self.session.close()
                finally:
                    self.session = None
