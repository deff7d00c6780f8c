"""Kafka's LogValidator for magic-2 record batches: validate what a leader is asked to append
and assign its offsets, in memory (no I/O). :func:`validate_and_assign_offsets` returns what to
append or raises :class:`~odradek.protocol.records.InvalidRecordError` with Kafka's error code,
and, for per-record errors (KIP-467), the offending records' ``(batch_index, message)``.

Byte layout of the batches and records: :mod:`odradek.protocol.records`. What is checked, per
batch, in Kafka's order:

* framing, magic, CRC-32C (``records.validate_batches``; CORRUPT_MESSAGE), the batch's size
  against ``max.message.bytes`` (MESSAGE_TOO_LARGE) and the record set against
  ``segment.bytes`` (RECORD_LIST_TOO_LARGE);
* the header: recordCount > 0 and lastOffsetDelta = recordCount - 1 (INVALID_RECORD), no
  control batch from a client, a producer id with a sequence (INVALID_RECORD);
* the records, compressed or not: each record's fields lie inside it and add up to its length
  (CORRUPT_MESSAGE), offsetDelta of record i is i and the records are as many as the header
  says (INVALID_RECORD). A compressed batch is inflated with a hard output cap of
  ``max.message.bytes`` (streaming: the claimed size is never allocated) and refused with
  MESSAGE_TOO_LARGE past it. librdkafka, kafka-python and aiokafka bound a batch by its
  uncompressed size, so no batch they build is refused by this; Java producers bound
  ``batch.size`` by an estimate of the *compressed* size, so a Java batch of very compressible
  records can inflate past ``max.message.bytes`` and is refused here where Kafka (which
  re-reads records lazily) would take it;
* per record (KIP-467, record errors named by their index in the batch): a null key on a
  compacted topic (INVALID_RECORD, "Compacted topic cannot accept message without key ...");
  on a CreateTime topic, each record's timestamp (not only the batch's base and max) within
  [now - ``message.timestamp.before.max.ms``, now + ``message.timestamp.after.max.ms``]
  (INVALID_TIMESTAMP; KIP-937; records without a timestamp, -1, are not checked).

Then offsets are assigned in place (baseOffset, partitionLeaderEpoch; outside the CRC). On a
CreateTime topic the header's maxTimestamp is set to the records' largest timestamp when it
says otherwise (Kafka's ``setMaxTimestamp``, CRC recomputed); on a LogAppendTime topic the
timestamp type and maxTimestamp become the broker's (CRC recomputed).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

import crc32c as _crc32c

from odradek.log.config import MAX_LONG, LogConfig
from odradek.protocol.errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE,
)
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    COMPRESSION_NONE,
    CONTROL_FLAG,
    CRC_START,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    SCAN_OFFSET_DELTA,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidRecordError,
    inflate,
    record_infos,
    scan_records,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batches,
)

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

Buffer = bytearray | memoryview


@dataclass(frozen=True, slots=True)
class ValidationPolicy:
    """What a topic's config asks of the batches appended to it."""

    max_message_bytes: int = 1048588
    segment_bytes: int = 1 << 30
    compacted: bool = False
    log_append_time: bool = False
    timestamp_before_max_ms: int = MAX_LONG
    timestamp_after_max_ms: int = 3600000
    # walk uncompressed records (odradek.validate.records); compressed ones are always walked
    check_records: bool = True

    @classmethod
    def of(cls, cfg: LogConfig, *, check_records: bool = True) -> ValidationPolicy:
        return cls(
            cfg.max_message_bytes,
            cfg.segment_bytes,
            cfg.compact_enabled,
            cfg.log_append_time,
            cfg.message_timestamp_before_max_ms,
            cfg.message_timestamp_after_max_ms,
            check_records,
        )


class ValidationResult(NamedTuple):
    buffer: Buffer  # the batches to append, offsets assigned
    headers: list[BatchHeader]  # their headers as written
    last_offset: int
    max_timestamp: int
    record_count: int


class _Scan(NamedTuple):
    section: bytes | bytearray | memoryview  # the uncompressed records section
    start: int
    end: int
    lo_delta: int
    hi_delta: int
    first_null_key: int


