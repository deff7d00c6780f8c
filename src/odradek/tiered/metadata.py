"""The remote log metadata of tiered storage (KIP-405) and its records in ``__remote_log_metadata``.

Kafka's classes, in Python: ``RemoteLogSegmentId`` (a topic id partition and a uuid, new for every copy
attempt of a segment), ``RemoteLogSegmentMetadata`` (what a remote segment holds and the state of its copy),
``RemoteLogSegmentMetadataUpdate`` (a state change), ``RemotePartitionDeleteMetadata`` (the deletion of a
whole partition's remote data) and ``RemoteLogSegmentMetadataSnapshot`` (a segment without its partition);
the two state machines (``RemoteLogSegmentState``, ``RemotePartitionDeleteState``, with Kafka's
``isValidTransition``); :func:`serialize` / :func:`deserialize` (Kafka's ``RemoteLogMetadataSerde``) and
:func:`metadata_partition` (Kafka's ``RemoteLogMetadataTopicPartitioner``: which partition of
``__remote_log_metadata`` a user partition's events go to).

Segment states (a self transition is valid, so that a retry or a new leader may write the same state again)::

    COPY_SEGMENT_STARTED (0) --> COPY_SEGMENT_FINISHED (1)
             |                          |
             +--> DELETE_SEGMENT_STARTED (2) <--+
                          |
                          v
                 DELETE_SEGMENT_FINISHED (3)

Partition deletion: DELETE_PARTITION_MARKED (0) --> DELETE_PARTITION_STARTED (1) --> DELETE_PARTITION_FINISHED (2).

Byte layout of a record value (the key is null; Kafka's ``AbstractApiMessageSerde`` frame around a message
of its generated ``*Record`` classes, all at version 0 in Kafka 4.4, all flexible)::

    uvarint  frame version    1
    uvarint  api key          0 RemoteLogSegmentMetadataRecord, 1 RemoteLogSegmentMetadataUpdateRecord,
                              2 RemotePartitionDeleteMetadataRecord, 3 RemoteLogSegmentMetadataSnapshotRecord
    uvarint  version          0
    message                   the fields below, in order, then its tagged fields

    TopicIdPartitionEntry:   compact string Name, uuid Id, int32 Partition, tagged fields
    RemoteLogSegmentIdEntry: TopicIdPartitionEntry, uuid Id, tagged fields
    SegmentLeaderEpochEntry: int32 LeaderEpoch, int64 Offset, tagged fields

    0 RemoteLogSegmentMetadataRecord: RemoteLogSegmentIdEntry, int64 StartOffset, int64 EndOffset,
        int32 BrokerId, int64 MaxTimestampMs, int64 EventTimestampMs,
        compact array of SegmentLeaderEpochEntry SegmentLeaderEpochs, int32 SegmentSizeInBytes,
        compact nullable bytes CustomMetadata, int8 RemoteLogSegmentState,
        tagged fields (tag 0: bool TxnIndexEmpty, written only when true)
    1 RemoteLogSegmentMetadataUpdateRecord: RemoteLogSegmentIdEntry, int32 BrokerId, int64 EventTimestampMs,
        compact nullable bytes CustomMetadata, int8 RemoteLogSegmentState, tagged fields
    2 RemotePartitionDeleteMetadataRecord: TopicIdPartitionEntry, int32 BrokerId, int64 EventTimestampMs,
        int8 RemotePartitionDeleteState, tagged fields
    3 RemoteLogSegmentMetadataSnapshotRecord: uuid SegmentId, int64 StartOffset, int64 EndOffset,
        int32 BrokerId, int64 MaxTimestampMs, int64 EventTimestampMs,
        compact array of SegmentLeaderEpochEntry SegmentLeaderEpochs, int32 SegmentSizeInBytes,
        compact nullable bytes CustomMetadata, int8 RemoteLogSegmentState,
        tagged fields (tag 0: bool TxnIndexEmpty, written only when true)

Integers are big-endian; a uuid is its 16 bytes (most significant long first); a compact string, array or
nullable bytes is an unsigned varint of its length + 1 (0: null) before its bytes or entries; a tagged-field
section is an unsigned varint count, then per field its tag, size and bytes (KIP-482). Leader epochs are
written in ascending order. The reader skips tagged fields it does not know, as Kafka's generated code does,
and refuses the rest of what Kafka's refuses (another frame version, an unknown type or version, a null name
or array, an unknown state, bytes left over) with :class:`RemoteLogMetadataParseError`.
tests/unit/test_tiered_metadata.py holds records written by Kafka 4.4's own ``RemoteLogMetadataSerde``.
"""

