"""Hand-built FetchResponse (v4-v16) as a list of buffers, so record data can be sent
with ``os.sendfile`` straight from the segment files (zero copy).

Body layout (after the response header), per version::

    throttle_time_ms        int32
    error_code              int16             v7+
    session_id              int32             v7+
    responses               array             (int32 count; v12+ compact: uvarint count+1)
      topic                 string            v4-12 (int16 len; v12 compact string)
      topic_id              uuid (16 bytes)   v13+
      partitions            array
        partition_index     int32
        error_code          int16
        high_watermark      int64
        last_stable_offset  int64
        log_start_offset    int64             v5+
        aborted_transactions nullable array of (producer_id int64, first_offset int64)
                                              (+ empty tagged fields v12+)
        preferred_read_replica int32          v11+
        records             nullable bytes    (int32 len; v12+ compact: uvarint len+1)
        tagged fields       uvarint 0         v12+
      tagged fields         uvarint 0         v12+
    tagged fields           uvarint 0         v12+

The records field is followed in the buffer list by the file regions themselves
(:class:`FileRegion`: ``length`` bytes at ``position`` of an open segment file). Compact lengths,
counts and tagged-field counts are Kafka's unsigned varints (KIP-482, :mod:`odradek.protocol.varint`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from odradek.protocol.varint import encode_uvarint

MIN_VERSION = 4
MAX_VERSION = 16


class HasFileno(Protocol):
    """An open file the bytes of a region are read from (``FileRecords``, a file object)."""

    def fileno(self) -> int: ...


class FileRegion(NamedTuple):
    """``length`` bytes at ``position`` of ``file`` (Kafka's FileRecords slice sent with
    ``transferTo``), the one region type: the log hands it out (``FetchData.regions``), the
    Fetch response lists it among its buffers and the connection sends it with ``os.sendfile``.
    The descriptor is looked up when the bytes are sent. Any 3-tuple of that shape works."""

    file: HasFileno
    position: int
    length: int


@dataclass(slots=True)
class PartitionResult:
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Sequence[Any] = ()  # bytes or FileRegion (file, position, length)
    records_size: int = 0


@dataclass(slots=True)
class TopicResult:
    name: str
    topic_id: uuid.UUID | None
    partitions: list[PartitionResult] = field(default_factory=list)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V4 = struct.Struct(">ihqq")  # partition, error, hw, lso
_PART_V5 = struct.Struct(">ihqqq")  # + log start offset
_ABORTED = struct.Struct(">qq")
_TOP_V7 = struct.Struct(">ihi")  # throttle, error, session


def encode_fetch_response(
    version: int,
    topics: Sequence[TopicResult],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> tuple[list[Any], int]:
    """Return (buffers, total size in bytes) of the response body."""
    flexible = version >= 12
    parts: list[Any] = []
    head = bytearray()
    if version >= 7:
        head += _TOP_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        head += _I32.pack(throttle_time_ms)
    head += encode_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    total = 0
    for t in topics:
        if version >= 13:
            head += (t.topic_id or uuid.UUID(int=0)).bytes
        else:
            name = t.name.encode()
            head += encode_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            head += name
        head += encode_uvarint(len(t.partitions) + 1) if flexible else _I32.pack(len(t.partitions))
        for p in t.partitions:
            if version >= 5:
                head += _PART_V5.pack(
                    p.partition, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            else:
                head += _PART_V4.pack(p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                head += encode_uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for pid, first in aborted:
                    head += _ABORTED.pack(pid, first)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(p.preferred_read_replica)
            size = p.records_size
            head += encode_uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                parts.append(bytes(head))
                total += len(head)
                head = bytearray()
                parts.extend(p.records)
                total += size
            if flexible:
                head += b"\x00"
        if flexible:
            head += b"\x00"
    if flexible:
        head += b"\x00"
    if head:
        parts.append(bytes(head))
        total += len(head)
    return parts, total
