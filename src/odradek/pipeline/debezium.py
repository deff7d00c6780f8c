"""Debezium change events as DataFrames, and the pipeline's Debezium mode.

Debezium's connectors (here PostgreSQL's, on Kafka Connect with the JSON converter) write one topic per
captured table, ``<topic.prefix>.<schema>.<table>``. A record's key is the row's primary key as JSON; its
value is the change event, either bare (``value.converter.schemas.enable=false``) or wrapped as
``{"schema": {...}, "payload": {...}}`` (schemas enabled)::

    {"before": {...} | null, "after": {...} | null,
     "source": {"lsn": 23456, "txId": 761, "snapshot": "false", "sequence": "[\\"...\\",\\"...\\"]", ...},
     "op": "c" | "u" | "d" | "r" | "t", "ts_ms": 1700000000000}

``r`` is a row read by the connector's snapshot, ``c`` / ``u`` / ``d`` an insert, update or delete, ``t`` a
TRUNCATE of the whole table (no row images; Debezium skips them unless ``skipped.operations`` lets them
through). After a delete Debezium writes a tombstone (the key with a null value) so that log compaction may
drop the key; a primary-key change is a delete of the old key (and its tombstone) followed by a create of
the new key, both with the LSN of the one UPDATE.

``events`` is a pure DataFrame → DataFrame transform of the ``odradek`` source's rows into typed event
columns; ``latest_per_key`` keeps each key's newest event by source LSN (not by arrival). The job itself
(``etl.BatchTransform`` and ``job.load``) lands every version in ``ods.<table>_state``, a
``ReplacingMergeTree(_version, _is_deleted)`` with the LSN as version, so the order of arrival never
matters there either; ``truncations`` gives a batch's TRUNCATE events, which ``job.load`` applies as
deletes of every key older than the TRUNCATE's LSN.

``debezium_mode`` is ``odradek pipeline run --source debezium --topic-prefix P --tables schema.t,...``: the
config's ``[[ods]]`` tables named like the captured tables read the topics Debezium writes for them,
versioned by ``source.lsn``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from odradek.pipeline.config import ConfigError, OdsTable, PipelineConfig

OPS = ("c", "u", "d", "r", "t")
ENVELOPE = ("op string, before map<string,string>, after map<string,string>, source map<string,string>, "
            "ts_ms string")
EVENT_COLUMNS = ("topic", "partition", "offset", "key", "op", "lsn", "tx_id", "ts_ms", "source_ts_ms",
                 "snapshot", "before", "after", "tombstone")


def envelope(value: Column) -> Column:
    """The change event of a record's value text, bare or inside ``{"schema", "payload"}``, as a struct
    (null for a tombstone or a value that is not a JSON object)."""
    top = F.from_json(value, "map<string,string>")
    body = F.when(top["op"].isNull() & top["payload"].isNotNull(), top["payload"]).otherwise(value)
    return F.from_json(body, ENVELOPE)


def key_map(key: Column) -> Column:
    """The record key (the primary key as JSON, bare or inside ``{"schema", "payload"}``) as a map."""
    top = F.from_json(key, "map<string,string>")
    return F.when(top["payload"].isNotNull(), F.from_json(top["payload"], "map<string,string>")).otherwise(top)


def events(df: DataFrame) -> DataFrame:
    """Rows of the ``odradek`` source (``key``, ``value``, ``topic``, ``partition``, ``offset``, ...) → one
    row per record with the columns ``EVENT_COLUMNS``: ``op``, ``lsn`` / ``tx_id`` / ``ts_ms`` /
    ``source_ts_ms`` as longs, ``snapshot`` (true for a snapshot read, including Debezium's "first" and
    "last" markers), ``before`` / ``after`` as maps of column texts, ``key`` as a map, and ``tombstone``
    (a null value: every other column of the event is null then)."""
    env = F.col("_env")
    src = env["source"]
    snap = F.lower(src["snapshot"])
    return (df.select("*", envelope(F.col("value").cast("string")).alias("_env"))
            .select(F.col("topic"), F.col("partition"), F.col("offset"),
                    key_map(F.col("key").cast("string")).alias("key"),
                    env["op"].alias("op"),
                    src["lsn"].try_cast("bigint").alias("lsn"),
                    src["txId"].try_cast("bigint").alias("tx_id"),
                    env["ts_ms"].try_cast("bigint").alias("ts_ms"),
                    src["ts_ms"].try_cast("bigint").alias("source_ts_ms"),
                    (snap.isNotNull() & ~snap.isin("false", "")).alias("snapshot"),
                    env["before"].alias("before"), env["after"].alias("after"),
                    F.col("value").isNull().alias("tombstone")))


def latest_per_key(ev: DataFrame, key: Sequence[str]) -> DataFrame:
    """Each key's newest event of ``events``' output, by source LSN then offset (never by arrival): the
    columns of ``events`` plus the key columns (from the row image: ``before`` for a delete, ``after``
    otherwise, else the record key) and ``is_deleted``. Tombstones and TRUNCATE events have no row and
    are left out (``truncations`` gives the latter)."""
    rows = ev.filter(~F.col("tombstone") & F.col("op").isin("c", "u", "d", "r"))
    img = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))
    rows = rows.select("*", *[F.coalesce(img[k], F.col("key")[k]).alias(k) for k in key])
    w = Window.partitionBy(*key).orderBy(F.col("lsn").desc_nulls_last(), F.col("offset").desc())
    return (rows.withColumn("_rank", F.row_number().over(w)).filter(F.col("_rank") == 1).drop("_rank")
            .withColumn("is_deleted", F.col("op") == "d"))


def truncations(ev: DataFrame) -> DataFrame:
    """The TRUNCATE events of ``events``' output: ``topic`` and ``lsn``."""
    return ev.filter(F.col("op") == "t").select("topic", "lsn")


def topic_of(prefix: str, table: str) -> str:
    """Debezium's topic for ``schema.table`` (``topic.prefix`` then the schema and table names)."""
    return f"{prefix}.{table}"


def debezium_mode(cfg: PipelineConfig, prefix: str, tables: Sequence[str]) -> PipelineConfig:
    """``cfg`` with each ``schema.table`` of ``tables`` read from Debezium's topic for it into the
    ``[[ods]]`` table of the same name (its key and columns come from the config), versioned by the
    source LSN. The other ``[[ods]]`` tables are left out."""
    if not prefix:
        raise ConfigError("--topic-prefix is required with --source debezium")
    if not tables:
        raise ConfigError("--tables (schema.table, ...) is required with --source debezium")
    by_name = {t.table: t for t in cfg.ods}
    chosen: list[OdsTable] = []
    for qualified in tables:
        parts = qualified.split(".")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"--tables: {qualified!r} is not schema.table")
        ods = by_name.get(parts[1])
        if ods is None:
            raise ConfigError(f"--tables: {qualified} has no [[ods]] table named {parts[1]!r} in the config "
                              "(its key and columns)")
        chosen.append(dataclasses.replace(ods, topics=(topic_of(prefix, qualified),), version="source.lsn"))
    return dataclasses.replace(cfg, ods=chosen)
