"""The share coordinator's state (KIP-932): the records of ``__share_group_state`` and their pure application.

Kafka's share coordinator (``ShareCoordinatorShard``) keeps, for each share-partition (group id, topic id,
partition), the share-partition start offset (SPSO), the state and leader epochs and the delivery state of the
in-flight records that are not plain AVAILABLE-at-count-0. It writes two kinds of records, both keyed by the
share-partition:

- a **snapshot** (ShareSnapshotKey/Value) holds the whole state and replaces what was there;
- an **update** (ShareUpdateKey/Value) holds the batches one WriteShareGroupState changed, merged into the last
  snapshot on replay; after ``share.coordinator.snapshot.update.records.per.snapshot`` (500) updates the next
  write is a snapshot again.

Bytes, as Kafka 4.4 writes them (``CoordinatorRecordSerde``: the key is prefixed with the record type, Kafka's
``MessageUtil.toCoordinatorTypePrefixedBytes``; the value with its version, ``toVersionPrefixedBytes``)::

    key    int16  record type (the JSON spec's apiKey): 0 ShareSnapshotKey, 1 ShareUpdateKey
           string group_id         int16 length + UTF-8   (key version 0, not flexible)
           uuid   topic_id         16 bytes
           int32  partition

    ShareSnapshotValue   int16  version 0           (flexible: KIP-482 compact arrays, tagged fields)
           int32  snapshot_epoch
           int32  state_epoch
           int32  leader_epoch
           int64  start_offset
           int64  create_timestamp
           int64  write_timestamp
           compact array state_batches  (unsigned varint count + 1), each:
               int64 first_offset, int64 last_offset, int8 delivery_state, int16 delivery_count,
               tagged fields (unsigned varint count, always 0)
           tagged fields: tag 0 delivery_complete_count int32 (KIP-1226, Kafka 4.2+; written only when not -1)

    ShareUpdateValue     int16  version 0           (flexible)
           int32  snapshot_epoch
           int32  leader_epoch
           int64  start_offset        (-1: not changed by this update)
           compact array state_batches (as above)
           tagged fields: tag 0 delivery_complete_count int32 (only when not -1)

A tombstone (null value) on a ShareSnapshotKey deletes the share-partition's state (DeleteShareGroupState).
Delivery states in state batches: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED (1 ACQUIRED is never persisted).
tests/unit/coordinator/share/test_share_state.py holds the bytes Kafka 4.4's own ``ShareCoordinatorRecordSerde``
writes for the same records.

The merge of overlapping state batches is Kafka 4.4's ``PersisterStateBatchCombiner``: batches below the start
offset are dropped (or cut at it), and where batches overlap each offset takes the batch of the highest priority,
the higher delivery count first, then the higher delivery state; runs of equal (state, count) are coalesced.

:class:`ShareCoordinatorShard` is the pure part of Kafka's ``ShareCoordinatorShard``: ``replay`` applies a record,
``write_state`` / ``read_state`` / ``read_state_summary`` / ``initialize_state`` / ``delete_state`` check a
request and answer it with the records to append (appended, then replayed, by the runtime) and the response.
"""

from __future__ import annotations

import heapq
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from odradek.coordinator.records import RecordFormatError
from odradek.protocol import errors
from odradek.protocol.cursor import Cursor
from odradek.protocol.varint import encode_uvarint

SNAPSHOT_RECORD_TYPE = 0  # ShareSnapshotKey / ShareSnapshotValue apiKey
UPDATE_RECORD_TYPE = 1  # ShareUpdateKey / ShareUpdateValue apiKey
VALUE_VERSION = 0
TAG_DELIVERY_COMPLETE_COUNT = 0

# Kafka's ShareCoordinatorConfig.SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_DEFAULT
DEFAULT_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = 500
UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


class ShareStateFormatError(RecordFormatError):
    """A ``__share_group_state`` key or value that cannot be decoded."""


