"""The Spark type each supported ClickHouse column type is conformed to (pipeline.etl), also the check
pipeline.config.parse makes of every declared column (it imports this module inside parse, so that reading
a config does not import pyspark)."""

from __future__ import annotations

import re

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampType,
)

from odradek.pipeline.column_type import ColumnType

INT_RANGES: dict[str, tuple[int, int, DataType]] = {
    "Int8": (-(2**7), 2**7 - 1, ByteType()),
    "Int16": (-(2**15), 2**15 - 1, ShortType()),
    "Int32": (-(2**31), 2**31 - 1, IntegerType()),
    "Int64": (-(2**63), 2**63 - 1, LongType()),
    "UInt8": (0, 2**8 - 1, ShortType()),
    "UInt16": (0, 2**16 - 1, IntegerType()),
    "UInt32": (0, 2**32 - 1, LongType()),
    "UInt64": (0, 2**63 - 1, LongType()),  # values above 2^63-1 are not supported
}

SPARK_TYPES = ("Int8..Int64, UInt8..UInt64, Float32, Float64, Decimal(P, S), Bool, String, FixedString(N), "
               "UUID, Date, Date32, DateTime, DateTime64(P) (each optionally Nullable or LowCardinality)")


def spark_type(ct: ColumnType) -> DataType:
    """The Spark type a ClickHouse column type is conformed to (ValueError if unsupported)."""
    b = ct.base
    if b in INT_RANGES:
        return INT_RANGES[b][2]
    if b == "Float32":
        return FloatType()
    if b == "Float64":
        return DoubleType()
    if b in ("Bool", "Boolean"):
        return BooleanType()
    if b == "String" or b == "UUID" or re.fullmatch(r"FixedString\(\d+\)", b):
        return StringType()
    if b in ("Date", "Date32"):
        return DateType()
    if b == "DateTime" or re.fullmatch(r"DateTime(\('[^']*'\))?", b) or re.fullmatch(r"DateTime64\(\d(,\s*'[^']*')?\)", b):
        return TimestampType()
    m = re.fullmatch(r"Decimal\((\d+),\s*(\d+)\)", b)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        if not 1 <= p <= 38 or s > p:
            raise ValueError(f"unsupported precision/scale in {b}")
        return DecimalType(p, s)
    raise ValueError(f"unsupported type {ct.ch!r}; supported: {SPARK_TYPES}")