from __future__ import annotations

import base64
import enum
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol.cursor import Cursor
from odradek.protocol.varint import encode_uvarint

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"  # TopicBasedRemoteLogMetadataManagerConfig
DEFAULT_METADATA_TOPIC_PARTITIONS = 50  # remote.log.metadata.topic.num.partitions

FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's RemoteLogSegmentState: the state of one copy attempt of a segment (its id on the wire)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(src: RemoteLogSegmentState | None, target: RemoteLogSegmentState) -> bool:
        """Kafka's RemoteLogSegmentState.isValidTransition (``src`` None: the segment is new)."""
        if src is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if src is target:
            return True
        return target in _SEGMENT_TRANSITIONS[src]


_S = RemoteLogSegmentState
_SEGMENT_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    _S.COPY_SEGMENT_STARTED: frozenset({_S.COPY_SEGMENT_FINISHED, _S.DELETE_SEGMENT_STARTED}),
    _S.COPY_SEGMENT_FINISHED: frozenset({_S.DELETE_SEGMENT_STARTED}),
    _S.DELETE_SEGMENT_STARTED: frozenset({_S.DELETE_SEGMENT_FINISHED}),
    _S.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.IntEnum):
    """Kafka's RemotePartitionDeleteState: the deletion of a partition's remote data (its id on the wire)."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(src: RemotePartitionDeleteState | None, target: RemotePartitionDeleteState) -> bool:
        """Kafka's RemotePartitionDeleteState.isValidTransition (``src`` None: nothing marked yet)."""
        if src is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        if src is target:
            return True
        return target == src + 1  # MARKED -> STARTED -> FINISHED


@dataclass(frozen=True)
class TopicIdPartition:
    """Kafka's TopicIdPartition: a partition named by its topic's id and name."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{kafka_uuid_str(self.topic_id)}:{self.topic}-{self.partition}"


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """Kafka's RemoteLogSegmentId: unique for every copy attempt, even of the same segment."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(topic_id_partition, uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.topic_id_partition}/{kafka_uuid_str(self.id)}"