@dataclass(frozen=True, order=True)
class StateBatch:
    """Kafka's PersisterStateBatch: the delivery state of the offsets first..last (inclusive)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT


@dataclass(frozen=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT


# ------------------------------------------------------------------------------------------- encoding


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    """ShareSnapshotKey (``record_type`` 0) or ShareUpdateKey (1), with its type prefix."""
    if record_type not in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE):
        raise ValueError(f"unknown __share_group_state record type {record_type}")
    group = key.group_id.encode()
    if len(group) > 0x7FFF:
        raise ValueError("group id longer than 32767 bytes")
    return b"".join((_H.pack(record_type), _H.pack(len(group)), group, key.topic_id.bytes, _I.pack(key.partition)))


def _encode_batches(out: bytearray, batches: Sequence[StateBatch]) -> None:
    out += encode_uvarint(len(batches) + 1)
    for b in batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(0)  # no tagged fields in StateBatch


def _encode_tagged(out: bytearray, delivery_complete_count: int) -> None:
    if delivery_complete_count == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
        out.append(0)
        return
    out += encode_uvarint(1) + encode_uvarint(TAG_DELIVERY_COMPLETE_COUNT) + encode_uvarint(4)
    out += _I.pack(delivery_complete_count)


def encode_snapshot_value(v: ShareSnapshotValue) -> bytes:
    out = bytearray(_H.pack(VALUE_VERSION))
    out += _I.pack(v.snapshot_epoch) + _I.pack(v.state_epoch) + _I.pack(v.leader_epoch) + _Q.pack(v.start_offset)
    out += _Q.pack(v.create_timestamp) + _Q.pack(v.write_timestamp)
    _encode_batches(out, v.state_batches)
    _encode_tagged(out, v.delivery_complete_count)
    return bytes(out)


def encode_update_value(v: ShareUpdateValue) -> bytes:
    out = bytearray(_H.pack(VALUE_VERSION))
    out += _I.pack(v.snapshot_epoch) + _I.pack(v.leader_epoch) + _Q.pack(v.start_offset)
    _encode_batches(out, v.state_batches)
    _encode_tagged(out, v.delivery_complete_count)
    return bytes(out)


def encode_value(v: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    return encode_snapshot_value(v) if isinstance(v, ShareSnapshotValue) else encode_update_value(v)


# ------------------------------------------------------------------------------------------- decoding


class _Reader(Cursor):
    __slots__ = ()
    error = ShareStateFormatError

    def unpack(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])


def decode_key(data: bytes | bytearray | memoryview) -> tuple[int, SharePartitionKey]:
    """The record type (0 snapshot, 1 update) and the share-partition of a ``__share_group_state`` key."""
    r = _Reader(data)
    record_type = r.unpack(_H)
    if record_type not in (SNAPSHOT_RECORD_TYPE, UPDATE_RECORD_TYPE):
        raise ShareStateFormatError(f"unknown __share_group_state record type {record_type}")
    n = r.unpack(_H)
    if n < 0:
        raise ShareStateFormatError("null group id")
    try:
        group = r.take(n).decode()
    except UnicodeDecodeError as e:
        raise ShareStateFormatError(f"invalid UTF-8 in group id: {e.reason}") from None
    topic_id = uuid.UUID(bytes=r.take(16))
    partition = r.unpack(_I)
    r.expect_end("key")
    return record_type, SharePartitionKey(group, topic_id, partition)


def _decode_batches(r: _Reader) -> tuple[StateBatch, ...]:
    n = r.uvarint()
    if n == 0:
        raise ShareStateFormatError("null state batches")
    count = n - 1
    if count * (_BATCH.size + 1) > len(r.data) - r.pos:
        raise ShareStateFormatError(f"array of {count} state batches runs past the record's end")
    out = []
    for _ in range(count):
        first, last, state, dcount = _BATCH.unpack(r.take(_BATCH.size))
        _skip_tagged(r)
        out.append(StateBatch(first, last, state, dcount))
    return tuple(out)


def _skip_tagged(r: _Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.take(r.uvarint())


def _decode_tagged(r: _Reader) -> int:
    dcc = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    seen: set[int] = set()
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        if tag in seen:
            raise ShareStateFormatError(f"tagged field {tag} appears twice")
        seen.add(tag)
        raw = r.take(r.uvarint())
        if tag == TAG_DELIVERY_COMPLETE_COUNT:
            if len(raw) != 4:
                raise ShareStateFormatError(f"tagged field 0 has {len(raw)} bytes, expected 4")
            dcc = int(_I.unpack(raw)[0])
    return dcc


def _value_version(r: _Reader) -> None:
    version = r.unpack(_H)
    if version != VALUE_VERSION:
        raise ShareStateFormatError(f"unknown __share_group_state value version {version}")


def decode_snapshot_value(data: bytes | bytearray | memoryview) -> ShareSnapshotValue:
    r = _Reader(data)
    _value_version(r)
    snapshot_epoch, state_epoch, leader_epoch = r.unpack(_I), r.unpack(_I), r.unpack(_I)
    start, created, written = r.unpack(_Q), r.unpack(_Q), r.unpack(_Q)
    batches = _decode_batches(r)
    dcc = _decode_tagged(r)
    r.expect_end("value")
    return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches, dcc)


def decode_update_value(data: bytes | bytearray | memoryview) -> ShareUpdateValue:
    r = _Reader(data)
    _value_version(r)
    snapshot_epoch, leader_epoch, start = r.unpack(_I), r.unpack(_I), r.unpack(_Q)
    batches = _decode_batches(r)
    dcc = _decode_tagged(r)
    r.expect_end("value")
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, dcc)


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None) -> ShareSnapshotValue | ShareUpdateValue | None:
    """The value of a record of ``record_type``; None for a tombstone."""
    if data is None:
        return None
    if record_type == SNAPSHOT_RECORD_TYPE:
        return decode_snapshot_value(data)
    if record_type == UPDATE_RECORD_TYPE:
        return decode_update_value(data)
    raise ShareStateFormatError(f"unknown __share_group_state record type {record_type}")


# -------------------------------------------------------------------------- merging state batches


def combine_state_batches(
    so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
) -> list[StateBatch]:
    """Kafka 4.4's PersisterStateBatchCombiner: one sorted, non-overlapping list from both lists.

    Offsets below ``start_offset`` are dropped (-1: none); where batches overlap an offset takes the batch with
    the highest (delivery count, delivery state); adjacent runs with equal (state, count) are coalesced."""
    pruned: list[StateBatch] = []
    for b in (*so_far, *new):
        if start_offset != -1:
            if b.last_offset < start_offset:
                continue
            if b.first_offset < start_offset:
                b = replace(b, first_offset=start_offset)
        pruned.append(b)
    if len(pruned) < 2:
        return pruned
    # A sweep over the batch boundaries; the active batches' priorities live in a max-heap with lazy removal.
    events: list[tuple[int, int, int, int]] = []  # (offset, 0 = end / 1 = begin, count, state)
    for b in pruned:
        events.append((b.first_offset, 1, b.delivery_count, b.delivery_state))
        events.append((b.last_offset + 1, 0, b.delivery_count, b.delivery_state))
    events.sort()
    heap: list[tuple[int, int]] = []  # (-count, -state)
    active: dict[tuple[int, int], int] = {}
    out: list[StateBatch] = []
    i = 0
    while i < len(events):
        offset = events[i][0]
        while i < len(events) and events[i][0] == offset:
            _, begin, count, state = events[i]
            prio = (-count, -state)
            if begin:
                active[prio] = active.get(prio, 0) + 1
                heapq.heappush(heap, prio)
            else:
                active[prio] -= 1
            i += 1
        while heap and active.get(heap[0], 0) <= 0:
            heapq.heappop(heap)
        if not heap or i >= len(events):
            continue
        count, state = -heap[0][0], -heap[0][1]
        last = events[i][0] - 1  # up to the next boundary
        if out and out[-1].last_offset + 1 == offset and out[-1].delivery_count == count \
                and out[-1].delivery_state == state:
            out[-1] = replace(out[-1], last_offset=last)
        else:
            out.append(StateBatch(offset, last, state, count))
    return out


# --------------------------------------------------------------------------- the coordinator shard


@dataclass(frozen=True)
class ShareGroupOffset:
    """Kafka's ShareGroupOffset: a share-partition's state as the coordinator keeps it."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    create_timestamp: int = 0
    write_timestamp: int = 0
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT


