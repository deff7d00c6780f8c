"""Transaction markers (KIP-98): the control batch that ends a transaction in a partition
(Kafka's EndTransactionMarker, ControlRecordType, MemoryRecords.withEndTransactionMarker).

A marker is a v2 batch with the *transactional* (bit 4) and *control* (bit 5) attribute
bits set, the producer id and epoch of the transaction, baseSequence -1, uncompressed,
holding one record::

    record key (4 bytes)              record value (6 bytes)
    0  version  int16  0              0  version           int16  0
    2  type     int16  0 ABORT        2  coordinatorEpoch  int32
                       1 COMMIT

(the record's other fields as in any v2 record: attributes 0, timestampDelta 0,
offsetDelta 0, no headers). Kafka reads a newer key/value version by its known fields.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from odradek.log.errors import CORRUPT_MESSAGE, LogError
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_NONE,
    BatchHeader,
    InvalidRecordError,
    build_batch,
    decompress,
)
from odradek.protocol.varint import read_varint

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    control_type: ControlRecordType,
    *,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch of one marker (offset and leader epoch assigned on append)."""
    key = _KEY.pack(CONTROL_KEY_VERSION, int(control_type))
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(
        [(key, value)], base_offset=base_offset, timestamp=timestamp, producer_id=producer_id,
        producer_epoch=producer_epoch, partition_leader_epoch=partition_leader_epoch,
        transactional=True, control=True,
    )


def parse_marker(batch: bytes | bytearray | memoryview, h: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch (the whole batch's bytes); None for another control
    record type (Kafka has none other in data partitions). Raises :class:`LogError`
    (CORRUPT_MESSAGE) when the record does not decode."""
    try:
        view = memoryview(batch)[BATCH_HEADER_SIZE : h.size]
        data = bytes(view) if h.compression == COMPRESSION_NONE else decompress(h.compression, view, 1 << 16)
        _length, pos = read_varint(data, 0, len(data))
        pos += 1  # attributes
        _ts, pos = read_varint(data, pos, len(data))
        _od, pos = read_varint(data, pos, len(data))
        klen, pos = read_varint(data, pos, len(data))
        if klen < _KEY.size:
            raise ValueError("control record key too short")
        _kv, ctype = _KEY.unpack_from(data, pos)
        pos += klen
        vlen, pos = read_varint(data, pos, len(data))
        if ctype not in (0, 1):
            return None
        if vlen < _VALUE.size:
            raise ValueError("end transaction marker value too short")
        _vv, coordinator_epoch = _VALUE.unpack_from(data, pos)
    except (ValueError, IndexError, struct.error, InvalidRecordError) as exc:
        raise LogError(f"undecodable control batch at offset {h.base_offset}: {exc}", CORRUPT_MESSAGE) from exc
    return EndTxnMarker(ControlRecordType(ctype), coordinator_epoch)
