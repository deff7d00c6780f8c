"""Variable-length integers of the Kafka protocol: the one reader and writer of each kind.

Two encodings are used on the wire (Kafka's ``ByteUtils``; KIP-482 for the flexible versions,
KIP-98 for record batch v2):

- **unsigned varint** (``ByteUtils.readUnsignedVarint``): the flexible versions' compact
  lengths and counts (value + 1, 0 meaning null) and tagged-field counts, tags and sizes.
  Seven bits per byte, least significant group first, the top bit set on every byte but the
  last; at most 5 bytes for a 32-bit value::

      300 = 0b10_0101100  ->  0xAC 0x02

- **signed varint / varlong** (``ByteUtils.readVarint`` / ``readVarlong``): the fields of a
  record inside a v2 batch (length, timestampDelta, offsetDelta, key/value/header lengths,
  header count). The value is zig-zag encoded first, ``(n << 1) ^ (n >> 63)``, so small
  negative numbers stay short (-1 -> 1, 1 -> 2), then written as an unsigned varint; at most
  5 bytes for a varint (32-bit), 10 for a varlong (64-bit)::

      -1 -> 0x01,   1 -> 0x02,   -65 -> 0x81 0x01

Every reader is bounded by an explicit ``end`` (a frame or record may stop before its buffer
does) and raises :class:`VarintError` (a :class:`ValueError`) when the bytes run out before
the last byte or when the integer is longer than ``max_bytes``; callers turn that into their
own error (``FrameError``, ``LengthError``, ``DecodeError``). The single-byte case, by far the
most common, and the two-byte one are tested first and return without entering the loop.
"""

from __future__ import annotations

from typing import Any

VARINT_MAX_BYTES = 5  # a 32-bit value
VARLONG_MAX_BYTES = 10  # a 64-bit value
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


class VarintError(ValueError):
    """A varint is truncated (runs past ``end``) or longer than allowed. ``upto``: for a tagged field
    that runs past ``end``, the position it reaches (-1 when unknown)."""

    def __init__(self, message: str, upto: int = -1) -> None:
        super().__init__(message)
        self.upto = upto


def zigzag(n: int) -> int:
    """Zig-zag encoding of a signed 64-bit value: -1 -> 1, 1 -> 2, -2 -> 3 ..."""
    return (n << 1) ^ (n >> 63)


def unzigzag(raw: int) -> int:
    """The signed value of a zig-zag encoded one."""
    return (raw >> 1) ^ -(raw & 1)


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint (compact lengths and counts, tagged fields)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Signed zig-zag varint / varlong (the fields of a record)."""
    return encode_uvarint((n << 1) ^ (n >> 63))


def read_uvarint(buf: Any, pos: int, end: int, max_bytes: int = VARINT_MAX_BYTES) -> tuple[int, int]:
    """The unsigned varint at ``pos`` of ``buf`` (bytes, bytearray or memoryview of bytes),
    not reading at or past ``end``: ``(value, position after it)``."""
    if pos >= end:
        raise VarintError("truncated varint")
    b = buf[pos]
    if b < 0x80:  # one byte: most lengths, counts and tags
        return b, pos + 1
    if pos + 1 < end:
        c = buf[pos + 1]
        if c < 0x80:
            return (b & 0x7F) | (c << 7), pos + 2
    value = b & 0x7F
    shift = 7
    last = pos + max_bytes  # past the longest encoding allowed
    pos += 1
    while pos < end:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        if pos >= last:
            raise VarintError(f"varint longer than {max_bytes} bytes")
        shift += 7
    raise VarintError("truncated varint")


def skip_tagged_fields(buf: Any, pos: int, end: int) -> int:
    """The position after the tagged-field section (KIP-482: a count, then per field its tag, size and
    ``size`` bytes) at ``pos`` of a flexible message, not reading at or past ``end``."""
    count, pos = read_uvarint(buf, pos, end)
    for i in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        pos += size
        if pos > end:  # the rest of the section: at least a tag and a size per field left
            raise VarintError("tagged field runs past the end", pos + 2 * (count - i - 1))
    return pos


def read_varint(buf: Any, pos: int, end: int, max_bytes: int = VARINT_MAX_BYTES) -> tuple[int, int]:
    """The signed (zig-zag) varint at ``pos``, not reading at or past ``end``: ``(value,
    position after it)``. ``max_bytes`` is :data:`VARLONG_MAX_BYTES` for a varlong."""
    if pos >= end:
        raise VarintError("truncated varint")
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    if pos + 1 < end:
        c = buf[pos + 1]
        if c < 0x80:
            raw = (b & 0x7F) | (c << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    raw = b & 0x7F
    shift = 7
    last = pos + max_bytes  # past the longest encoding allowed
    pos += 1
    while pos < end:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            # Kafka's readVarint keeps 32 bits (its int drops the 5th byte's high bits), readVarlong 64: a
            # non-canonical encoding reads as the value Kafka reads (the C walks in _speedups.c do the same)
            raw &= _MASK32 if max_bytes <= VARINT_MAX_BYTES else _MASK64
            return (raw >> 1) ^ -(raw & 1), pos
        if pos >= last:
            raise VarintError(f"varint longer than {max_bytes} bytes")
        shift += 7
    raise VarintError("truncated varint")