class AppendOrigin(enum.Enum):
    """Who appends to a leader's log (Kafka's AppendOrigin): a client's Produce is validated in full;
    a coordinator (groups, transactions, the share coordinator) may write control batches (transaction
    markers) and its batches skip the idempotent-duplicate check. REPLICATION (a follower copying its
    leader) goes through ``Log.append_as_follower`` instead."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def validate_and_assign_offsets(
    records: bytes | bytearray | memoryview,
    *,
    first_offset: int,
    leader_epoch: int,
    now_ms: int,
    policy: ValidationPolicy,
    partition: str,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    headers: Sequence[BatchHeader] | None = None,
) -> ValidationResult:
    """Validate ``records`` for a leader's append and assign offsets from ``first_offset``.

    ``records`` is rewritten in place when writable (a bytearray or writable memoryview), else
    copied once. ``headers`` may come from an earlier ``validate_batches(records)`` (framing
    and CRC already checked). ``origin`` COORDINATOR allows control batches.
    """
    from_client = origin is AppendOrigin.CLIENT
    if headers is None:
        headers = validate_batches(records, max_batch_bytes=policy.max_message_bytes, check_records=False)
    if not headers:
        raise InvalidRecordError(CORRUPT_MESSAGE, "empty record set")
    if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
        buf: Buffer = records
    else:
        buf = bytearray(records)
    total = len(buf)
    if total > policy.segment_bytes:
        raise InvalidRecordError(
            RECORD_LIST_TOO_LARGE, f"record set of {total} bytes exceeds segment.bytes {policy.segment_bytes}"
        )
    create_time = not policy.log_append_time
    earliest = now_ms - policy.timestamp_before_max_ms
    latest = now_ms + policy.timestamp_after_max_ms
    check_ts = create_time and (policy.timestamp_before_max_ms < MAX_LONG or policy.timestamp_after_max_ms < MAX_LONG)
    offset = first_offset
    pos = 0
    max_ts = -1
    count = 0
    max_bytes = policy.max_message_bytes
    compacted = policy.compacted
    walk_plain = policy.check_records
    out: list[BatchHeader] = []
    make = BatchHeader._make
    for h in headers:
        size = h.batch_length + LOG_OVERHEAD
        n = h.record_count
        if (
            size > max_bytes
            or n <= 0
            or h.last_offset_delta != n - 1
            or (from_client and (h.attributes & CONTROL_FLAG or (h.producer_id >= 0 and h.base_sequence < 0)))
        ):
            _validate_header(h, size, policy, from_client)  # raises
        walked = True
        if h.attributes & COMPRESSION_MASK == COMPRESSION_NONE:  # the hot path, inline
            if walk_plain:
                res = scan_records(buf, pos + BATCH_HEADER_SIZE, pos + size)
                if res.__class__ is not tuple or res[0] != n:
                    _scan_error(res, h)  # raises
                _n, lo, hi, keyless = res
            else:
                walked = False
        else:
            section, lo, hi, keyless = _scan_compressed(buf, pos, size, h, max_bytes)
        if walked:
            base = h.base_timestamp
            if (compacted and keyless >= 0 and not h.attributes & CONTROL_FLAG) or (
                check_ts and (base + lo < earliest or base + hi > latest)
            ):
                scan = (
                    _Scan(buf, pos + BATCH_HEADER_SIZE, pos + size, lo, hi, keyless)
                    if h.attributes & COMPRESSION_MASK == COMPRESSION_NONE
                    else _Scan(section, 0, len(section), lo, hi, keyless)
                )
                _validate_records(h, scan, policy, partition, check_ts, earliest, latest)  # raises
            if create_time and base != NO_TIMESTAMP:
                real_max = base + hi
                if real_max != h.max_timestamp:  # Kafka's setMaxTimestamp: the header tells the truth
                    _I64.pack_into(buf, pos + 35, real_max)
                    crc = _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])
                    _U32.pack_into(buf, pos + 17, crc)
                    h = h._replace(max_timestamp=real_max, crc=crc)
        elif (  # records not walked: the header's bounds
            check_ts
            and h.base_timestamp != NO_TIMESTAMP
            and (h.max_timestamp > latest or min(h.base_timestamp, h.max_timestamp) < earliest)
        ):
            raise InvalidRecordError(
                INVALID_TIMESTAMP,
                f"batch timestamps [{h.base_timestamp}, {h.max_timestamp}] are outside the allowed range "
                f"[{earliest}, {latest}]",
            )
        set_base_offset(buf, pos, offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        if policy.log_append_time:
            attrs = h.attributes | TIMESTAMP_TYPE_MASK
            _I16.pack_into(buf, pos + 21, attrs)
            _I64.pack_into(buf, pos + 35, now_ms)
            crc = _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])
            _U32.pack_into(buf, pos + 17, crc)
            h = h._replace(
                base_offset=offset, partition_leader_epoch=leader_epoch, attributes=attrs,
                max_timestamp=now_ms, crc=crc,
            )
        else:
            h = make((offset, h[1], leader_epoch, *h[3:]))
        if h.max_timestamp > max_ts:
            max_ts = h.max_timestamp
        out.append(h)
        offset += h.last_offset_delta + 1
        count += n
        pos += size
    if pos != total:
        raise InvalidRecordError(CORRUPT_MESSAGE, "headers do not describe the whole record set")
    return ValidationResult(buf, out, offset - 1, max_ts, count)


def _validate_header(h: BatchHeader, size: int, policy: ValidationPolicy, from_client: bool) -> None:
    """Kafka's LogValidator.validateBatch (and the size check of UnifiedLog.analyzeAndValidateRecords)."""
    if size > policy.max_message_bytes:
        raise InvalidRecordError(
            MESSAGE_TOO_LARGE, f"batch of {size} bytes exceeds max.message.bytes {policy.max_message_bytes}"
        )
    if h.record_count <= 0:
        raise InvalidRecordError(INVALID_RECORD, f"Invalid reported count for record batch: {h.record_count}")
    if h.last_offset_delta != h.record_count - 1:
        raise InvalidRecordError(
            INVALID_RECORD,
            f"Inconsistent batch offset range [0, {h.last_offset_delta}] and record count {h.record_count}",
        )
    if from_client:
        if h.is_control:
            raise InvalidRecordError(INVALID_RECORD, "Clients are not allowed to write control records")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecordError(
                INVALID_RECORD,
                f"Invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id}",
            )


