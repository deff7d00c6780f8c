"""Hand-built ShareFetchResponse (v1-v2, KIP-932) as a list of buffers, so that the records go out with
``os.sendfile`` from the segment files as a Fetch response's do (:mod:`odradek.protocol.fetch_response`).

Body layout (flexible: compact strings and arrays, KIP-482 tagged fields)::

    throttle_time_ms             int32
    error_code                   int16
    error_message                compact nullable string
    acquisition_lock_timeout_ms  int32
    responses                    compact array
      topic_id                   uuid
      partitions                 compact array
        partition_index          int32
        error_code               int16
        error_message            compact nullable string
        acknowledge_error_code   int16
        acknowledge_error_message compact nullable string
        current_leader           leader_id int32, leader_epoch int32, tagged fields
        records                  compact nullable records (uvarint length + 1, then the bytes)
        acquired_records         compact array of first_offset int64, last_offset int64,
                                 delivery_count int16, tagged fields
        tagged fields
      tagged fields
    node_endpoints               compact array of node_id int32, host compact string, port int32,
                                 rack compact nullable string, tagged fields
    tagged fields

v1 and v2 have the same response body. tests/unit/protocol/test_share_fetch_response.py checks it against kio.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.varint import encode_uvarint

MIN_VERSION = 1
MAX_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_LEADER = struct.Struct(">ii")
_ACQUIRED = struct.Struct(">qqh")
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class SharePartitionData:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    acknowledge_error_code: int = 0
    acknowledge_error_message: str | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    records: Sequence[Any] = ()  # bytes or FileRegion (file, position, length)
    records_size: int = 0
    acquired: Sequence[tuple[int, int, int]] = ()  # (first offset, last offset, delivery count)


@dataclass(slots=True)
class ShareTopicData:
    topic_id: uuid.UUID | None
    partitions: list[SharePartitionData] = field(default_factory=list)


def _nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\x00"
        return
    raw = s.encode()
    out += encode_uvarint(len(raw) + 1)
    out += raw


def encode_share_fetch_response(
    topics: Sequence[ShareTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    error_message: str | None = None,
    acquisition_lock_timeout_ms: int = 0,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> tuple[list[Any], int]:
    """Return (buffers, total size in bytes) of the response body."""
    parts: list[Any] = []
    total = 0
    head = bytearray(_I32.pack(throttle_time_ms) + _I16.pack(error_code))
    _nullable_string(head, error_message)
    head += _I32.pack(acquisition_lock_timeout_ms)
    head += encode_uvarint(len(topics) + 1)
    for t in topics:
        head += (t.topic_id or _ZERO_UUID).bytes  # kio reads the zero uuid as None
        head += encode_uvarint(len(t.partitions) + 1)
        for p in t.partitions:
            head += _I32.pack(p.partition) + _I16.pack(p.error_code)
            _nullable_string(head, p.error_message)
            head += _I16.pack(p.acknowledge_error_code)
            _nullable_string(head, p.acknowledge_error_message)
            head += _LEADER.pack(p.leader_id, p.leader_epoch) + b"\x00"
            head += encode_uvarint(p.records_size + 1)
            if p.records_size:
                parts.append(bytes(head))
                total += len(head)
                head = bytearray()
                parts.extend(p.records)
                total += p.records_size
            head += encode_uvarint(len(p.acquired) + 1)
            for first, last, count in p.acquired:
                head += _ACQUIRED.pack(first, last, count) + b"\x00"
            head += b"\x00"
        head += b"\x00"
    head += encode_uvarint(len(node_endpoints) + 1)
    for node_id, host, port, rack in node_endpoints:
        head += _I32.pack(node_id)
        _nullable_string(head, host)
        head += _I32.pack(port)
        _nullable_string(head, rack)
        head += b"\x00"
    head += b"\x00"
    parts.append(bytes(head))
    total += len(head)
    return parts, total