def _epochs(value: Mapping[int, int] | Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((int(e), int(o)) for e, o in items))


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Kafka's RemoteLogSegmentMetadata.

    ``segment_leader_epochs``: (leader epoch, its first offset in the segment), ascending and never empty;
    a segment written in one epoch has one entry, at its start offset. ``end_offset`` is inclusive.
    ``txn_idx_empty``: the segment has no (or an empty) transaction index (KIP-1058's TxnIndexEmpty).
    """

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_idx_empty: bool = False

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"start offset {self.start_offset} of a remote segment cannot be negative")
        if self.end_offset < self.start_offset:
            raise ValueError(f"end offset {self.end_offset} is below start offset {self.start_offset}")
        epochs = _epochs(self.segment_leader_epochs)
        if not epochs:
            raise ValueError("segment_leader_epochs cannot be empty")
        if len({e for e, _ in epochs}) != len(epochs):
            raise ValueError(f"a leader epoch appears twice in {epochs}")
        object.__setattr__(self, "segment_leader_epochs", epochs)
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment_id.topic_id_partition

    def epoch_end_offset(self, leader_epoch: int) -> int:
        """The last offset of ``leader_epoch`` in this segment: the next epoch's start - 1, or the end offset
        (Kafka's RemoteLogMetadataCache.highestOffsetForEpoch(epoch, segment)); -1 when the next epoch starts
        at the segment's start."""
        for epoch, offset in self.segment_leader_epochs:
            if epoch > leader_epoch:
                return offset - 1
        return self.end_offset

    def create_with_updates(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Kafka's createWithUpdates: the broker, event time, custom metadata and state of ``update``."""
        if update.segment_id != self.segment_id:
            raise ValueError(f"update of {update.segment_id} applied to {self.segment_id}")
        return RemoteLogSegmentMetadata(
            self.segment_id, self.start_offset, self.end_offset, self.max_timestamp_ms, update.broker_id,
            update.event_timestamp_ms, self.segment_size_in_bytes, self.segment_leader_epochs,
            update.custom_metadata, update.state, self.txn_idx_empty,
        )


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate:
    """Kafka's RemoteLogSegmentMetadataUpdate: a segment's new state (never COPY_SEGMENT_STARTED in use)."""

    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    broker_id: int

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment_id.topic_id_partition


@dataclass(frozen=True)
class RemotePartitionDeleteMetadata:
    """Kafka's RemotePartitionDeleteMetadata: the deletion of all of a partition's remote segments."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int


@dataclass(frozen=True)
class RemoteLogSegmentMetadataSnapshot:
    """Kafka's RemoteLogSegmentMetadataSnapshot: a segment's metadata without its partition. Unlike
    :class:`RemoteLogSegmentMetadata` its offsets are not checked (Kafka's constructor does not)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    txn_idx_empty: bool = False

    def __post_init__(self) -> None:
        epochs = _epochs(self.segment_leader_epochs)
        if not epochs:
            raise ValueError("segment_leader_epochs cannot be empty")
        object.__setattr__(self, "segment_leader_epochs", epochs)

    @classmethod
    def create(cls, m: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataSnapshot:
        return cls(
            m.segment_id.id, m.start_offset, m.end_offset, m.max_timestamp_ms, m.broker_id,
            m.event_timestamp_ms, m.segment_size_in_bytes, m.segment_leader_epochs, m.custom_metadata,
            m.state, m.txn_idx_empty,
        )


RemoteLogMetadata = (
    RemoteLogSegmentMetadata
    | RemoteLogSegmentMetadataUpdate
    | RemotePartitionDeleteMetadata
    | RemoteLogSegmentMetadataSnapshot
)


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


# --- RemoteLogMetadataTopicPartitioner -------------------------------------------------------------

_M32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (a signed 32-bit result), as its default partitioner uses it."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & _M32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _M32
        k ^= k >> 24
        k = (k * m) & _M32
        h = ((h * m) & _M32) ^ k
    rest = length - whole
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _java_long_hash(v: int) -> int:
    v &= (1 << 64) - 1
    return (v ^ (v >> 32)) & _M32


def metadata_partition(tp: TopicIdPartition, num_partitions: int = DEFAULT_METADATA_TOPIC_PARTITIONS) -> int:
    """The partition of ``__remote_log_metadata`` that ``tp``'s events go to (Kafka's
    RemoteLogMetadataTopicPartitioner): murmur2 of the 4 big-endian bytes of Java's
    ``Objects.hash(topicId.leastSignificantBits, topicId.mostSignificantBits, partition)``, made positive,
    modulo the partition count. The topic name plays no part."""
    if num_partitions <= 0:
        raise ValueError(f"the metadata topic needs at least one partition, not {num_partitions}")
    n = tp.topic_id.int
    h = 1
    for part in (_java_long_hash(n), _java_long_hash(n >> 64), tp.partition & _M32):
        h = (31 * h + part) & _M32
    return (murmur2(h.to_bytes(4, "big")) & 0x7FFFFFFF) % num_partitions


# --- RemoteLogMetadataSerde ------------------------------------------------------------------------


class RemoteLogMetadataParseError(ValueError):
    """A ``__remote_log_metadata`` value Kafka's RemoteLogMetadataSerde would refuse (MetadataParseException)."""


API_KEYS: dict[type[Any], int] = {
    RemoteLogSegmentMetadata: 0,
    RemoteLogSegmentMetadataUpdate: 1,
    RemotePartitionDeleteMetadata: 2,
    RemoteLogSegmentMetadataSnapshot: 3,
}
_VERSION = 0  # the only version of each of the four records in Kafka 4.4

_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TAG_TXN_INDEX_EMPTY = 0


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def uvarint(self, n: int) -> None:
        self.out += encode_uvarint(n)

    def int8(self, n: int) -> None:
        self.out += _I8.pack(n)

    def int32(self, n: int) -> None:
        self.out += _I32.pack(n)

    def int64(self, n: int) -> None:
        self.out += _I64.pack(n)

    def uuid(self, u: uuid.UUID) -> None:
        self.out += u.bytes

    def string(self, s: str) -> None:
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes is longer than a Kafka string may be")
        self.uvarint(len(b) + 1)
        self.out += b

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.uvarint(0)
        else:
            self.uvarint(len(b) + 1)
            self.out += b

    def no_tags(self) -> None:
        self.uvarint(0)

    def topic_id_partition(self, tp: TopicIdPartition) -> None:
        self.string(tp.topic)
        self.uuid(tp.topic_id)
        self.int32(tp.partition)
        self.no_tags()

    def segment_id(self, sid: RemoteLogSegmentId) -> None:
        self.topic_id_partition(sid.topic_id_partition)
        self.uuid(sid.id)
        self.no_tags()

    def epochs(self, epochs: tuple[tuple[int, int], ...]) -> None:
        self.uvarint(len(epochs) + 1)
        for epoch, offset in epochs:
            self.int32(epoch)
            self.int64(offset)
            self.no_tags()

    def txn_index_empty_tag(self, empty: bool) -> None:
        if empty:  # a tagged field at its default (false) is not written
            self.uvarint(1)
            self.uvarint(_TAG_TXN_INDEX_EMPTY)
            self.uvarint(1)
            self.int8(1)
        else:
            self.no_tags()


def serialize(m: RemoteLogMetadata) -> bytes:
    """The ``__remote_log_metadata`` record value of ``m``, as Kafka 4.4's RemoteLogMetadataSerde writes it."""
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(API_KEYS[type(m)])
    w.uvarint(_VERSION)
    try:
        if isinstance(m, RemoteLogSegmentMetadata):
            w.segment_id(m.segment_id)
            w.int64(m.start_offset)
            w.int64(m.end_offset)
            w.int32(m.broker_id)
            w.int64(m.max_timestamp_ms)
            w.int64(m.event_timestamp_ms)
            w.epochs(m.segment_leader_epochs)
            w.int32(m.segment_size_in_bytes)
            w.nullable_bytes(m.custom_metadata)
            w.int8(m.state)
            w.txn_index_empty_tag(m.txn_idx_empty)
        elif isinstance(m, RemoteLogSegmentMetadataUpdate):
            w.segment_id(m.segment_id)
            w.int32(m.broker_id)
            w.int64(m.event_timestamp_ms)
            w.nullable_bytes(m.custom_metadata)
            w.int8(m.state)
            w.no_tags()
        elif isinstance(m, RemotePartitionDeleteMetadata):
            w.topic_id_partition(m.topic_id_partition)
            w.int32(m.broker_id)
            w.int64(m.event_timestamp_ms)
            w.int8(m.state)
            w.no_tags()
        else:
            w.uuid(m.segment_id)
            w.int64(m.start_offset)
            w.int64(m.end_offset)
            w.int32(m.broker_id)
            w.int64(m.max_timestamp_ms)
            w.int64(m.event_timestamp_ms)
            w.epochs(m.segment_leader_epochs)
            w.int32(m.segment_size_in_bytes)
            w.nullable_bytes(m.custom_metadata)
            w.int8(m.state)
            w.txn_index_empty_tag(m.txn_idx_empty)
    except struct.error as e:
        raise ValueError(f"{type(m).__name__}: a field is out of its Kafka type's range: {e}") from None
    return bytes(w.out)


class _Reader(Cursor):
    __slots__ = ()
    error = RemoteLogMetadataParseError

    def string(self, what: str = "string") -> str:
        """A compact string that must not be null, at most 32767 bytes (Kafka's generated readers)."""
        n = self.uvarint()
        if n == 0:
            self.fail(f"non-nullable field {what} was serialized as null")
        if n - 1 > 0x7FFF:
            self.fail(f"string field {what} had invalid length {n - 1}")
        return self.utf8(self.take(n - 1), f"field {what}")

    def topic_id_partition(self) -> TopicIdPartition:
        name = self.string("name")
        topic_id = self.uuid()
        partition = self.i32()
        self.tagged(unique=False)
        return TopicIdPartition(topic_id, name, partition)

    def segment_id(self) -> RemoteLogSegmentId:
        tp = self.topic_id_partition()
        sid = self.uuid()
        self.tagged(unique=False)
        return RemoteLogSegmentId(tp, sid)

    def epochs(self) -> tuple[tuple[int, int], ...]:
        n = self.uvarint()
        if n == 0:
            raise RemoteLogMetadataParseError("non-nullable field segmentLeaderEpochs was serialized as null")
        out = []
        for _ in range(n - 1):
            epoch = self.i32()
            offset = self.i64()
            self.tagged(unique=False)
            out.append((epoch, offset))
        return tuple(out)

    def segment_state(self) -> RemoteLogSegmentState:
        v = self.i8()
        try:
            return RemoteLogSegmentState(v)
        except ValueError:
            raise RemoteLogMetadataParseError(f"unknown remote log segment state {v}") from None

    def txn_index_empty(self) -> bool:
        raw = self.tagged(unique=False).get(_TAG_TXN_INDEX_EMPTY)
        if raw is None:
            return False
        if len(raw) != 1:
            raise RemoteLogMetadataParseError(f"TxnIndexEmpty tagged field of {len(raw)} bytes")
        return raw != b"\x00"


def deserialize(data: bytes | bytearray | memoryview) -> RemoteLogMetadata:
    """The metadata in a ``__remote_log_metadata`` record value (Kafka's RemoteLogMetadataSerde.deserialize)."""
    r = _Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise RemoteLogMetadataParseError(f"unknown frame version {frame} (only {FRAME_VERSION} is supported)")
    api_key = r.uvarint()
    version = r.uvarint()
    if api_key not in API_KEYS.values():
        raise RemoteLogMetadataParseError(f"unknown remote log metadata record type {api_key}")
    if version != _VERSION:
        raise RemoteLogMetadataParseError(f"unsupported version {version} of record type {api_key}")
    m: RemoteLogMetadata
    try:
        if api_key == 0:
            sid = r.segment_id()
            start, end, broker, max_ts, event_ts = r.i64(), r.i64(), r.i32(), r.i64(), r.i64()
            epochs = r.epochs()
            size = r.i32()
            custom = r.compact_bytes()
            state = r.segment_state()
            m = RemoteLogSegmentMetadata(
                sid, start, end, max_ts, broker, event_ts, size, epochs, custom, state, r.txn_index_empty()
            )
        elif api_key == 1:
            sid = r.segment_id()
            broker, event_ts = r.i32(), r.i64()
            custom = r.compact_bytes()
            m = RemoteLogSegmentMetadataUpdate(sid, event_ts, custom, r.segment_state(), broker)
            r.tagged(unique=False)
        elif api_key == 2:
            tp = r.topic_id_partition()
            broker, event_ts = r.i32(), r.i64()
            v = r.i8()
            try:
                pstate = RemotePartitionDeleteState(v)
            except ValueError:
                raise RemoteLogMetadataParseError(f"unknown remote partition delete state {v}") from None
            m = RemotePartitionDeleteMetadata(tp, pstate, event_ts, broker)
            r.tagged(unique=False)
        else:
            seg = r.uuid()
            start, end, broker, max_ts, event_ts = r.i64(), r.i64(), r.i32(), r.i64(), r.i64()
            epochs = r.epochs()
            size = r.i32()
            custom = r.compact_bytes()
            state = r.segment_state()
            m = RemoteLogSegmentMetadataSnapshot(
                seg, start, end, max_ts, broker, event_ts, size, epochs, custom, state, r.txn_index_empty()
            )
    except RemoteLogMetadataParseError:
        raise
    except ValueError as e:  # the metadata's own checks (offsets, epochs), as Kafka's constructors make them
        raise RemoteLogMetadataParseError(f"record type {api_key}: {e}") from None
    if r.pos != r.limit:
        raise RemoteLogMetadataParseError(f"found {r.limit - r.pos} byte(s) of garbage after record type {api_key}")
    return m
