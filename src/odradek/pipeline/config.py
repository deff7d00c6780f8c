"""The pipeline's TOML configuration.

    [broker]
    bootstrap_servers = "127.0.0.1:9092"
    # options = { "security.protocol" = "PLAINTEXT" }   # more kafka.* client settings
    [warehouse]
    path = "./warehouse"            # chDB database directory (ODS and DW)
    checkpoint_dir = "./checkpoints"
    [spark]                          # all optional
    master = "local[*]"
    max_offsets_per_trigger = 100000
    trigger_interval = "0 seconds"
    warm_up = true                  # before the query: start Python workers, dry-run a micro-batch's job
                                    # (newest records, then rounds of synthetic events; nothing written)
    starting_offsets = "earliest"
    fail_on_data_loss = true
    conf = { "spark.sql.shuffle.partitions" = "4" }
    source_options = { "minPartitions" = "4" }   # more options of the odradek source
    [[ods]]
    table = "customers"             # current state readable as ods.customers
    topics = ["crm.customers"]
    key = ["id"]
    version = "source.lsn"          # envelope path that orders versions of one key
    [ods.columns]
    id = "Int64"
    name = "String"
    city = "Nullable(String)"

Relative paths are relative to the config file's directory. Column types are ClickHouse types; the
supported ones are listed in ``spark_types.SPARK_TYPES``. The warehouse layer (``[[dw.*]]``) is described in
``warehouse.py``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.pipeline.column_type import ColumnType

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION_PATHS = ("source.lsn", "ts_ms", "source.ts_ms")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class OdsTable:
    table: str
    topics: tuple[str, ...]
    key: tuple[str, ...]
    version: str
    columns: dict[str, ColumnType]

    @property
    def state_table(self) -> str:
        """The ReplacingMergeTree that holds every version (merged away over time)."""
        return f"{self.table}_state"


@dataclass
class PipelineConfig:
    bootstrap_servers: str
    warehouse_path: Path
    checkpoint_dir: Path
    ods: list[OdsTable]
    kafka_options: dict[str, str] = field(default_factory=dict)
    master: str = "local[*]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    source_options: dict[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None
    trigger_interval: str = "0 seconds"
    warm_up: bool = True
    starting_offsets: str = "earliest"
    fail_on_data_loss: bool = True
    dw: dict[str, Any] = field(default_factory=dict)
    source_path: Path | None = None

    @property
    def topics(self) -> list[str]:
        return sorted({t for o in self.ods for t in o.topics})



def _need(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ConfigError(f"{where}: '{key}' is required")
    return d[key]


def _ident(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ConfigError(f"{where}: {name!r} is not a valid identifier (letters, digits, underscore)")
    return name


def parse(data: dict[str, Any], base: Path) -> PipelineConfig:
    from odradek.pipeline.spark_types import spark_type  # validates column types (imports pyspark)

    broker = data.get("broker", {})
    wh = data.get("warehouse", {})
    spark = data.get("spark", {})
    servers = _need(broker, "bootstrap_servers", "[broker]")
    path = Path(_need(wh, "path", "[warehouse]"))
    ckpt = Path(_need(wh, "checkpoint_dir", "[warehouse]"))
    tables: list[OdsTable] = []
    seen_topics: dict[str, str] = {}
    for i, raw in enumerate(data.get("ods", [])):
        where = f"[[ods]] #{i + 1}"
        name = _ident(_need(raw, "table", where), where)
        where = f"[[ods]] {name}"
        if name == "quarantine" or name.startswith("_"):
            raise ConfigError(f"{where}: the table name {name!r} is reserved")
        topics = _need(raw, "topics", where)
        if isinstance(topics, str):
            topics = [topics]
        if not topics or not all(isinstance(t, str) for t in topics):
            raise ConfigError(f"{where}: 'topics' must be a list of topic names")
        for t in topics:
            if t in seen_topics:
                raise ConfigError(f"{where}: topic {t!r} already feeds ods.{seen_topics[t]}")
            seen_topics[t] = name
        key = _need(raw, "key", where)
        if isinstance(key, str):
            key = [key]
        cols_raw = _need(raw, "columns", where)
        if not isinstance(cols_raw, dict) or not cols_raw:
            raise ConfigError(f"{where}: [ods.columns] must map column names to ClickHouse types")
        columns: dict[str, ColumnType] = {}
        for c, t in cols_raw.items():
            _ident(c, where)
            if c.startswith("_"):
                raise ConfigError(f"{where}: column names starting with '_' are reserved ({c!r})")
            ct = ColumnType.parse(str(t))
            try:
                spark_type(ct)
            except ValueError as e:
                raise ConfigError(f"{where}: column {c!r}: {e}") from None
            columns[c] = ct
        for k in key:
            if k not in columns:
                raise ConfigError(f"{where}: key column {k!r} is not in [ods.columns]")
            if columns[k].nullable:
                raise ConfigError(f"{where}: key column {k!r} cannot be Nullable")
        version = str(raw.get("version", "source.lsn"))
        if version not in VERSION_PATHS:
            raise ConfigError(f"{where}: version must be one of {', '.join(VERSION_PATHS)}, got {version!r}")
        tables.append(OdsTable(name, tuple(topics), tuple(key), version, columns))
    if not tables:
        raise ConfigError("no [[ods]] table is configured")
    opts = broker.get("options", {})
    mopt = spark.get("max_offsets_per_trigger")
    cfg = PipelineConfig(
        bootstrap_servers=str(servers),
        warehouse_path=(base / path).resolve(),
        checkpoint_dir=(base / ckpt).resolve(),
        ods=tables,
        kafka_options={str(k): str(v) for k, v in opts.items()},
        master=str(spark.get("master", "local[*]")),
        spark_conf={str(k): str(v) for k, v in spark.get("conf", {}).items()},
        source_options={str(k): str(v) for k, v in spark.get("source_options", {}).items()},
        max_offsets_per_trigger=int(mopt) if mopt is not None else None,
        trigger_interval=str(spark.get("trigger_interval", "0 seconds")),
        warm_up=bool(spark.get("warm_up", True)),
        starting_offsets=str(spark.get("starting_offsets", "earliest")),
        fail_on_data_loss=bool(spark.get("fail_on_data_loss", True)),
        dw=data.get("dw", {}),
    )
    return cfg


def load(path: str | Path) -> PipelineConfig:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {p} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: {e}") from None
    cfg = parse(data, p.resolve().parent)
    cfg.source_path = p.resolve()
    return cfg
