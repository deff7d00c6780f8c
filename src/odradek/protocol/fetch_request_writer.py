"""A follower's FetchRequest v12 written by hand (the replica fetcher sends one per round trip;
building kio entities for it cost more than the rest of the request's path).

Body layout, FetchRequest v12 (flexible, KIP-482; tagged ``cluster_id`` omitted)::

    replica_id              int32     the follower's broker id
    max_wait_ms             int32
    min_bytes               int32
    max_bytes               int32
    isolation_level         int8
    session_id              int32     0: no fetch session (KIP-227)
    session_epoch           int32     -1: full fetch, no session
    topics                  compact array (uvarint count+1)
      topic                 compact string
      partitions            compact array
        partition           int32
        current_leader_epoch int32
        fetch_offset        int64
        last_fetched_epoch  int32
        log_start_offset    int64
        partition_max_bytes int32
        tagged fields       uvarint 0
      tagged fields         uvarint 0
    forgotten_topics_data   compact array (empty: uvarint 1)
    rack_id                 compact string
    tagged fields           uvarint 0
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from odradek.protocol.varint import encode_uvarint

VERSION = 12

_HEAD = struct.Struct(">iiiibii")
_PART = struct.Struct(">iiqiqib")  # ... partition_max_bytes, then the empty tagged fields (0)

# (partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, partition_max_bytes)
FetchPartition = tuple[int, int, int, int, int, int]


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return encode_uvarint(len(raw) + 1) + raw


def encode_fetch_request(
    replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
    topics: Iterable[tuple[str, list[FetchPartition]]], *, isolation_level: int = 0, rack_id: str = "",
) -> bytes:
    """The body of a FetchRequest v12 without a fetch session."""
    topics = list(topics)
    out = bytearray(_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, 0, -1))
    out += encode_uvarint(len(topics) + 1)
    pack = _PART.pack
    for name, parts in topics:
        out += _compact_string(name)
        out += encode_uvarint(len(parts) + 1)
        for p in parts:
            out += pack(*p, 0)
        out += b"\x00"
    out += b"\x01"  # no forgotten topics
    out += _compact_string(rack_id)
    out += b"\x00"
    return bytes(out)
