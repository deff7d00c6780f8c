"""odradek.protocol.cursor: the storage codecs' one byte cursor reads Kafka's primitives and refuses, with
the subclass's own error, every read past the end, a null where none may be, an oversized count or varint."""

from __future__ import annotations

import struct
import uuid

import pytest

from odradek.protocol.cursor import Cursor


class Bad(Exception):
    pass


class Reader(Cursor):
    __slots__ = ()
    error = Bad


def test_primitives_in_order() -> None:
    tid = uuid.uuid4()
    data = (struct.pack(">bhiq", -1, -2, -3, -4) + b"\x96\x01" + tid.bytes + struct.pack(">h", 2) + b"ab"
            + b"\x03xy" + b"\x00" + struct.pack(">i", -1) + b"\x02z" + b"\x02" + b"\x01\x01q" + b"\x02\x00")
    r = Reader(memoryview(data))
    assert (r.i8(), r.i16(), r.i32(), r.i64(), r.uvarint(), r.uuid()) == (-1, -2, -3, -4, 150, tid)
    assert (r.string(), r.compact_string(), r.compact_nullable_string(), r.bytes_(), r.compact_bytes()) == (
        "ab", "xy", None, None, b"z")
    assert r.tagged() == {1: b"q", 2: b""}
    r.expect_end("record")


@pytest.mark.parametrize(("data", "read", "message"), [
    (b"\x00", Reader.i16, "truncated record"),
    (struct.pack(">h", 5) + b"ab", Reader.string, "truncated record"),
    (struct.pack(">h", -1), Reader.string, "null where a string is required"),
    (b"\x00", Reader.compact_string, "null where a string is required"),
    (b"\x02\xff", Reader.compact_string, "invalid UTF-8"),
    (b"\xff\xff\xff\xff\x7f", Reader.uvarint, "exceeds 32 bits"),
    (b"\xff\xff\xff\xff\xff\x01", Reader.uvarint, "longer than 5 bytes"),
    (b"\x00", lambda r: r.compact_count(1), "null array"),
    (b"\x10\x00", lambda r: r.compact_count(4), "runs past the record's end"),
    (b"\x02\x01\x00\x01\x00", Reader.tagged, "appears twice"),
])
def test_what_does_not_decode_raises_the_readers_error(data: bytes, read: object, message: str) -> None:
    with pytest.raises(Bad, match=message):
        read(Reader(data))  # type: ignore[operator]


def test_a_limit_bounds_the_reads_and_trailing_bytes_are_refused() -> None:
    r = Reader(b"\x00\x01\x00\x02", 0, 2)
    assert r.i16() == 1 and r.remaining() == 0
    with pytest.raises(Bad):
        r.i8()
    r2 = Reader(b"\x00\x01\x00")
    r2.i16()
    with pytest.raises(Bad, match="1 trailing byte"):
        r2.expect_end("key")
