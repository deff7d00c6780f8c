"""Records of the ``__transaction_state`` topic, in Kafka's own key/value schemas
(TransactionLogKey.json / TransactionLogValue.json, Kafka's ``TransactionLog``).

Every key and value starts with an int16 version. Key, version 0 (not flexible)::

    transactional_id  string  (int16 length + UTF-8, never null)

Value, version 0 (not flexible, written by Kafka with transaction.version 0)::

    producer_id                 int64
    producer_epoch              int16
    transaction_timeout_ms      int32
    transaction_status          int8    (TransactionState id, 0..7)
    transaction_partitions      nullable array (int32 count, -1 = null) of
        topic                   string
        partition_ids           array (int32 count) of int32
    last_update_timestamp_ms    int64
    start_timestamp_ms          int64

Value, version 1 (flexible, KIP-482; written by Kafka 3.8+/4.x with transaction.version >= 1):
the same fields in the same order, but the partitions array is a compact nullable array
(unsigned varint count + 1, 0 = null), the topic a compact string (unsigned varint length + 1),
the partition ids a compact array, each partitions entry ends with its own tagged-field
section, and the value ends with a tagged-field section (unsigned varint count, then for each
field an unsigned varint tag, an unsigned varint size and the bytes, tags ascending)::

    tag 0  previous_producer_id        int64  (default -1, KIP-890: id of the last committed txn)
    tag 1  next_producer_id            int64  (default -1, KIP-890: id handed out on epoch overflow)
    tag 2  client_transaction_version  int16  (default 0, KIP-890: the client's transaction.version)

A tagged field is written only when it differs from its default. Unknown tags (a newer Kafka
may add some) are kept as raw bytes and written back unchanged.

A null value (tombstone) means the transactional id was removed (expired).

The partition of a transactional id is Kafka's TransactionStateManager.partitionFor:
``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``.

Decoding is strict, since the bytes are read back from a log a remote peer may have written:
every malformed key or value (unknown version, truncation, trailing bytes, negative or
oversized lengths, invalid UTF-8, unknown state id, duplicate or mis-sized known tags, a varint
longer than 5 bytes) raises :class:`TransactionLogFormatError` and nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.coordinator import records as offsets_records
from odradek.coordinator.records import RecordFormatError
from odradek.protocol.cursor import Cursor

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)
HIGHEST_VALUE_VERSION = 1

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2

# TransactionState ids as Kafka writes them (Empty .. PrepareEpochFence)
_VALID_STATE_IDS = range(0, 8)


class TransactionLogFormatError(RecordFormatError):
    """A ``__transaction_state`` key or value that cannot be decoded; the only error the
    decoders of this module raise. A subclass of coordinator.records.RecordFormatError (and so
    of ValueError)."""


@dataclass(frozen=True)
class TransactionLogValue:
    """One TransactionLogValue, field for field. ``transaction_partitions`` is None when the
    array is null (Kafka writes null for the Empty state) and keeps the grouping by topic."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    unknown_tagged_fields: tuple[tuple[int, bytes], ...] = ()

    def partitions(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs of the value (empty when the array is null)."""
        out: set[tuple[str, int]] = set()
        for topic, ids in self.transaction_partitions or ():
            out.update((topic, p) for p in ids)
        return frozenset(out)


# ---------------------------------------------------------------------------------- writing
class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> None:
        self.buf += _B.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _H.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _Q.pack(v)

    def uvarint(self, v: int) -> None:
        if v < 0 or v > 0xFFFFFFFF:
            raise ValueError(f"unsigned varint out of range: {v}")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str) -> None:
        b = s.encode()
        if len(b) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.i16(len(b))
        self.buf += b

    def compact_string(self, s: str) -> None:
        b = s.encode()
        self.uvarint(len(b) + 1)
        self.buf += b


def encode_key(transactional_id: str) -> bytes:
    """TransactionLogKey version 0."""
    w = _Writer()
    w.i16(KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.buf)


def encode_value(v: TransactionLogValue, version: int = HIGHEST_VALUE_VERSION) -> bytes:
    """TransactionLogValue ``version`` (0 or 1). Version 0 cannot carry the tagged fields:
    a non-default one is refused with ValueError, as Kafka's generated writer refuses it."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unsupported TransactionLogValue version {version}")
    w = _Writer()
    w.i16(version)
    w.i64(v.producer_id)
    w.i16(v.producer_epoch)
    w.i32(v.transaction_timeout_ms)
    w.i8(v.transaction_status)
    parts = v.transaction_partitions
    if version == 0:
        if v.previous_producer_id != -1 or v.next_producer_id != -1 or v.client_transaction_version != 0 \
                or v.unknown_tagged_fields:
            raise ValueError("TransactionLogValue version 0 has no tagged fields")
        if parts is None:
            w.i32(-1)
        else:
            w.i32(len(parts))
            for topic, ids in parts:
                w.string(topic)
                w.i32(len(ids))
                for p in ids:
                    w.i32(p)
        w.i64(v.last_update_timestamp_ms)
        w.i64(v.start_timestamp_ms)
        return bytes(w.buf)
    if parts is None:
        w.uvarint(0)
    else:
        w.uvarint(len(parts) + 1)
        for topic, ids in parts:
            w.compact_string(topic)
            w.uvarint(len(ids) + 1)
            for p in ids:
                w.i32(p)
            w.uvarint(0)  # no tagged fields in PartitionsSchema
    w.i64(v.last_update_timestamp_ms)
    w.i64(v.start_timestamp_ms)
    tagged: list[tuple[int, bytes]] = []
    if v.previous_producer_id != -1:
        tagged.append((TAG_PREVIOUS_PRODUCER_ID, _Q.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tagged.append((TAG_NEXT_PRODUCER_ID, _Q.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tagged.append((TAG_CLIENT_TRANSACTION_VERSION, _H.pack(v.client_transaction_version)))
    known = {t for t, _ in tagged}
    for tag, raw in v.unknown_tagged_fields:
        if tag in known or tag <= TAG_CLIENT_TRANSACTION_VERSION:
            raise ValueError(f"tag {tag} is a known TransactionLogValue field")
        tagged.append((tag, raw))
    tagged.sort(key=lambda t: t[0])
    w.uvarint(len(tagged))
    for tag, raw in tagged:
        w.uvarint(tag)
        w.uvarint(len(raw))
        w.buf += raw
    return bytes(w.buf)


# ---------------------------------------------------------------------------------- reading
class _Reader(Cursor):
    __slots__ = ()
    error = TransactionLogFormatError


def _as_bytes(data: object, what: str) -> bytes | bytearray | memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TransactionLogFormatError(f"{what} is not bytes")
    return data


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id of a TransactionLogKey (version 0)."""
    r = _Reader(_as_bytes(data, "key"))
    version = r.i16()
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"unknown __transaction_state key version {version}")
    tid = r.string()
    r.expect_end("key")
    return tid


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """A TransactionLogValue of version 0 or 1; None for a tombstone (null value)."""
    if data is None:
        return None
    r = _Reader(_as_bytes(data, "value"))
    version = r.i16()
    if version not in VALUE_VERSIONS:
        raise TransactionLogFormatError(f"unknown __transaction_state value version {version}")
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    status = r.i8()
    if status not in _VALID_STATE_IDS:
        raise TransactionLogFormatError(f"unknown transaction state id {status}")
    parts: list[tuple[str, tuple[int, ...]]] | None
    if version == 0:
        n = r.i32()
        if n < 0:
            parts = None
        else:
            parts = []
            for _ in range(r.checked_count(n, 6)):
                topic = r.string()
                ids = tuple(r.i32() for _ in range(r.checked_count(r.i32(), 4)))
                parts.append((topic, ids))
    else:
        n = r.uvarint()
        if n == 0:
            parts = None
        else:
            parts = []
            for _ in range(r.checked_count(n - 1, 3)):
                topic = r.compact_string()
                m = r.uvarint()
                if m == 0:
                    raise TransactionLogFormatError("null partition id array")
                ids = tuple(r.i32() for _ in range(r.checked_count(m - 1, 4)))
                _skip_tagged_fields(r)
                parts.append((topic, ids))
    last_update = r.i64()
    start = r.i64()
    prev_pid, next_pid, ctv = -1, -1, 0
    unknown: list[tuple[int, bytes]] = []
    if version >= 1:
        seen: set[int] = set()
        for _ in range(r.checked_count(r.uvarint(), 2)):
            tag = r.uvarint()
            if tag in seen:
                raise TransactionLogFormatError(f"tagged field {tag} appears twice")
            seen.add(tag)
            raw = r.take(r.uvarint())
            if tag == TAG_PREVIOUS_PRODUCER_ID:
                prev_pid = _fixed(raw, _Q, tag)
            elif tag == TAG_NEXT_PRODUCER_ID:
                next_pid = _fixed(raw, _Q, tag)
            elif tag == TAG_CLIENT_TRANSACTION_VERSION:
                ctv = _fixed(raw, _H, tag)
            else:
                unknown.append((tag, raw))
    r.expect_end("value")
    return TransactionLogValue(
        producer_id, producer_epoch, timeout_ms, status, None if parts is None else tuple(parts),
        last_update, start, prev_pid, next_pid, ctv, tuple(sorted(unknown)),
    )


def _fixed(raw: bytes, s: struct.Struct, tag: int) -> int:
    if len(raw) != s.size:
        raise TransactionLogFormatError(f"tagged field {tag} has {len(raw)} bytes, expected {s.size}")
    return int(s.unpack(raw)[0])


def _skip_tagged_fields(r: _Reader) -> None:
    seen: set[int] = set()
    for _ in range(r.checked_count(r.uvarint(), 2)):
        tag = r.uvarint()
        if tag in seen:
            raise TransactionLogFormatError(f"tagged field {tag} appears twice")
        seen.add(tag)
        r.take(r.uvarint())


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor: ``Utils.abs(transactionalId.hashCode) %
    transactionTopicPartitionCount`` (Utils.abs maps Integer.MIN_VALUE to 0)."""
    return offsets_records.partition_for(transactional_id, num_partitions)
