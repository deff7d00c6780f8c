"""A ClickHouse column type as an ODS table declares it (pipeline.config), read without pyspark; its Spark
type is pipeline.spark_types.spark_type."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ColumnType:
    """A ClickHouse column type, split into its base type and whether it is Nullable."""

    ch: str  # as written, e.g. "Nullable(String)"
    base: str  # e.g. "String", "Decimal(10, 2)", "DateTime64(3)"
    nullable: bool

    @classmethod
    def parse(cls, raw: str) -> ColumnType:
        t = raw.strip()
        nullable = False
        m = re.fullmatch(r"LowCardinality\((.*)\)", t)
        if m:
            t = m.group(1).strip()
        m = re.fullmatch(r"Nullable\((.*)\)", t)
        if m:
            nullable = True
            t = m.group(1).strip()
        return cls(raw.strip(), t, nullable)
