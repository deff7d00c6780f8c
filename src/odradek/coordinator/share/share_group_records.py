"""Share groups' records in ``__consumer_offsets`` (KIP-932), byte for byte as Kafka 4.4's
``GroupCoordinatorRecordSerde`` writes them (the JSON schemas ``ShareGroup*Key/Value.json`` of
kafka-group-coordinator-4.4.0.jar; the records Kafka's GroupCoordinatorRecordHelpers builds).

Key: int16 record type (the schema's apiKey), then the key at version 0, not flexible (strings are int16 length +
UTF-8)::

    10 ShareGroupMemberMetadataKey            group_id string, member_id string
    11 ShareGroupMetadataKey                  group_id string
    12 ShareGroupTargetAssignmentMetadataKey  group_id string
    13 ShareGroupTargetAssignmentMemberKey    group_id string, member_id string
    14 ShareGroupCurrentMemberAssignmentKey   group_id string, member_id string
    15 ShareGroupStatePartitionMetadataKey    group_id string

Value: int16 version 0, then the flexible value (KIP-482: compact strings and arrays, uuid 16 bytes, a tagged-field
section closing every struct)::

    10 ShareGroupMemberMetadataValue          rack_id nullable string, client_id string, client_host string,
                                              subscribed_topic_names []string
    11 ShareGroupMetadataValue                epoch int32, metadata_hash int64
    12 ShareGroupTargetAssignmentMetadataValue assignment_epoch int32; tag 0 assignment_timestamp int64 (KIP-1263,
                                              Kafka 4.3+; written when not 0)
    13 ShareGroupTargetAssignmentMemberValue  topic_partitions [](topic_id uuid, partitions []int32)
    14 ShareGroupCurrentMemberAssignmentValue member_epoch int32, previous_member_epoch int32, state int8,
                                              assigned_partitions [](topic_id uuid, partitions []int32)
    15 ShareGroupStatePartitionMetadataValue  initializing_topics [](topic_id uuid, topic_name string,
                                              partitions []int32), initialized_topics (the same),
                                              deleting_topics [](topic_id uuid, topic_name string)

A null value is a tombstone. The record type numbers 0-9 are the classic and consumer groups' records
(coordinator.records decodes 0-2); :func:`is_share_group_key` tells a share group's key apart.
tests/unit/coordinator/share/test_share_group_records.py holds the bytes Kafka 4.4's own serde writes for the same
records.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.coordinator.records import RecordFormatError
from odradek.protocol.cursor import Cursor
from odradek.protocol.varint import encode_uvarint

MEMBER_METADATA = 10  # ShareGroupMemberMetadata
GROUP_METADATA = 11  # ShareGroupMetadata
TARGET_ASSIGNMENT_METADATA = 12  # ShareGroupTargetAssignmentMetadata
TARGET_ASSIGNMENT_MEMBER = 13  # ShareGroupTargetAssignmentMember
CURRENT_MEMBER_ASSIGNMENT = 14  # ShareGroupCurrentMemberAssignment
STATE_PARTITION_METADATA = 15  # ShareGroupStatePartitionMetadata
RECORD_TYPES = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))
_MEMBER_KEYS = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
VALUE_VERSION = 0
MEMBER_STATE_STABLE = 0  # Kafka's MemberState.STABLE: a share group member never reconciles
TAG_ASSIGNMENT_TIMESTAMP = 0

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


class ShareGroupRecordError(RecordFormatError):
    """A share group record of ``__consumer_offsets`` that cannot be decoded."""


@dataclass(frozen=True)
class ShareGroupKey:
    record_type: int
    group_id: str
    member_id: str | None = None  # for the member records (10, 13, 14)


@dataclass(frozen=True)
class GroupMetadataValue:
    epoch: int
    metadata_hash: int


@dataclass(frozen=True)
class MemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class TargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class TargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass(frozen=True)
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions


@dataclass(frozen=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class StatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...] = ()
    initialized_topics: tuple[TopicPartitionsInfo, ...] = ()
    deleting_topics: tuple[tuple[uuid.UUID, str], ...] = ()


Value = (GroupMetadataValue | MemberMetadataValue | TargetAssignmentMetadataValue | TargetAssignmentMemberValue
         | CurrentMemberAssignmentValue | StatePartitionMetadataValue)
Record = tuple[bytes, bytes | None]


def topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> TopicPartitions:
    """An assignment as the records carry it: topics by id, partitions ascending."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])))


