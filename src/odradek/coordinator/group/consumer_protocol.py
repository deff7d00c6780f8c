"""The ``consumer`` embedded protocol carried in JoinGroup/SyncGroup member metadata and
assignments (Kafka's ConsumerProtocol, schemas ConsumerProtocolSubscription and
ConsumerProtocolAssignment; KIP-429 added owned_partitions, KIP-792 generation_id, KIP-881
rack_id): the one codec of it. The classic coordinator reads subscriptions
(:func:`subscription_topics`); DescribeGroups writes v0 of both for a KIP-848 group's members
(:func:`encode_subscription`, :func:`encode_assignment`).

ConsumerProtocolSubscription (int16 version first)::

    topics array[string], user_data nullable bytes,
    v1+: owned_partitions array[(topic string, partitions array[int32])], v2+: generation_id int32,
    v3+: rack_id nullable string

ConsumerProtocolAssignment (int16 version first)::

    assigned_partitions array[(topic string, partitions array[int32])], user_data nullable bytes

Arrays have an int32 count, strings an int16 length, nullable bytes an int32 length (-1 =
null) (non-flexible encoding). Readers raise ``ValueError`` on malformed data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_VERSION_COUNT = struct.Struct(">hi")
_NULL_BYTES = _I.pack(-1)


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


def _encode_string(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def encode_subscription(topics: Iterable[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics (sorted), null user data."""
    names = sorted(topics)
    return _VERSION_COUNT.pack(0, len(names)) + b"".join(_encode_string(t) for t in names) + _NULL_BYTES


def encode_assignment(partitions: Mapping[str, Iterable[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: topics and their partitions (both sorted), null user data."""
    out = bytearray(_VERSION_COUNT.pack(0, len(partitions)))
    for t in sorted(partitions):
        ps = sorted(partitions[t])
        out += _encode_string(t)
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += _NULL_BYTES
    return bytes(out)
