"""Records of the ``__consumer_offsets`` topic, in Kafka's own key/value schemas.

Keys (int16 version first)::

    version 0/1  OffsetCommitKey:   group string, topic string, partition int32
    version 2    GroupMetadataKey:  group string

Values (int16 version first; a null value is a tombstone)::

    OffsetCommitValue v0: offset int64, metadata string, commit_timestamp int64
                      v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
                      v2: offset int64, metadata string, commit_timestamp int64
                      v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataValue v0: protocol_type string, generation int32, protocol nullable string,
                           leader nullable string, members array
                       v2+: ... then current_state_timestamp int64 before members
      member v0: member_id string, client_id string, client_host string, session_timeout int32,
                 subscription bytes, assignment bytes
      member v1/v2: member_id, client_id, client_host, rebalance_timeout int32, session_timeout int32, ...
      member v3: member_id, group_instance_id nullable string, client_id, client_host,
                 rebalance_timeout int32, session_timeout int32, subscription bytes, assignment bytes

Strings are int16 length + UTF-8 (-1 = null), bytes int32 length, arrays int32 count.
We write OffsetCommitKey v1, OffsetCommitValue v3, GroupMetadataKey v2 and GroupMetadataValue v3,
and read every version above.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.cursor import Cursor

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class RecordFormatError(ValueError):
    pass


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Writer:
        self.buf += _H.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.buf += _I.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.buf += _Q.pack(v)
        return self

    def string(self, s: str | None) -> _Writer:
        if s is None:
            return self.i16(-1)
        b = s.encode()
        self.i16(len(b))
        self.buf += b
        return self

    def bytes_(self, b: bytes | None) -> _Writer:
        if b is None:
            return self.i32(-1)
        self.i32(len(b))
        self.buf += b
        return self


class _Reader(Cursor):
    __slots__ = ()
    error = RecordFormatError


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(1).string(group).string(topic).i32(partition).buf)


def encode_group_key(group: str) -> bytes:
    return bytes(_Writer().i16(2).string(group).buf)


def encode_offset_value(v: OffsetValue) -> bytes:
    return bytes(_Writer().i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp).buf)


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer().i16(3).string(v.protocol_type).i32(v.generation).string(v.protocol).string(v.leader)
    w.i64(v.current_state_timestamp).i32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout).i32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.nullable_string() or "", r.nullable_string() or "", r.i32())
    if version == 2:
        return GroupKey(r.nullable_string() or "")
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if version == 0:
        return OffsetValue(r.i64(), -1, r.nullable_string() or "", r.i64())
    if version == 1:
        off, meta, ts, exp = r.i64(), r.nullable_string() or "", r.i64(), r.i64()
        return OffsetValue(off, -1, meta, ts, exp)
    if version == 2:
        return OffsetValue(r.i64(), -1, r.nullable_string() or "", r.i64())
    if version == 3:
        return OffsetValue(r.i64(), r.i32(), r.nullable_string() or "", r.i64())
    raise RecordFormatError(f"unknown offset commit value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    g = GroupValue(r.nullable_string() or "", r.i32(), r.nullable_string(), r.nullable_string())
    if version >= 2:
        g.current_state_timestamp = r.i64()
    for _ in range(r.i32()):
        member_id = r.nullable_string() or ""
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.nullable_string() or ""
        client_host = r.nullable_string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if rebalance < 0:
            rebalance = session
        g.members.append(
            MemberValue(member_id, instance, client_id, client_host, rebalance, session, r.bytes_() or b"", r.bytes_() or b"")
        )
    return g


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be")
    return [int.from_bytes(b[i : i + 2], "big") for i in range(0, len(b), 2)]


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitionCount``."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions
