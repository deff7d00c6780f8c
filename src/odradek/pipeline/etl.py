"""ETL for CDC topics, as pure DataFrame → DataFrame transforms (no actions, no I/O).

Input: rows of the ``odradek`` source (``key``, ``value``, ``topic``, ``partition``, ``offset``,
``timestamp``) whose value is a Debezium change event::

    {"op": "c"|"u"|"d"|"r", "before": {...}|null, "after": {...}|null,
     "source": {"db": ..., "table": ..., "lsn": 42}, "ts_ms": 1700000000000}

(also accepted wrapped as ``{"schema": ..., "payload": {...}}``) and whose key is the primary key as JSON.

- ``extract_columns``: decode the value and key JSON (``_json``, ``_env``, ``_keymap``).
- ``clean_columns``: per ODS table, the row image (``after``; ``before`` for deletes), the key (from the image,
  else from the message key), the version, and every declared column conformed to its type. The first
  problem found becomes ``_reason``: not a JSON object, missing/unknown op, missing after image, missing
  key field, missing or bad version, missing required field, wrong type. Tombstones (null value, which
  Debezium sends after a delete for log compaction) are neither loaded nor quarantined. A TRUNCATE (``t``:
  no row, no key) only needs a good version; ``job.truncate`` applies it (``pipeline/debezium.py``).
- ``BatchTransform``: both for every table in one pass; the job (``odradek.pipeline.job.split``) divides
  each table's rows into ODS rows and quarantine rows.

Conformance from JSON text: integers must be integral and in range; floats, decimals and booleans
(``true``/``false``/``1``/``0``) parse; ``Date`` takes ``YYYY-MM-DD`` or days since the epoch;
``DateTime``/``DateTime64`` take ISO-8601 or epoch milliseconds; ``String`` takes any scalar as text.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    StringType,
    TimestampType,
)

from odradek.pipeline.column_type import ColumnType
from odradek.pipeline.config import OdsTable
from odradek.pipeline.spark_types import INT_RANGES, spark_type

ENVELOPE = ("op string, before map<string,string>, after map<string,string>, source map<string,string>, "
            "ts_ms string")
OPS = ("c", "u", "d", "r", "t")  # t: a TRUNCATE (no row image; job.load deletes the older rows)

def conform(raw: Column, ct: ColumnType) -> Column:
    """JSON scalar text → the column's Spark type; null when it does not conform."""
    b = ct.base
    t = spark_type(ct)
    if b in INT_RANGES:
        lo, hi, _ = INT_RANGES[b]
        v = _try_cast(raw, "bigint")
        return F.when((v >= F.lit(lo)) & (v <= F.lit(hi)), v.cast(t))
    if isinstance(t, BooleanType):
        low = F.lower(F.trim(raw))
        return F.when(low.isin("true", "1"), F.lit(True)).when(low.isin("false", "0"), F.lit(False))
    if isinstance(t, StringType):
        if b == "UUID":
            return F.when(raw.rlike(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"), raw)
        m = re.fullmatch(r"FixedString\((\d+)\)", b)
        if m:
            return F.when(F.octet_length(raw) <= int(m.group(1)), raw)
        return raw
    if isinstance(t, DateType):
        digits = raw.rlike(r"^-?\d+$")
        return F.when(digits, F.date_add(F.lit("1970-01-01").cast("date"), _try_cast(raw, "int"))).otherwise(
            _try_cast(raw, "date"))
    if isinstance(t, TimestampType):
        digits = raw.rlike(r"^-?\d+$")
        return F.when(digits, F.timestamp_millis(_try_cast(raw, "bigint"))).otherwise(_try_cast(raw, "timestamp"))
    if isinstance(t, DecimalType):
        return _try_cast(raw, f"decimal({t.precision},{t.scale})")
    return _try_cast(raw, t.simpleString())


def _try_cast(c: Column, type_sql: str) -> Column:
    return c.try_cast(type_sql)


def extract_columns() -> list[Column]:
    """``_raw`` (value text), ``_json`` (top level as a map, null if the value is not a JSON object),
    ``_env`` (the envelope struct) and ``_keymap`` (the key as a map)."""
    raw = F.col("value").cast("string")
    top = F.from_json(raw, "map<string,string>")
    body = F.when(top["op"].isNull() & top["payload"].isNotNull(), top["payload"]).otherwise(raw)
    key_top = F.from_json(F.col("key").cast("string"), "map<string,string>")
    key_body = F.when(key_top["payload"].isNotNull(), F.from_json(key_top["payload"], "map<string,string>")) \
        .otherwise(key_top)
    return [raw.alias("_raw"), top.alias("_json"), F.from_json(body, ENVELOPE).alias("_env"),
            key_body.alias("_keymap")]


def _version(table: OdsTable) -> Column:
    env = F.col("_env")
    if table.version == "source.lsn":
        raw = env["source"]["lsn"]
    elif table.version == "source.ts_ms":
        raw = env["source"]["ts_ms"]
    else:
        raw = env["ts_ms"]
    return _try_cast(raw, "bigint")


def clean_columns(table: OdsTable) -> list[Column]:
    """The output columns of ``clean`` (see there), over ``extract``'s columns."""
    env = F.col("_env")
    op = env["op"]
    img = F.when(op == "d", env["before"]).otherwise(env["after"])
    checks: list[Column] = [
        F.when(F.col("_json").isNull(), F.lit("not a JSON object")),
        F.when(op.isNull(), F.lit("missing op")),
        F.when(~op.isin(*OPS), F.concat(F.lit("unknown op '"), op, F.lit("'"))),
        F.when((op != "d") & img.isNull(), F.concat(F.lit("missing after image for op '"), op, F.lit("'"))),
    ]
    typed: dict[str, Column] = {}
    for name, ct in table.columns.items():
        raw = F.coalesce(img[name], F.col("_keymap")[name]) if name in table.key else img[name]
        value = conform(raw, ct)
        typed[name] = value
        if name in table.key:
            checks.append(F.when(raw.isNull(), F.lit(f"missing key field '{name}'")))
            checks.append(F.when(value.isNull(), F.concat(
                F.lit(f"wrong type for key field '{name}': expected {ct.ch}, got "), F.substring(raw, 1, 200))))
    version = _version(table)
    checks.append(F.when(version.isNull(), F.lit(f"missing or non-integer version '{table.version}'")))
    checks.append(F.when(version < 0, F.lit(f"negative version '{table.version}'")))
    for name, ct in table.columns.items():
        if name in table.key:
            continue
        raw = img[name]
        checks.append(F.when((op != "d") & raw.isNotNull() & typed[name].isNull(), F.concat(
            F.lit(f"wrong type for '{name}': expected {ct.ch}, got "), F.substring(raw, 1, 200))))
        if not ct.nullable:
            checks.append(F.when((op != "d") & raw.isNull(), F.lit(f"missing required field '{name}'")))
    # a TRUNCATE has no row and no key: only its version must be good
    reason = (F.when(F.col("value").isNull(), F.lit(None).cast("string"))
              .when((op == "t") & version.isNotNull() & (version >= 0), F.lit(None).cast("string"))
              .otherwise(F.coalesce(*checks)))
    return [
        *[F.col(c) for c in ("key", "value", "topic", "partition", "offset", "timestamp")],
        reason.alias("_reason"),
        *[typed[n].alias(n) for n in table.columns],
        version.alias("_version"),
        # nullable on purpose: a non-nullable field inside BatchTransform's nullable struct breaks toArrow()
        F.when(op == "d", F.lit(1)).when(op.isNotNull(), F.lit(0)).cast("short").alias("_is_deleted"),
        op.alias("_op"),
        _try_cast(env["ts_ms"], "bigint").alias("_ts_ms"),
    ]


SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")


class BatchTransform:
    """All tables in one pass: the source columns plus, per table ``i``, a struct column ``_t<i>`` with
    ``clean``'s output for that table's rows (null for other topics). One Spark job per micro-batch
    whatever the number of tables; the columns are built once."""

    def __init__(self, tables: list[OdsTable]) -> None:
        self.tables = tables
        self.extract = extract_columns()
        self.structs: list[Column] = []
        for i, t in enumerate(tables):
            fields = [c for c in clean_columns(t)][len(SOURCE_COLUMNS):]
            self.structs.append(F.when(F.col("topic").isin(*t.topics), F.struct(*fields)).alias(f"_t{i}"))

    def __call__(self, df: DataFrame) -> DataFrame:
        return df.select("*", *self.extract).select(*SOURCE_COLUMNS, *self.structs)

