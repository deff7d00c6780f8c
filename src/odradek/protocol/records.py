"""Record batch v2 (magic 2): header parsing, framing checks, the record walk, bounded
inflation, and a small builder.

On the produce path the broker parses the fixed 61-byte header, checks the CRC-32C, walks
the records field by field without copying them (:func:`scan_records`, in C) and rewrites
``baseOffset`` and ``partitionLeaderEpoch`` (both outside the CRC); what is checked and
refused is :mod:`odradek.log.validator`. Compressed records are inflated only through
:func:`iter_inflate` / :func:`inflate`, which stream with a hard output cap (a batch's
claimed sizes are never allocated), on the produce path and on every read path alike.

Byte layout of one batch (big-endian)::

    offset  size  field
    0       8     baseOffset              int64
    8       4     batchLength             int32   bytes after this field
    12      4     partitionLeaderEpoch    int32
    16      1     magic                   int8    must be 2
    17      4     crc                     uint32  CRC-32C of bytes [21, end)
    21      2     attributes              int16   bits 0-2 compression, 3 timestamp type,
                                                  4 transactional, 5 control, 6 delete horizon
    23      4     lastOffsetDelta         int32
    27      8     baseTimestamp           int64   (firstTimestamp)
    35      8     maxTimestamp            int64
    43      8     producerId              int64
    51      2     producerEpoch           int16
    53      4     baseSequence            int32
    57      4     recordCount             int32
    61      ...   records                 (compressed as a whole when compression != 0)

Each record (uncompressed; Kafka's DefaultRecord)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value, headerCount varint,
    headers [keyLength varint, key, valueLength varint, value]

(varint / varlong: zig-zag signed varints of at most 5 / 10 bytes, read and written by
:mod:`odradek.protocol.varint`)

One concept in one file (over 600 lines): the v2 record batch, its header, framing checks, record walk and builder.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import crc32c as _crc32c

from odradek.protocol.errors import (  # validation's codes, from the one table
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
)
from odradek.protocol.varint import VARLONG_MAX_BYTES, VarintError, encode_varint, read_varint

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


INFLATE_CHUNK = 256 * 1024  # bytes inflated per step
READ_INFLATE_LIMIT = 64 << 20  # floor of the inflated-size bound on read paths (read_inflate_limit)
ZSTD_MAX_WINDOW = 1 << 27


class InvalidRecordError(Exception):
    """A produced batch failed validation; ``error_code`` is Kafka's error code."""

    def __init__(
        self, error_code: int, message: str, record_errors: Sequence[tuple[int, str]] = ()
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        # KIP-467: (batch_index, message) of each offending record, for the Produce response
        self.record_errors: tuple[tuple[int, str], ...] = tuple(record_errors)


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total size of the batch in bytes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return _crc32c.crc32c(data)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; the caller guarantees 61 bytes are there."""
    return BatchHeader._make(BATCH_HEADER.unpack_from(buf, pos))


def _walk_uncompressed(buf: bytes | bytearray | memoryview, start: int, end: int) -> int:
    """Count records in an uncompressed records section, checking lengths add up.

    Each record starts with its zig-zag varint length; the common 1- and 2-byte lengths are
    decoded inline (this loop runs once per record on the produce path when the C walk is not
    built), longer ones by :func:`~odradek.protocol.varint.read_varint`.
    """
    count = 0
    pos = start
    try:
        while pos < end:
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif pos + 1 < end and buf[pos + 1] < 0x80:
                raw = (b & 0x7F) | (buf[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = read_varint(buf, pos, end)
            if length <= 0:
                return -1
            pos += length
            count += 1
    except VarintError:
        return -1
    return count if pos == end else -1


SCAN_MALFORMED = -1  # scan_records: a record's fields do not add up to its length
SCAN_OFFSET_DELTA = -2  # scan_records: record i's offsetDelta is not i


def _scan_uncompressed(
    buf: bytes | bytearray | memoryview, start: int, end: int, check_offsets: bool = True
) -> tuple[int, int, int, int] | int:
    """Walk an uncompressed records section field by field (Kafka's DefaultRecord.readFrom).

    Returns ``(count, min timestampDelta, max timestampDelta, index of the first record with a
    null key or -1)``, or :data:`SCAN_MALFORMED` (a length or count out of bounds, fields not
    adding up to the record's length, a negative header key length) or
    :data:`SCAN_OFFSET_DELTA` (record i's offsetDelta is not i; checked only with
    ``check_offsets``: a batch the cleaner rewrote keeps its records' original offsetDeltas,
    and its lastOffsetDelta). The C ``scan_records`` has the
    same contract; an empty section gives ``(0, 0, 0, -1)``.
    """
    count = 0
    lo = hi = 0
    keyless = -1
    pos = start
    try:
        while pos < end:
            length, pos = read_varint(buf, pos, end)
            if length <= 0 or length > end - pos:
                return SCAN_MALFORMED
            rec_end = pos + length
            pos += 1  # attributes
            ts_delta, pos = read_varint(buf, pos, rec_end, VARLONG_MAX_BYTES)
            off_delta, pos = read_varint(buf, pos, rec_end)
            if check_offsets and off_delta != count:
                return SCAN_OFFSET_DELTA
            n, pos = read_varint(buf, pos, rec_end)  # key
            if n < -1 or n > rec_end - pos:
                return SCAN_MALFORMED
            if n < 0:
                if keyless < 0:
                    keyless = count
            else:
                pos += n
            n, pos = read_varint(buf, pos, rec_end)  # value
            if n < -1 or n > rec_end - pos:
                return SCAN_MALFORMED
            pos += max(n, 0)
            headers, pos = read_varint(buf, pos, rec_end)
            if headers < 0:
                return SCAN_MALFORMED
            for _ in range(headers):
                n, pos = read_varint(buf, pos, rec_end)
                if n < 0 or n > rec_end - pos:
                    return SCAN_MALFORMED
                pos += n
                n, pos = read_varint(buf, pos, rec_end)
                if n < -1 or n > rec_end - pos:
                    return SCAN_MALFORMED
                pos += max(n, 0)
            if pos != rec_end:
                return SCAN_MALFORMED
            if count == 0:
                lo = hi = ts_delta
            elif ts_delta < lo:
                lo = ts_delta
            elif ts_delta > hi:
                hi = ts_delta
            count += 1
    except (ValueError, IndexError):
        return SCAN_MALFORMED
    return count, lo, hi, keyless


try:  # the C walks (src/odradek/_speedups.c), ~30x faster; same contracts
    from odradek._speedups import count_records as _count_records
    from odradek._speedups import scan_records as scan_records  # re-exported: log/validator.py calls it
except ImportError:  # pragma: no cover - not built
    _count_records = _walk_uncompressed
    scan_records = _scan_uncompressed


class RecordInfo(NamedTuple):
    """What validation needs of one record beyond :func:`scan_records`' summary."""

    batch_index: int
    timestamp_delta: int
    offset_delta: int
    null_key: bool


def record_infos(data: bytes | bytearray | memoryview, start: int = 0, end: int | None = None) -> list[RecordInfo]:
    """Every record of a records section that :func:`scan_records` accepted (the error path:
    naming the offending records). Keys and values are skipped, not copied."""
    stop = len(data) if end is None else end
    out: list[RecordInfo] = []
    pos = start
    while pos < stop:
        length, body = read_varint(data, pos, stop)
        ts_delta, p = read_varint(data, body + 1, body + length, VARLONG_MAX_BYTES)
        off_delta, p = read_varint(data, p, body + length)
        klen, _ = read_varint(data, p, body + length)
        out.append(RecordInfo(len(out), ts_delta, off_delta, klen < 0))
        pos = body + length
    return out


def validate_batches(
    buf: bytes | bytearray | memoryview,
    *,
    max_batch_bytes: int | None = None,
    check_records: bool = True,
) -> list[BatchHeader]:
    """Validate every batch in a produced ``records`` blob and return their headers.

    Checks: framing (lengths fit exactly), magic 2, CRC-32C, recordCount vs
    lastOffsetDelta, compression codec known, and, for uncompressed batches when
    ``check_records`` is set, that the record lengths add up to recordCount records.
    Raises :class:`InvalidRecordError` with Kafka's error code.
    """
    view = memoryview(buf)
    raw = buf if isinstance(buf, (bytes, bytearray)) else view  # indexing bytes is faster
    total = len(view)
    if total == 0:
        raise InvalidRecordError(CORRUPT_MESSAGE, "empty record set")
    headers: list[BatchHeader] = []
    pos = 0
    unpack = BATCH_HEADER.unpack_from
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated record batch header")
        h = BatchHeader._make(unpack(view, pos))
        if h.magic != MAGIC_V2:
            raise InvalidRecordError(
                UNSUPPORTED_FOR_MESSAGE_FORMAT, f"unsupported record batch magic {h.magic}"
            )
        size = h.batch_length + LOG_OVERHEAD
        if h.batch_length < MIN_BATCH_LENGTH or pos + size > total:
            raise InvalidRecordError(CORRUPT_MESSAGE, "record batch length out of bounds")
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise InvalidRecordError(
                MESSAGE_TOO_LARGE,
                f"record batch of {size} bytes exceeds the maximum of {max_batch_bytes}",
            )
        if _crc32c.crc32c(view[pos + CRC_START : pos + size]) != h.crc:
            raise InvalidRecordError(CORRUPT_MESSAGE, "record batch CRC mismatch")
        if h.record_count <= 0 or h.last_offset_delta != h.record_count - 1:
            raise InvalidRecordError(
                INVALID_RECORD,
                f"record count {h.record_count} does not match last offset delta {h.last_offset_delta}",
            )
        codec = h.attributes & COMPRESSION_MASK
        if codec > COMPRESSION_ZSTD:
            raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
        if (
            check_records
            and codec == COMPRESSION_NONE
            and _count_records(raw, pos + BATCH_HEADER_SIZE, pos + size) != h.record_count
        ):
            raise InvalidRecordError(INVALID_RECORD, "record count does not match the records in the batch")
        headers.append(h)
        pos += size
    return headers




def complete_batches_length(buf: bytes | bytearray | memoryview) -> int:
    """How many leading bytes of a fetched record set are whole batches: a fetch response
    may end with the first part of a batch that did not fit (clients drop it)."""
    pos, n = 0, len(buf)
    while pos + LOG_OVERHEAD <= n:
        size = LOG_OVERHEAD + int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        if size <= LOG_OVERHEAD or pos + size > n:
            break
        pos += size
    return pos


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch, stopping at the first
    one that does not frame correctly. No CRC check (see :func:`valid_prefix`)."""
    view = memoryview(buf)
    total = len(view)
    while total - pos >= BATCH_HEADER_SIZE:
        h = BatchHeader._make(BATCH_HEADER.unpack_from(view, pos))
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.batch_length + LOG_OVERHEAD > total:
            return
        yield pos, h
        pos += h.batch_length + LOG_OVERHEAD


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    view = memoryview(buf)
    return _crc32c.crc32c(view[pos + CRC_START : pos + header.size]) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _I32.pack_into(buf, pos + 12, epoch)


# ---------------------------------------------------------------------------
# builder (tests, control batches, internal topics)


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _encode_bytes(b: bytes | None) -> bytes:
    if b is None:
        return encode_varint(-1)
    return encode_varint(len(b)) + b


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _encode_bytes(key)
    body += _encode_bytes(value)
    body += encode_varint(len(headers))
    for hk, hv in headers:
        body += _encode_bytes(hk.encode())
        body += _encode_bytes(hv)
    return encode_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[tuple[Any, ...]],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    timestamps: Sequence[int] | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    compression: int = COMPRESSION_NONE,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = 0,
) -> bytes:
    """Build one v2 batch (uncompressed or gzip) from ``(key, value[, headers])`` tuples."""
    if not records:
        raise ValueError("a batch needs at least one record")
    ts_list = list(timestamps) if timestamps is not None else [timestamp] * len(records)
    base_ts = ts_list[0]
    body = bytearray()
    for i, rec in enumerate(records):
        key, value = rec[0], rec[1]
        hdrs = rec[2] if len(rec) > 2 else ()
        body += encode_record(i, ts_list[i] - base_ts, key, value, hdrs)
    payload = bytes(body)
    if compression == COMPRESSION_GZIP:
        payload = gzip.compress(payload)
    elif compression != COMPRESSION_NONE:
        raise ValueError("build_batch supports only none and gzip")
    attributes = compression
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        base_ts,
        max(ts_list),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + payload
    crc = _crc32c.crc32c(after_crc)
    batch_length = len(after_crc) + 4 + 1 + 4  # crc + magic + partitionLeaderEpoch
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC_V2, crc) + after_crc


def decode_records(batch: bytes | bytearray | memoryview, limit: int = READ_INFLATE_LIMIT) -> list[Record]:
    """Decode the records of one batch (any codec; inflated to at most ``limit`` bytes). Not
    for the produce/fetch path. Raises :class:`InvalidRecordError` (CORRUPT_MESSAGE,
    MESSAGE_TOO_LARGE) when the records do not decode or do not match the header."""
    h = read_header(batch)
    data = inflate(h.compression, memoryview(batch)[BATCH_HEADER_SIZE : h.size], limit)
    scan = scan_records(data, 0, len(data), False)
    if not isinstance(scan, tuple) or scan[0] != h.record_count:
        raise InvalidRecordError(CORRUPT_MESSAGE, f"malformed records in the batch at offset {h.base_offset}")
    out: list[Record] = []
    pos = 0
    view = memoryview(data)
    for _ in range(h.record_count):
        length, pos = read_varint(view, pos, len(view))
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = read_varint(view, pos, end, VARLONG_MAX_BYTES)
        off_delta, pos = read_varint(view, pos, end)
        klen, pos = read_varint(view, pos, end)
        key = None if klen < 0 else bytes(view[pos : pos + klen])
        pos += max(klen, 0)
        vlen, pos = read_varint(view, pos, end)
        value = None if vlen < 0 else bytes(view[pos : pos + vlen])
        pos += max(vlen, 0)
        nh, pos = read_varint(view, pos, end)
        hdrs = []
        for _ in range(nh):
            hkl, pos = read_varint(view, pos, end)
            hk = bytes(view[pos : pos + hkl]).decode()
            pos += hkl
            hvl, pos = read_varint(view, pos, end)
            hv = None if hvl < 0 else bytes(view[pos : pos + hvl])
            pos += max(hvl, 0)
            hdrs.append((hk, hv))
        out.append(Record(h.base_offset + off_delta, h.base_timestamp + ts_delta, key, value, tuple(hdrs)))
        pos = end
    return out


def iter_inflate(
    codec: int, data: bytes | bytearray | memoryview, limit: int, chunk: int = INFLATE_CHUNK
) -> Iterator[bytes]:
    """Inflate a batch's records section as a stream of chunks, at most ``limit`` bytes in all.

    Kafka's framings: gzip (RFC 1952, members back to back), snappy (xerial framing as the Java
    client writes it, or one raw block as librdkafka writes it), LZ4 frame, zstd frame(s).
    Output is produced ``chunk`` bytes at a time and never allocated from what the data claims:
    a snappy block announces its inflated length and is refused before it is inflated when that
    would pass the limit; the other codecs stop as soon as one byte past the limit comes out.
    Raises :class:`InvalidRecordError` with MESSAGE_TOO_LARGE past the limit, CORRUPT_MESSAGE
    when the data does not decode.
    """
    if codec == COMPRESSION_NONE:
        if len(data) > limit:
            raise _too_large(limit)
        yield bytes(data)
        return
    try:
        if codec == COMPRESSION_GZIP:
            yield from _inflate_gzip(data, limit, chunk)
        elif codec == COMPRESSION_SNAPPY:
            yield from _inflate_snappy(data, limit)
        elif codec == COMPRESSION_LZ4:
            yield from _inflate_lz4(data, limit, chunk)
        elif codec == COMPRESSION_ZSTD:
            yield from _inflate_zstd(data, limit, chunk)
        else:
            raise InvalidRecordError(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
    except InvalidRecordError:
        raise
    except Exception as e:  # zlib.error, lz4's RuntimeError, ZstdError, cramjam's DecompressionError
        raise InvalidRecordError(CORRUPT_MESSAGE, f"compressed records do not decode: {e}") from None


def inflate(codec: int, data: bytes | bytearray | memoryview, limit: int) -> bytes:
    """The whole inflated records section (at most ``limit`` bytes; see :func:`iter_inflate`)."""
    if codec == COMPRESSION_NONE:
        if len(data) > limit:
            raise _too_large(limit)
        return bytes(data)
    parts = list(iter_inflate(codec, data, limit))
    return parts[0] if len(parts) == 1 else b"".join(parts)


def record_times(batch: bytes | bytearray | memoryview, limit: int = READ_INFLATE_LIMIT) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of one stored batch, its records inflated to at most
    ``limit`` bytes, keys and values skipped (ListOffsets by timestamp). Raises
    :class:`InvalidRecordError` when the records inflate past the limit or do not decode."""
    h = read_header(batch)
    data = inflate(h.compression, memoryview(batch)[BATCH_HEADER_SIZE : h.size], limit)
    scan = scan_records(data, 0, len(data), False)
    if not isinstance(scan, tuple) or scan[0] != h.record_count:
        raise InvalidRecordError(CORRUPT_MESSAGE, f"malformed records in the batch at offset {h.base_offset}")
    return [(h.base_offset + r.offset_delta, h.base_timestamp + r.timestamp_delta) for r in record_infos(data)]


def decompress(codec: int, data: bytes | bytearray | memoryview, limit: int = READ_INFLATE_LIMIT) -> bytes:
    """Bounded inflation for read paths (the cleaner, ListOffsets, replays): :func:`inflate`."""
    return inflate(codec, data, limit)


def read_inflate_limit(max_message_bytes: int) -> int:
    """The inflated-size bound for batches already in a log: what produce validation let in
    (``max.message.bytes``, which may have been larger when they were written), at least
    :data:`READ_INFLATE_LIMIT`."""
    return max(max_message_bytes, READ_INFLATE_LIMIT)


def _too_large(limit: int) -> InvalidRecordError:
    return InvalidRecordError(MESSAGE_TOO_LARGE, f"records inflate past the limit of {limit} bytes")


def _inflate_gzip(data: bytes | bytearray | memoryview, limit: int, chunk: int) -> Iterator[bytes]:
    total = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    tail: bytes | bytearray | memoryview = data
    while True:
        out = d.decompress(tail, min(chunk, limit - total + 1))
        tail = d.unconsumed_tail
        if out:
            total += len(out)
            if total > limit:
                raise _too_large(limit)
            yield out
        if d.eof:
            rest = d.unused_data
            if rest[:2] == b"\x1f\x8b":  # another member
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                tail = rest
                continue
            return
        if not out and not tail:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated gzip stream")


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_blocks(data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        yield view  # one raw block (librdkafka)
        return
    pos, n = 16, len(view)  # xerial framing: 16-byte header, then (int32 length, raw block)*
    while pos < n:
        if pos + 4 > n:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated xerial snappy block length")
        size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        if size < 0 or pos + 4 + size > n:
            raise InvalidRecordError(CORRUPT_MESSAGE, "xerial snappy block length out of bounds")
        yield view[pos + 4 : pos + 4 + size]
        pos += 4 + size


def _inflate_snappy(data: bytes | bytearray | memoryview, limit: int) -> Iterator[bytes]:
    import cramjam

    total = 0
    for block in _snappy_blocks(data):
        raw = bytes(block)
        total += cramjam.snappy.decompress_raw_len(raw)  # the block's own claim, checked first
        if total > limit:
            raise _too_large(limit)
        yield bytes(cramjam.snappy.decompress_raw(raw))


def _inflate_lz4(data: bytes | bytearray | memoryview, limit: int, chunk: int) -> Iterator[bytes]:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    total = 0
    src: bytes = bytes(data)
    while not d.eof:
        out = d.decompress(src, max_length=min(chunk, limit - total + 1))
        src = b""
        if out:
            total += len(out)
            if total > limit:
                raise _too_large(limit)
            yield out
        elif d.needs_input:
            raise InvalidRecordError(CORRUPT_MESSAGE, "truncated lz4 frame")


def _inflate_zstd(data: bytes | bytearray | memoryview, limit: int, chunk: int) -> Iterator[bytes]:
    import zstandard

    # a frame's window is allocated up front: at most 2^27 bytes (zstd's default limit)
    reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).stream_reader(
        data, read_across_frames=True
    )
    total = 0
    while True:
        out = reader.read(min(chunk, limit - total + 1))
        if not out:
            return
        total += len(out)
        if total > limit:
            raise _too_large(limit)
        yield out
