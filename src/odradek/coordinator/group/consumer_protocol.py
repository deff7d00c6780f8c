"""The ``consumer`` embedded protocol carried in JoinGroup/SyncGroup (read-only here).

ConsumerProtocolSubscription (int16 version first)::

    topics array[string], user_data nullable bytes,
    v1+: owned_partitions array[(topic string, partitions array[int32])], v2+: generation_id int32,
    v3+: rack_id nullable string

ConsumerProtocolAssignment::

    assigned_partitions array[(topic string, partitions array[int32])], user_data nullable bytes

Arrays have an int32 count, strings an int16 length (non-flexible encoding).
"""

from __future__ import annotations

import struct

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(data):
        raise ValueError("truncated")
    n = _H.unpack_from(data, pos)[0]
    pos += 2
    if n < 0 or pos + n > len(data):
        raise ValueError("bad string")
    return data[pos : pos + n].decode(), pos + n


def _count(data: bytes, pos: int) -> tuple[int, int]:
    if pos + 4 > len(data):
        raise ValueError("truncated")
    n = _I.unpack_from(data, pos)[0]
    if n > len(data):
        raise ValueError("bad array length")
    return max(n, 0), pos + 4


def subscription_topics(data: bytes) -> set[str]:
    pos = 2  # version
    n, pos = _count(data, pos)
    topics = set()
    for _ in range(n):
        t, pos = _string(data, pos)
        topics.add(t)
    return topics


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    if len(data) < 2:
        return {}
    pos = 2
    n, pos = _count(data, pos)
    out: dict[str, list[int]] = {}
    for _ in range(n):
        t, pos = _string(data, pos)
        k, pos = _count(data, pos)
        if pos + 4 * k > len(data):
            raise ValueError("truncated")
        out[t] = list(struct.unpack_from(f">{k}i", data, pos))
        pos += 4 * k
    return out