@dataclass(frozen=True)
class CoordinatorRecord:
    """One record to append to ``__share_group_state`` (``value`` None: a tombstone)."""

    record_type: int
    key: SharePartitionKey
    value: ShareSnapshotValue | ShareUpdateValue | None

    def key_bytes(self) -> bytes:
        return encode_key(self.record_type, self.key)

    def value_bytes(self) -> bytes | None:
        return None if self.value is None else encode_value(self.value)


@dataclass(frozen=True)
class PartitionResult:
    """One partition's answer to a share-state request (error_code 0 = NONE)."""

    error_code: int = errors.NONE
    error_message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True)
class CoordinatorResult:
    records: tuple[CoordinatorRecord, ...]
    response: PartitionResult


@dataclass(frozen=True)
class WriteStateRequest:
    """One partition of WriteShareGroupState (the coordinator handles one key at a time, as Kafka's does)."""

    key: SharePartitionKey
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT


# Kafka's ShareCoordinatorShard exception messages
NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED_SHARE_PARTITION = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_SHARE_PARTITION = "Read operation on uninitialized share partition not allowed."
_FENCED_LEADER_EPOCH_MESSAGE = "The leader epoch in the request is older than the epoch on the broker."  # Errors.message()
_UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."
_FENCED_STATE_EPOCH_MESSAGE = "The coordinator rejected the request because the state epoch did not match."