def _scan_error(res: tuple[int, int, int, int] | int, h: BatchHeader) -> NoReturn:
    if isinstance(res, tuple):
        raise InvalidRecordError(
            INVALID_RECORD, f"the batch holds {res[0]} records where its header says {h.record_count}"
        )
    if res == SCAN_OFFSET_DELTA:
        raise InvalidRecordError(INVALID_RECORD, "record offset deltas are not 0 .. recordCount - 1")
    raise InvalidRecordError(CORRUPT_MESSAGE, "Found invalid record structure in the batch")


def _scan_compressed(
    buf: Buffer, pos: int, size: int, h: BatchHeader, max_bytes: int
) -> tuple[bytes, int, int, int]:
    """Inflate the batch's records (streaming, at most ``max_bytes``) and walk them:
    (inflated records, min timestampDelta, max timestampDelta, first null key)."""
    try:
        section = inflate(h.compression, memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + size], max_bytes)
    except InvalidRecordError as e:
        if e.error_code == MESSAGE_TOO_LARGE:
            raise InvalidRecordError(
                MESSAGE_TOO_LARGE, f"the records of the batch inflate past max.message.bytes {max_bytes}"
            ) from None
        raise
    res = scan_records(section, 0, len(section))
    if not isinstance(res, tuple) or res[0] != h.record_count:
        _scan_error(res, h)
    return section, res[1], res[2], res[3]


def _validate_records(
    h: BatchHeader,
    scan: _Scan,
    policy: ValidationPolicy,
    partition: str,
    check_ts: bool,
    earliest: int,
    latest: int,
) -> None:
    """Per-record checks (LogValidator.validateRecord); the records are enumerated only when the
    walk's summary shows an offender."""
    keyless = policy.compacted and not h.is_control and scan.first_null_key >= 0
    base = h.base_timestamp
    bad_ts = check_ts and (base + scan.lo_delta < earliest or base + scan.hi_delta > latest)
    if not keyless and not bad_ts:
        return
    errors: list[tuple[int, str]] = []
    ts_error = False
    for r in record_infos(scan.section, scan.start, scan.end):
        if keyless and r.null_key:
            errors.append(
                (r.batch_index, f"Compacted topic cannot accept message without key in topic partition {partition}.")
            )
        ts = base + r.timestamp_delta
        if bad_ts and ts != NO_TIMESTAMP and not earliest <= ts <= latest:
            ts_error = True
            errors.append((
                r.batch_index,
                f"Timestamp {ts} of message with offset {h.base_offset + r.offset_delta} is out of range. "
                f"The timestamp should be within [{earliest}, {latest}]",
            ))
    if not errors:
        return
    if ts_error:
        raise InvalidRecordError(
            INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", errors
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise InvalidRecordError(
        INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        errors,
    )
