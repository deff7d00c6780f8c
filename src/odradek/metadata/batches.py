"""Batches of the ``__cluster_metadata`` log and of KRaft snapshots: metadata records and KRaft control records.

The metadata log is made of ordinary v2 record batches (:mod:`odradek.protocol.records`), as Kafka's raft
layer writes them (BatchBuilder / MemoryRecordsBuilder): ``partitionLeaderEpoch`` is the quorum epoch of
the leader that appended the batch, the producer id, epoch and sequence are -1, the timestamps are the
append time. Two kinds of batch:

* a **data batch**: each record has a null key and a metadata record as its value (:mod:`.records`);
* a **control batch** (attribute bit 5): each record's key is Kafka's control record key, 4 bytes::

      version int16 (0), type int16

  and its value the control message, encoded at version 0 with no version prefix (Kafka's
  ``MessageUtil.toByteBuffer``; the message's own first field is a ``Version`` int16). The types KRaft
  writes (ControlRecordType), read and written here through kio's schemas:

      2 LeaderChangeMessage   a new leader's first batch of its epoch (KIP-595)
      3 SnapshotHeaderRecord  the first record of a snapshot (KIP-630)
      4 SnapshotFooterRecord  the last record of a snapshot
      5 KRaftVersionRecord    the finalized kraft.version (KIP-853)
      6 VotersRecord          the voter set (KIP-853)

  (0 ABORT and 1 COMMIT are the transaction markers of ordinary topics, never in this log.)

A snapshot (``<end offset>-<epoch>.checkpoint``, KIP-630) is the same batches: a control batch with the
header, data batches, a control batch with the footer.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.voters_record.v0.data import VotersRecord
from kio.serial import entity_reader, entity_writer

from odradek.metadata.records import MetadataRecord, RecordAndVersion, decode_record, encode_record
from odradek.metadata.schema import MetadataRecordError
from odradek.protocol import kio_guard
from odradek.protocol.records import (
    InvalidRecordError,
    batch_crc_ok,
    build_batch,
    decode_records,
    iter_batches,
)

CONTROL_KEY = struct.Struct(">hh")
CONTROL_KEY_VERSION = 0

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6

ControlMessage = LeaderChangeMessage | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord | VotersRecord

CONTROL_TYPES: dict[int, type[Any]] = {
    LEADER_CHANGE: LeaderChangeMessage,
    SNAPSHOT_HEADER: SnapshotHeaderRecord,
    SNAPSHOT_FOOTER: SnapshotFooterRecord,
    KRAFT_VERSION: KRaftVersionRecord,
    KRAFT_VOTERS: VotersRecord,
}
_CONTROL_TYPE_OF: dict[type[Any], int] = {cls: t for t, cls in CONTROL_TYPES.items()}


class Entry(NamedTuple):
    """One record of the metadata log: its offset and either a metadata record or a control message."""

    offset: int
    timestamp: int
    record: RecordAndVersion | None
    control: ControlMessage | None


class MetadataBatch(NamedTuple):
    base_offset: int
    last_offset: int
    leader_epoch: int  # partitionLeaderEpoch: the quorum epoch it was appended in
    append_timestamp: int
    is_control: bool
    size: int
    entries: tuple[Entry, ...]


@cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


@cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


def encode_control(message: ControlMessage) -> tuple[bytes, bytes]:
    """The key and value of a control record carrying ``message``."""
    kind = _CONTROL_TYPE_OF.get(type(message))
    if kind is None:
        raise MetadataRecordError(f"{type(message).__name__} is not a KRaft control record")
    buf = io.BytesIO()
    cls: Any = type(message)
    _writer(cls)(buf, message)
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, kind), buf.getvalue()


def decode_control(key: bytes | None, value: bytes | None) -> ControlMessage:
    """The control message of a control record (Kafka's ControlRecordUtils.deserialize...)."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise MetadataRecordError("a control record's key needs at least 4 bytes")
    version, kind = CONTROL_KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION:
        raise MetadataRecordError(f"unknown control record key version {version}")
    cls: Any = CONTROL_TYPES.get(kind)
    if cls is None:
        raise MetadataRecordError(f"control record type {kind} is not one of the KRaft log")
    if value is None:
        raise MetadataRecordError(f"control record {cls.__name__} has no value")
    try:
        kio_guard.check(cls, value, 0)
        message, size = _reader(cls)(value, 0)
    except Exception as e:  # kio raises many types on malformed input
        raise MetadataRecordError(f"malformed {cls.__name__}: {type(e).__name__}: {e}") from None
    if size != len(value):
        raise MetadataRecordError(f"Found {len(value) - size} byte(s) of garbage after {cls.__name__}")
    result: ControlMessage = message
    return result


def _as_versioned(item: MetadataRecord | RecordAndVersion) -> bytes:
    if isinstance(item, RecordAndVersion):
        return encode_record(item.record, item.version)
    return encode_record(item)


def build_records_batch(
    records: Sequence[MetadataRecord | RecordAndVersion],
    *,
    base_offset: int,
    leader_epoch: int,
    timestamp: int,
) -> bytes:
    """One data batch of metadata records (each at its given version, or the highest one)."""
    return build_batch([(None, _as_versioned(r)) for r in records], base_offset=base_offset,
                       timestamp=timestamp, partition_leader_epoch=leader_epoch)


def build_control_batch(
    messages: Sequence[ControlMessage], *, base_offset: int, leader_epoch: int, timestamp: int
) -> bytes:
    """One control batch (a LeaderChangeMessage, a snapshot's header or footer, KRaft's version and voters)."""
    return build_batch([encode_control(m) for m in messages], base_offset=base_offset, timestamp=timestamp,
                       partition_leader_epoch=leader_epoch, control=True)


def read_batches(data: bytes | bytearray | memoryview, *, check_crc: bool = True) -> Iterator[MetadataBatch]:
    """The batches of a metadata log segment or snapshot, every record decoded. Raises
    :class:`MetadataRecordError` on a batch with a bad CRC, a record that does not decode, or trailing
    bytes that are not a whole batch."""
    view = memoryview(data)
    end_of_batches = 0
    for pos, header in iter_batches(view):
        end_of_batches = pos + header.size
        if header.magic != 2:
            raise MetadataRecordError(f"batch at offset {header.base_offset} has magic {header.magic}, not 2")
        if check_crc and not batch_crc_ok(view, pos, header):
            raise MetadataRecordError(f"batch at offset {header.base_offset} fails its CRC-32C")
        try:
            records = decode_records(view[pos : pos + header.size])
        except InvalidRecordError as e:
            raise MetadataRecordError(f"batch at offset {header.base_offset}: {e.message}") from None
        entries = []
        for r in records:
            try:
                if header.is_control:
                    entries.append(Entry(r.offset, r.timestamp, None, decode_control(r.key, r.value)))
                else:
                    if r.value is None:
                        raise MetadataRecordError("a metadata record has no value")
                    entries.append(Entry(r.offset, r.timestamp, decode_record(r.value), None))
            except MetadataRecordError as e:
                raise MetadataRecordError(f"record at offset {r.offset}: {e}") from None
        yield MetadataBatch(header.base_offset, header.last_offset, header.partition_leader_epoch,
                            header.max_timestamp, header.is_control, header.size, tuple(entries))
    if end_of_batches < len(view):
        raise MetadataRecordError(f"{len(view) - end_of_batches} byte(s) after the last whole batch, at position "
                                  f"{end_of_batches}: a batch cut short or not framed")


def read_file(path: Path) -> list[MetadataBatch]:
    """The batches of a ``__cluster_metadata`` segment (``.log``) or a snapshot (``.checkpoint``)."""
    return list(read_batches(path.read_bytes()))


def records_of(batches: Iterable[MetadataBatch]) -> Iterator[RecordAndVersion]:
    """The metadata records of ``batches``, in log order (control records left out)."""
    for batch in batches:
        for entry in batch.entries:
            if entry.record is not None:
                yield entry.record
