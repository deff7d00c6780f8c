"""Produce (API 0) request decoding and response encoding by hand, versions 3-12.

Produce is the broker's hottest request: decoded through kio, every request's record sets
were copied twice (kio's bytes, then a writable copy for offset assignment) and each
version's schema cost ~18 ms to build on first use. Here a partition's records are a
*view* into the request frame (writable when the frame is, so offsets are assigned in
place), and the response is packed with ``struct``.

Request body (``v9+`` flexible: COMPACT_* lengths are unsigned varints holding length + 1,
0 meaning null, and each struct ends with a tagged-field buffer)::

    transactional_id  NULLABLE_STRING          (int16 length, -1 null; v9+ COMPACT)
    acks              INT16
    timeout_ms        INT32
    topic_data        ARRAY                     (int32 count; v9+ COMPACT)
      name            STRING                    (v9+ COMPACT)
      partition_data  ARRAY
        index         INT32
        records       NULLABLE_BYTES            (int32 length, -1 null; v9+ COMPACT)
        [tagged fields]                                             (v9+)
      [tagged fields]                                               (v9+)
    [tagged fields]                                                 (v9+)

Response body::

    responses                     ARRAY
      name                        STRING
      partition_responses         ARRAY
        index                     INT32
        error_code                INT16
        base_offset               INT64
        log_append_time_ms        INT64         (-1 unless LogAppendTime)
        log_start_offset          INT64         (v5+)
        record_errors             ARRAY         (v8+; KIP-467: the records that failed validation)
          batch_index                 INT32
          batch_index_error_message   NULLABLE_STRING
          [tagged fields]                          (v9+)
        error_message             NULLABLE_STRING (v8+)
        [tagged fields]                          (v9+; v10's current_leader is not sent)
      [tagged fields]                            (v9+)
    throttle_time_ms              INT32
    [tagged fields]                              (v9+; v10's node_endpoints is not sent)

Request header v2 / response header v1 (flexible) from v9 on. Varints are Kafka's unsigned
varints (KIP-482, at most 5 bytes), read and written by :mod:`odradek.protocol.varint`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.codec import DecodeError
from odradek.protocol.varint import VarintError, encode_uvarint, read_uvarint

MIN_VERSION = 3
MAX_VERSION = 12
FIRST_FLEXIBLE = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset


@dataclass(slots=True)
class PartitionData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicData:
    name: str
    partition_data: list[PartitionData]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicData]


def flexible(version: int) -> bool:
    return version >= FIRST_FLEXIBLE


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"produce request truncated at byte {p} (needs {n} more)")
        self.pos = p + n
        return p

    def int16(self) -> int:
        return int(_I16.unpack_from(self.buf, self.need(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self.buf, self.need(4))[0])

    def uvarint(self) -> int:
        p = self.pos
        if p < self.end:
            b = self.buf[p]
            if b < 0x80:  # one byte (inline: most compact lengths and tag counts)
                self.pos = p + 1
                return b
        value, self.pos = read_uvarint(self.buf, p, self.end)
        return value

    def string(self, flex: bool, nullable: bool) -> str | None:
        n = self.uvarint() - 1 if flex else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError("null or negative-length string")
        p = self.need(n)
        try:
            return str(self.buf[p : p + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None

    def count(self, flex: bool) -> int:
        n = self.uvarint() - 1 if flex else self.int32()
        if n < 0:
            raise DecodeError("null array")
        if n > self.end - self.pos:  # every element takes at least one byte
            raise DecodeError(f"array of {n} elements cannot fit in the request")
        return n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.need(self.uvarint())


def decode_produce_request(version: int, frame: bytes | bytearray | memoryview, offset: int) -> ProduceRequest:
    """Decode a Produce body starting at ``offset``; raises :class:`DecodeError` on anything
    malformed. Record sets are views into ``frame`` (writable if the frame is)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise DecodeError(f"produce v{version} is not supported")
    try:
        return _decode(version >= FIRST_FLEXIBLE, frame if isinstance(frame, memoryview) else memoryview(frame), offset)
    except VarintError as e:
        raise DecodeError(f"produce request: {e}") from None


def _decode(flex: bool, frame: memoryview, offset: int) -> ProduceRequest:
    r = _Reader(frame, offset)
    txn = r.string(flex, True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(r.buf, r.need(6))
    topics: list[TopicData] = []
    for _ in range(r.count(flex)):
        name = r.string(flex, False)
        assert name is not None
        parts: list[PartitionData] = []
        for _ in range(r.count(flex)):
            index = r.int32()
            n = r.uvarint() - 1 if flex else r.int32()
            if n < -1:
                raise DecodeError(f"negative records length {n}")
            if n == -1:
                records = None
            else:
                p = r.need(n)
                records = r.buf[p : p + n]
            if flex:
                r.skip_tags()
            parts.append(PartitionData(index, records))
        if flex:
            r.skip_tags()
        topics.append(TopicData(name, parts))
    if flex:
        r.skip_tags()
    return ProduceRequest(txn, int(acks), int(timeout_ms), topics)


# (index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message
#  [, record_errors: ((batch_index, message), ...)])
RecordErrors = tuple[tuple[int, "str | None"], ...]
PartitionResult = (
    tuple[int, int, int, int, int, "str | None"] | tuple[int, int, int, int, int, "str | None", RecordErrors]
)


def _string(s: str | None, flex: bool) -> bytes:
    if s is None:
        return b"\x00" if flex else b"\xff\xff"
    raw = s.encode()
    return (encode_uvarint(len(raw) + 1) if flex else _I16.pack(len(raw))) + raw


def encode_produce_response(
    version: int, topics: list[tuple[str, list[PartitionResult]]], throttle_time_ms: int = 0
) -> bytes:
    flex = version >= FIRST_FLEXIBLE
    out = bytearray()
    out += encode_uvarint(len(topics) + 1) if flex else _I32.pack(len(topics))
    for name, parts in topics:
        out += _string(name, flex)
        out += encode_uvarint(len(parts) + 1) if flex else _I32.pack(len(parts))
        for pr in parts:
            index, code, base, append_time, log_start, message = pr[:6]
            if version >= 5:
                out += _PART_V5.pack(index, code, base, append_time, log_start)
            else:
                out += _PART_V3.pack(index, code, base, append_time)
            if version >= 8:
                record_errors: RecordErrors = pr[6] if len(pr) > 6 else ()
                out += encode_uvarint(len(record_errors) + 1) if flex else _I32.pack(len(record_errors))
                for batch_index, batch_message in record_errors:
                    out += _I32.pack(batch_index)
                    out += _string(batch_message, flex)
                    if flex:
                        out += b"\x00"
                out += _string(message, flex)
            if flex:
                out += b"\x00"
        if flex:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if flex:
        out += b"\x00"
    return bytes(out)
