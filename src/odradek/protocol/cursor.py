"""A read position over one encoded structure in Kafka's primitive types (the internal topics' keys and
values, the remote log metadata records): the one byte cursor the storage codecs share, each raising its
own error (:attr:`Cursor.error`, set by a subclass) for input that does not decode.

Primitives, big-endian as Kafka's ``Type`` classes write them::

    int8 / int16 / int32 / int64     1 / 2 / 4 / 8 bytes, signed
    uvarint                          unsigned LEB128, at most 5 bytes (32 bits)
    uuid                             16 bytes
    string                           int16 length (-1: null), then UTF-8
    compact string                   uvarint length + 1 (0: null), then UTF-8
    bytes                            int32 length (-1: null), then the bytes
    compact array count              uvarint count + 1 (0: null); checked against the bytes left
    tagged fields                    uvarint count, then (uvarint tag, uvarint size, bytes) each

Every length and count is checked against the bytes left before anything is taken or allocated.
"""

from __future__ import annotations

import struct
import uuid
from typing import ClassVar, NoReturn

from odradek.protocol.varint import VarintError, read_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Cursor:
    """``data[pos:limit]`` read from the front; a subclass names the exception it raises."""

    __slots__ = ("data", "limit", "pos")
    error: ClassVar[type[Exception]] = ValueError

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, limit: int = -1) -> None:
        self.data = data if type(data) is bytes else bytes(data)
        self.pos = pos
        self.limit = len(self.data) if limit < 0 else limit

    def fail(self, message: str) -> NoReturn:
        raise self.error(message)

    def remaining(self) -> int:
        return self.limit - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.limit - self.pos:
            self.fail(f"truncated record: runs past its end ({n} bytes wanted at {self.pos} of {self.limit})")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos, self.limit)
        except VarintError as e:
            self.fail(str(e))
        if value > 0xFFFFFFFF:
            self.fail("unsigned varint exceeds 32 bits")
        return value

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def utf8(self, raw: bytes, what: str = "string") -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"invalid UTF-8 in {what}: {e.reason}")

    def string(self, what: str = "string") -> str:
        n = self.i16()
        if n < 0:
            self.fail(f"null where a {what} is required")
        return self.utf8(self.take(n), what)

    def nullable_string(self, what: str = "string") -> str | None:
        n = self.i16()
        return None if n < 0 else self.utf8(self.take(n), what)

    def compact_string(self, what: str = "string") -> str:
        n = self.uvarint()
        if n == 0:
            self.fail(f"null where a {what} is required")
        return self.utf8(self.take(n - 1), what)

    def compact_nullable_string(self, what: str = "string") -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.utf8(self.take(n - 1), what)

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def checked_count(self, n: int, min_item: int) -> int:
        """``n`` elements of at least ``min_item`` bytes each, checked against the bytes left."""
        if n < 0:
            self.fail(f"negative array length {n}")
        if n * min_item > self.limit - self.pos:
            self.fail(f"array of {n} elements runs past the record's end")
        return n

    def compact_count(self, min_item: int) -> int:
        n = self.uvarint()
        if n == 0:
            self.fail("null array")
        return self.checked_count(n - 1, min_item)

    def tagged(self, *, unique: bool = True) -> dict[int, bytes]:
        """The tagged-field section, each field's bytes by tag (a tag twice fails when ``unique``)."""
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            if unique and tag in out:
                self.fail(f"tagged field {tag} appears twice")
            out[tag] = self.take(self.uvarint())
        return out

    def expect_end(self, what: str) -> None:
        if self.pos != self.limit:
            self.fail(f"{self.limit - self.pos} trailing byte(s) after the {what}")
