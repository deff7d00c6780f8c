"""A length check of a request body before kio's native decoder reads it.

kio's entity reader (Rust) reserves memory for an array from the count on the wire before reading any
element: a 5-byte Metadata v12 body whose topics count is a large varint makes it ask for ~138 GB, and a
failed allocation in Rust aborts the whole process (found by ``tests/fuzz``'s ``kio_request`` target).
Every element of every Kafka array takes at least one byte on the wire, so an honest count is never larger
than the bytes left; :func:`check` walks the body along the schema kio would use and refuses the first
count (or string, bytes or tagged-field size) that runs past the end, before kio allocates anything.

The walk follows Kafka's message encoding (the same layout kio decodes):

    fixed-size fields     int8/uint8/bool 1, int16/uint16/error_code 2, int32/uint32/timedelta_i32 4,
                          int64/uint64/float64/timedelta_i64/datetime_i64 8, uuid 16 bytes
    string                int16 length (-1 = null), or uvarint length+1 (0 = null) in flexible versions
    bytes, records        int32 length (-1 = null), or uvarint length+1 (0 = null) in flexible versions
    array                 int32 count (-1 = null), or uvarint count+1 (0 = null) in flexible versions
    nullable struct       int8 marker (-1 = null, 1 = present), then the struct (KIP-893)
    flexible struct       its fields, then uvarint count of tagged fields, each uvarint tag, uvarint size,
                          value (a known tag's value is walked within its size)
    uvarint               Kafka's unsigned varint (KIP-482), at most 5 bytes, read by
                          :func:`odradek.protocol.varint.read_uvarint` within the walk's end bound

The plan of each class is built once and cached; walking costs a few hundred nanoseconds per field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from odradek.protocol.varint import VarintError, read_uvarint


class LengthError(Exception):
    """A count or size in the body runs past its end."""


_FIXED = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# a step reads one field at ``pos`` (bounded by ``end``) and returns the position after it
Step = Callable[[Any, int, int], int]


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise LengthError(f"{n} bytes needed at {pos}, {end - pos} left")
    return pos + n


def _fixed(size: int) -> Step:
    return lambda buf, pos, end: _need(pos, size, end)


def _sized(flexible: bool, legacy: struct.Struct) -> Step:
    """string, bytes, records: a length then that many bytes."""
    if flexible:
        def step(buf: Any, pos: int, end: int) -> int:
            n, pos = read_uvarint(buf, pos, end)
            return _need(pos, max(n - 1, 0), end)
    else:
        width = legacy.size

        def step(buf: Any, pos: int, end: int) -> int:
            pos0 = _need(pos, width, end)
            (n,) = legacy.unpack_from(buf, pos)
            return _need(pos0, max(n, 0), end)
    return step


def _count(buf: Any, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        n -= 1
    else:
        pos0 = _need(pos, 4, end)
        (n,) = _I32.unpack_from(buf, pos)
        pos = pos0
    if n > end - pos:  # each element takes at least one byte
        raise LengthError(f"array of {n} elements with {end - pos} bytes left")
    return n, pos


def _array(element: Step, flexible: bool, element_size: int | None) -> Step:
    def step(buf: Any, pos: int, end: int) -> int:
        n, pos = _count(buf, pos, end, flexible)
        if n <= 0:
            return pos
        if element_size is not None:
            return _need(pos, n * element_size, end)
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos
    return step


def _nullable_struct(inner: Step) -> Step:
    def step(buf: Any, pos: int, end: int) -> int:
        pos = _need(pos, 1, end)
        return pos if buf[pos - 1] == 0xFF else inner(buf, pos, end)
    return step


def _primitive(kafka_type: str, flexible: bool) -> tuple[Step, int | None]:
    size = _FIXED.get(kafka_type)
    if size is not None:
        return _fixed(size), size
    if kafka_type == "string":
        return _sized(flexible, _I16), None
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, _I32), None
    raise LengthError(f"no length rule for kafka type {kafka_type!r}")


@cache
def plan(cls: type) -> Step:
    """The walk of one kio entity class (built once)."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    steps: list[Step | int] = []  # an int: that many bytes of consecutive fixed-size fields
    tagged: dict[int, Step] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if is_dataclass(kind.type_):
            element: Step = plan(kind.type_)
            size = None
            if not kind.is_array and is_optional(f) and get_field_tag(f) is None:
                element = _nullable_struct(element)
        else:
            element, size = _primitive(f.metadata["kafka_type"], flexible)
        is_array = isinstance(kind, EntityTupleField | PrimitiveTupleField)
        step = _array(element, flexible, size) if is_array else element
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = step
        elif size is not None and not is_array:
            if steps and isinstance(steps[-1], int):
                steps[-1] += size
            else:
                steps.append(size)
        else:
            steps.append(step)

    def walk(buf: Any, pos: int, end: int) -> int:
        for s in steps:
            if isinstance(s, int):
                pos += s
                if pos > end:
                    raise LengthError(f"{s} bytes of fixed-size fields run past the end")
            else:
                pos = s(buf, pos, end)
        if flexible:
            if pos < end and buf[pos] == 0:  # no tagged fields, the usual case
                return pos + 1
            n, pos = read_uvarint(buf, pos, end)
            for _ in range(n):
                tag, pos = read_uvarint(buf, pos, end)
                size, pos = read_uvarint(buf, pos, end)
                stop = _need(pos, size, end)
                known = tagged.get(tag)
                if known is not None:
                    known(buf, pos, stop)
                pos = stop
        return pos

    return walk


def check(cls: type, buf: Any, offset: int) -> None:
    """Raise :class:`LengthError` if a count or size in the body of ``cls`` at ``offset`` runs past the
    end of ``buf`` (or a varint there is truncated or longer than 5 bytes)."""
    try:
        plan(cls)(buf, offset, len(buf))
    except VarintError as e:
        raise LengthError(str(e)) from None