def _error(code: int, message: str | None) -> CoordinatorResult:
    return CoordinatorResult((), PartitionResult(error_code=code, error_message=message))


@dataclass
class ShareCoordinatorShard:
    """The pure part of Kafka's ShareCoordinatorShard for one ``__share_group_state`` partition.

    ``partition_count(topic_id)`` answers the number of partitions of a topic, or None when it is unknown (Kafka
    reads the metadata image); ``clock`` gives milliseconds. Nothing here does I/O: the runtime appends the
    records a method returns and replays them before answering (Kafka's CoordinatorRuntime)."""

    partition_count: Callable[[uuid.UUID], int | None]
    clock: Callable[[], int]
    snapshot_update_records_per_snapshot: int = DEFAULT_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT
    states: dict[SharePartitionKey, ShareGroupOffset] = field(default_factory=dict)
    leader_epochs: dict[SharePartitionKey, int] = field(default_factory=dict)
    state_epochs: dict[SharePartitionKey, int] = field(default_factory=dict)
    update_counts: dict[SharePartitionKey, int] = field(default_factory=dict)

    # ----------------------------------------------------------------------------------- replay

    def replay(self, record_type: int, key: SharePartitionKey, value: ShareSnapshotValue | ShareUpdateValue | None) -> None:
        if record_type == SNAPSHOT_RECORD_TYPE:
            if value is None:  # tombstone: the share-partition's state is deleted
                for d in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                    d.pop(key, None)
                return
            assert isinstance(value, ShareSnapshotValue)
            self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
            self._raise_epoch(self.state_epochs, key, value.state_epoch)
            self.states[key] = ShareGroupOffset(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset, value.state_batches,
                value.create_timestamp, value.write_timestamp, value.delivery_complete_count,
            )
            if self.update_counts.get(key, -1) >= self.snapshot_update_records_per_snapshot:
                self.update_counts[key] = 0
        elif record_type == UPDATE_RECORD_TYPE:
            if value is None:
                return
            assert isinstance(value, ShareUpdateValue)
            self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
            current = self.states.get(key)
            if current is None:
                self.states[key] = ShareGroupOffset(
                    value.snapshot_epoch, 0, value.leader_epoch, value.start_offset, value.state_batches, 0, 0,
                    value.delivery_complete_count,
                )
            else:
                start = current.start_offset if value.start_offset == -1 else value.start_offset
                leader = current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
                self.states[key] = replace(
                    current, start_offset=start, leader_epoch=leader,
                    delivery_complete_count=value.delivery_complete_count,
                    state_batches=tuple(combine_state_batches(current.state_batches, value.state_batches, start)),
                )
            self.update_counts[key] = self.update_counts.get(key, 0) + 1

    def replay_bytes(self, key: bytes, value: bytes | None) -> None:
        record_type, k = decode_key(key)
        self.replay(record_type, k, decode_value(record_type, value))

    @staticmethod
    def _raise_epoch(epochs: dict[SharePartitionKey, int], key: SharePartitionKey, epoch: int) -> None:
        if epochs.get(key, epoch) <= epoch:
            epochs[key] = epoch

    # --------------------------------------------------------------------------------- requests

    def _unknown_partition(self, key: SharePartitionKey) -> bool:
        count = self.partition_count(key.topic_id)
        return count is None or key.partition >= count

    def write_state(self, req: WriteStateRequest) -> CoordinatorResult:
        """WriteShareGroupState for one share-partition: a ShareUpdate, or a ShareSnapshot every N updates."""
        key = req.key
        if key.partition < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if req.leader_epoch < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        if req.state_epoch < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        if key not in self.states:
            return _error(errors.INVALID_REQUEST, WRITE_UNINITIALIZED_SHARE_PARTITION)
        if self.leader_epochs.get(key, req.leader_epoch) > req.leader_epoch:
            return _error(errors.FENCED_LEADER_EPOCH, _FENCED_LEADER_EPOCH_MESSAGE)
        if self.state_epochs.get(key, req.state_epoch) > req.state_epoch:
            return _error(errors.FENCED_STATE_EPOCH, _FENCED_STATE_EPOCH_MESSAGE)
        if self._unknown_partition(key):
            return _error(errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        record = self._state_record(req, update_leader_epoch=False)
        return CoordinatorResult((record,), PartitionResult())

    def _state_record(self, req: WriteStateRequest, update_leader_epoch: bool) -> CoordinatorRecord:
        """Kafka 4.4's generateShareStateRecord."""
        now = self.clock()
        current = self.states[req.key]
        leader_epoch = req.leader_epoch if update_leader_epoch else current.leader_epoch
        start = max(req.start_offset, current.start_offset)
        dcc = req.delivery_complete_count
        if req.start_offset == current.start_offset:
            dcc = max(req.delivery_complete_count, current.delivery_complete_count)
        elif req.start_offset < current.start_offset:
            dcc = current.delivery_complete_count
        if self.update_counts.get(req.key, 0) >= self.snapshot_update_records_per_snapshot:
            batches = combine_state_batches(current.state_batches, req.state_batches, start)
            snapshot = ShareSnapshotValue(
                current.snapshot_epoch + 1, current.state_epoch, leader_epoch, start, now, now, tuple(batches), dcc,
            )
            return CoordinatorRecord(SNAPSHOT_RECORD_TYPE, req.key, snapshot)
        batches = combine_state_batches((), req.state_batches, start)
        update = ShareUpdateValue(current.snapshot_epoch, leader_epoch, start, tuple(batches), dcc)
        return CoordinatorRecord(UPDATE_RECORD_TYPE, req.key, update)

    def read_state(self, key: SharePartitionKey, leader_epoch: int) -> CoordinatorResult:
        """ReadShareGroupState (Kafka's readStateAndMaybeUpdateLeaderEpoch): the state, and a record raising the
        leader epoch when a new leader reads."""
        if key.partition < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if leader_epoch < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        if key not in self.states:
            return _error(errors.INVALID_REQUEST, READ_UNINITIALIZED_SHARE_PARTITION)
        if self.leader_epochs.get(key, leader_epoch) > leader_epoch:
            return _error(errors.FENCED_LEADER_EPOCH, _FENCED_LEADER_EPOCH_MESSAGE)
        if self._unknown_partition(key):
            return _error(errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        state = self.states[key]
        response = PartitionResult(
            state_epoch=state.state_epoch, leader_epoch=state.leader_epoch, start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count, state_batches=state.state_batches,
        )
        if self.leader_epochs.get(key) == leader_epoch:
            return CoordinatorResult((), response)
        record = self._state_record(
            WriteStateRequest(key, state.state_epoch, leader_epoch, state.start_offset, (), state.delivery_complete_count),
            update_leader_epoch=True,
        )
        return CoordinatorResult((record,), response)

    def read_state_summary(self, key: SharePartitionKey) -> CoordinatorResult:
        """ReadShareGroupStateSummary: start offset, epochs and delivery complete count, no batches."""
        if key.partition < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_partition(key):
            return _error(errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        state = self.states.get(key)
        if state is None:
            return CoordinatorResult((), PartitionResult(start_offset=-1, delivery_complete_count=-1))
        return CoordinatorResult((), PartitionResult(
            state_epoch=state.state_epoch, leader_epoch=state.leader_epoch, start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
        ))

    def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> CoordinatorResult:
        """InitializeShareGroupState: a fresh snapshot (no batches, leader epoch 0) at ``start_offset``."""
        if key.partition < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if state_epoch < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        if self.state_epochs.get(key, state_epoch) > state_epoch:
            return _error(errors.FENCED_STATE_EPOCH, _FENCED_STATE_EPOCH_MESSAGE)
        if self._unknown_partition(key):
            return _error(errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        current = self.states.get(key)
        now = self.clock()
        snapshot = ShareSnapshotValue(
            0 if current is None else current.snapshot_epoch + 1, state_epoch, 0, start_offset, now, now, (),
            -1 if start_offset == -1 else 0,
        )
        return CoordinatorResult((CoordinatorRecord(SNAPSHOT_RECORD_TYPE, key, snapshot),), PartitionResult())

    def delete_state(self, key: SharePartitionKey) -> CoordinatorResult:
        """DeleteShareGroupState: a tombstone on the snapshot key (nothing when there is no state)."""
        if key.partition < 0:
            return _error(errors.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown_partition(key):
            return _error(errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
        if key not in self.states:
            return CoordinatorResult((), PartitionResult())
        return CoordinatorResult((CoordinatorRecord(SNAPSHOT_RECORD_TYPE, key, None),), PartitionResult())

    def apply(self, result: CoordinatorResult) -> PartitionResult:
        """Replay the records of ``result`` (as the runtime does once they are appended) and give its response."""
        for r in result.records:
            self.replay(r.record_type, r.key, r.value)
        return result.response