# ------------------------------------------------------------------------------------------- encoding


def _string(s: str) -> bytes:
    raw = s.encode()
    if len(raw) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    return _H.pack(len(raw)) + raw


def encode_key(key: ShareGroupKey) -> bytes:
    if key.record_type not in RECORD_TYPES:
        raise ValueError(f"not a share group record type: {key.record_type}")
    out = _H.pack(key.record_type) + _string(key.group_id)
    if key.record_type in _MEMBER_KEYS:
        if key.member_id is None:
            raise ValueError("a member record's key needs its member id")
        out += _string(key.member_id)
    return out


def _cstring(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\x00"
        return
    raw = s.encode()
    out += encode_uvarint(len(raw) + 1)
    out += raw


def _int32s(out: bytearray, values: Iterable[int]) -> None:
    vs = list(values)
    out += encode_uvarint(len(vs) + 1)
    for v in vs:
        out += _I.pack(v)


def _topic_partitions(out: bytearray, tps: TopicPartitions) -> None:
    out += encode_uvarint(len(tps) + 1)
    for topic_id, parts in tps:
        out += topic_id.bytes
        _int32s(out, parts)
        out += b"\x00"


def _infos(out: bytearray, infos: tuple[TopicPartitionsInfo, ...]) -> None:
    out += encode_uvarint(len(infos) + 1)
    for i in infos:
        out += i.topic_id.bytes
        _cstring(out, i.topic_name)
        _int32s(out, i.partitions)
        out += b"\x00"


def encode_value(value: Value) -> bytes:
    out = bytearray(_H.pack(VALUE_VERSION))
    if isinstance(value, GroupMetadataValue):
        out += _I.pack(value.epoch) + _Q.pack(value.metadata_hash)
    elif isinstance(value, MemberMetadataValue):
        _cstring(out, value.rack_id)
        _cstring(out, value.client_id)
        _cstring(out, value.client_host)
        out += encode_uvarint(len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            _cstring(out, name)
    elif isinstance(value, TargetAssignmentMetadataValue):
        out += _I.pack(value.assignment_epoch)
        if value.assignment_timestamp != 0:
            out += b"\x01" + encode_uvarint(TAG_ASSIGNMENT_TIMESTAMP) + b"\x08" + _Q.pack(value.assignment_timestamp)
            return bytes(out)
    elif isinstance(value, TargetAssignmentMemberValue):
        _topic_partitions(out, value.topic_partitions)
    elif isinstance(value, CurrentMemberAssignmentValue):
        out += _I.pack(value.member_epoch) + _I.pack(value.previous_member_epoch) + _B.pack(value.state)
        _topic_partitions(out, value.assigned_partitions)
    else:
        _infos(out, value.initializing_topics)
        _infos(out, value.initialized_topics)
        out += encode_uvarint(len(value.deleting_topics) + 1)
        for topic_id, name in value.deleting_topics:
            out += topic_id.bytes
            _cstring(out, name)
            out += b"\x00"
    out += b"\x00"  # no tagged fields
    return bytes(out)


def _record_type(value: Value) -> int:
    return {
        GroupMetadataValue: GROUP_METADATA, MemberMetadataValue: MEMBER_METADATA,
        TargetAssignmentMetadataValue: TARGET_ASSIGNMENT_METADATA, TargetAssignmentMemberValue: TARGET_ASSIGNMENT_MEMBER,
        CurrentMemberAssignmentValue: CURRENT_MEMBER_ASSIGNMENT, StatePartitionMetadataValue: STATE_PARTITION_METADATA,
    }[type(value)]


def record(group_id: str, value: Value, member_id: str | None = None) -> Record:
    """The (key, value) of one record."""
    return encode_key(ShareGroupKey(_record_type(value), group_id, member_id)), encode_value(value)


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> Record:
    return encode_key(ShareGroupKey(record_type, group_id, member_id)), None


# ------------------------------------------------------------------------------------------- decoding


class _Reader(Cursor):
    __slots__ = ()
    error = ShareGroupRecordError

    def unpack(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.unpack(_I) for _ in range(self.compact_count(4)))

    def topic_partitions(self) -> TopicPartitions:
        out = []
        for _ in range(self.compact_count(18)):
            topic_id = self.uuid()
            parts = self.int32s()
            self.tagged()
            out.append((topic_id, parts))
        return tuple(out)

    def infos(self) -> tuple[TopicPartitionsInfo, ...]:
        out = []
        for _ in range(self.compact_count(19)):
            topic_id = self.uuid()
            name = self.compact_string()
            parts = self.int32s()
            self.tagged()
            out.append(TopicPartitionsInfo(topic_id, name, parts))
        return tuple(out)


def is_share_group_key(key: bytes | bytearray | memoryview | None) -> bool:
    """A ``__consumer_offsets`` key of a share group's record (record type 10-15)."""
    return key is not None and len(key) >= 2 and _H.unpack(bytes(key[:2]))[0] in RECORD_TYPES


def decode_key(data: bytes | bytearray | memoryview) -> ShareGroupKey:
    r = _Reader(data)
    record_type = r.unpack(_H)
    if record_type not in RECORD_TYPES:
        raise ShareGroupRecordError(f"not a share group record type: {record_type}")
    group_id = r.string()
    member_id = r.string() if record_type in _MEMBER_KEYS else None
    r.expect_end("key")
    return ShareGroupKey(record_type, group_id, member_id)


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None) -> Value | None:
    """The value of a record of ``record_type``; None for a tombstone."""
    if data is None:
        return None
    r = _Reader(data)
    version = r.unpack(_H)
    if version != VALUE_VERSION:
        raise ShareGroupRecordError(f"unknown share group value version {version} (record type {record_type})")
    value: Value
    if record_type == GROUP_METADATA:
        value = GroupMetadataValue(r.unpack(_I), r.unpack(_Q))
    elif record_type == MEMBER_METADATA:
        rack = r.compact_nullable_string()
        client_id, client_host = r.compact_string(), r.compact_string()
        names = tuple(r.compact_string() for _ in range(r.compact_count(1)))
        value = MemberMetadataValue(rack, client_id, client_host, names)
    elif record_type == TARGET_ASSIGNMENT_METADATA:
        epoch = r.unpack(_I)
        tags = r.tagged()
        raw = tags.get(TAG_ASSIGNMENT_TIMESTAMP)
        if raw is not None and len(raw) != 8:
            raise ShareGroupRecordError(f"tagged field 0 has {len(raw)} bytes, expected 8")
        r.expect_end("value")
        return TargetAssignmentMetadataValue(epoch, int(_Q.unpack(raw)[0]) if raw is not None else 0)
    elif record_type == TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(r.topic_partitions())
    elif record_type == CURRENT_MEMBER_ASSIGNMENT:
        epoch, previous, state = r.unpack(_I), r.unpack(_I), r.unpack(_B)
        value = CurrentMemberAssignmentValue(epoch, previous, state, r.topic_partitions())
    elif record_type == STATE_PARTITION_METADATA:
        initializing, initialized = r.infos(), r.infos()
        deleting = []
        for _ in range(r.compact_count(18)):
            topic_id = uuid.UUID(bytes=r.take(16))
            deleting.append((topic_id, r.compact_string()))
            r.tagged()
        value = StatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    else:
        raise ShareGroupRecordError(f"not a share group record type: {record_type}")
    r.tagged()
    r.expect_end("value")
    return value
