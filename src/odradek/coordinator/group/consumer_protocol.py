"""The ``consumer`` embedded protocol carried in JoinGroup/SyncGroup member metadata and
assignments (Kafka's ConsumerProtocol, schemas ConsumerProtocolSubscription and
ConsumerProtocolAssignment; KIP-429 added owned_partitions, KIP-792 generation_id, KIP-881
rack_id): the one codec of it. The classic coordinator reads subscriptions
(:func:`subscription_topics`); DescribeGroups writes v0 of both for a KIP-848 group's members
(:func:`encode_subscription`, :func:`encode_assignment`); a classic member of a KIP-848 group
(online migration) is read whole (:func:`decode_subscription`) and answered in its own
version (:func:`metadata_version`).

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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Subscription:
    """A decoded ConsumerProtocolSubscription (fields a version lacks are empty or None)."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: dict[str, list[int]]
    generation_id: int = -1
    rack_id: str | None = None


def metadata_version(data: bytes) -> int:
    """The version of a subscription or assignment (Kafka's ConsumerProtocol.deserializeVersion)."""
    if len(data) < 2:
        raise ValueError("truncated")
    return int(_H.unpack_from(data, 0)[0])


def _nullable_string(data: bytes, pos: int) -> tuple[str | None, int]:
    if pos + 2 > len(data):
        raise ValueError("truncated")
    if _H.unpack_from(data, pos)[0] == -1:
        return None, pos + 2
    return _string(data, pos)


def _nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    if pos + 4 > len(data):
        raise ValueError("truncated")
    n = _I.unpack_from(data, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(data):
        raise ValueError("bad bytes length")
    return data[pos : pos + n], pos + n


def _topic_partitions(data: bytes, pos: int) -> tuple[dict[str, list[int]], int]:
    n, pos = _count(data, pos)
    out: dict[str, list[int]] = {}
    for _ in range(n):
        t, pos = _string(data, pos)
        k, pos = _count(data, pos)
        if pos + 4 * k > len(data):
            raise ValueError("truncated")
        out[t] = list(struct.unpack_from(f">{k}i", data, pos))
        pos += 4 * k
    return out, pos


def decode_subscription(data: bytes) -> Subscription:
    """Every field of a subscription; a version above 3 is read as 3 (later versions only add
    fields, as Kafka's ConsumerProtocol reads them)."""
    version = metadata_version(data)
    if version < 0:
        raise ValueError(f"bad version {version}")
    pos = 2
    n, pos = _count(data, pos)
    topics = []
    for _ in range(n):
        t, pos = _string(data, pos)
        topics.append(t)
    user_data, pos = _nullable_bytes(data, pos)
    owned: dict[str, list[int]] = {}
    generation, rack = -1, None
    if version >= 1:
        owned, pos = _topic_partitions(data, pos)
    if version >= 2:
        if pos + 4 > len(data):
            raise ValueError("truncated")
        generation = _I.unpack_from(data, pos)[0]
        pos += 4
    if version >= 3:
        rack, pos = _nullable_string(data, pos)
    return Subscription(version, tuple(topics), user_data, owned, generation, rack)


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
    return _topic_partitions(data, 2)[0]


def _encode_string(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def encode_subscription(topics: Iterable[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics (sorted), null user data."""
    names = sorted(topics)
    return _VERSION_COUNT.pack(0, len(names)) + b"".join(_encode_string(t) for t in names) + _NULL_BYTES


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment (v0 by default; every version up to 3 has the same fields):
    topics and their partitions (both sorted), null user data."""
    out = bytearray(_VERSION_COUNT.pack(max(0, min(version, 3)), len(partitions)))
    for t in sorted(partitions):
        ps = sorted(partitions[t])
        out += _encode_string(t)
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += _NULL_BYTES
    return bytes(out)
