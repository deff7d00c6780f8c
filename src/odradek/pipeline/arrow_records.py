"""Fetched record batches → Arrow record batches in Spark's Kafka-source layout, without a Python
object per record.

The records of uncompressed v2 batches are walked in C (``odradek._speedups.batches_to_columns``),
which returns the buffers of the key, value, offset, timestamp and timestampType columns; here they
become Arrow arrays with ``pa.Array.from_buffers`` (no copy), next to the constant ``topic`` and
``partition`` columns built with numpy. A compressed batch is inflated (bounded, as on every read
path: :func:`odradek.protocol.records.decompress`) and its records section decoded by
``records_to_columns``. Control batches are skipped. With ``read_committed`` the records of aborted
transactions are dropped as Kafka's consumer does (``Fetcher``/``CompletedFetch``): a transactional
batch whose producer has an aborted transaction starting at or before the batch's last offset is
skipped, until that producer's ABORT marker.

Fetched bytes are not trusted. With ``check_crcs`` (the source's ``kafka.check.crcs``, on unless set to
false, as the Java consumer's ``check.crcs`` and the Spark Kafka source that hands it on) every batch's
CRC-32C (bytes 21 to the batch's end) is checked before anything of it is read: in C for the batches
the C walk reads, here for the compressed ones and, with aborted transactions in view, for every batch
(control batches included). A mismatch raises :class:`CorruptRecordException` (Kafka's
``CorruptRecordException``) naming the topic, partition and the batch's base offset; a batch or record
that does not parse raises :class:`MalformedRecords`. Neither is ever skipped or turned into rows.

Record batch v2 layout: :mod:`odradek.protocol.records`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from odradek.protocol import records as rec

try:
    from odradek import _speedups as _c

    AVAILABLE = hasattr(_c, "batches_to_columns")
except ImportError:  # pragma: no cover - the C extension is optional
    _c = None
    AVAILABLE = False


class MalformedRecords(ValueError):
    """A fetched batch or record does not parse; ``offset`` is the batch's base offset (-1: unknown)."""

    def __init__(self, message: str, topic: str = "", partition: int = -1, offset: int = -1) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class CorruptRecordException(MalformedRecords):
    """A fetched batch's stored CRC-32C does not match its bytes (Kafka's ``CorruptRecordException``)."""


def _corrupt(topic: str, partition: int, base_offset: int, position: int, stored: int,
             computed: int) -> CorruptRecordException:
    return CorruptRecordException(
        f"{topic}-{partition}: the record batch at offset {base_offset} (byte {position} of the fetched record set) "
        f"is corrupt: stored CRC-32C {stored:#010x}, computed {computed:#010x} (kafka.check.crcs)",
        topic, partition, base_offset)


def _malformed(topic: str, partition: int, base_offset: int, why: str) -> MalformedRecords:
    return MalformedRecords(f"{topic}-{partition}: the record batch at offset {base_offset} is malformed: {why}",
                            topic, partition, base_offset)


def _check_length(h: rec.BatchHeader, topic: str, partition: int) -> None:
    """A batchLength below the v2 header's is corrupt (Kafka's consumer refuses it), not an incomplete batch."""
    if h.batch_length < rec.MIN_BATCH_LENGTH:
        raise _malformed(topic, partition, h.base_offset, f"batchLength {h.batch_length} is below the v2 header's")


def _check_crc(buf: memoryview, pos: int, h: rec.BatchHeader, topic: str, partition: int) -> None:
    if not rec.batch_crc_ok(buf, pos, h):
        computed = rec.crc32c(buf[pos + rec.CRC_START : pos + h.size])
        raise _corrupt(topic, partition, h.base_offset, pos, h.crc, computed)


def _batches_to_columns(topic: str, partition: int, buf: memoryview, start: int, end: int, lo: int, hi: int,
                        check_crcs: bool) -> tuple[Any, ...]:
    """``_speedups.batches_to_columns``, its errors as this module's (naming topic, partition, offset)."""
    assert _c is not None
    try:
        result: tuple[Any, ...] = _c.batches_to_columns(buf, start, end, lo, hi, check_crcs)
    except _c.CorruptRecordError as e:
        _msg, base_offset, position, stored, computed = e.args
        raise _corrupt(topic, partition, base_offset, position, stored, computed) from None
    except _c.MalformedRecordError as e:
        why, base_offset, position = e.args
        raise _malformed(topic, partition, base_offset, f"{why} (byte {position} of the fetched record set)") from None
    return result


@dataclass
class Decoded:
    """Arrow batches of one fetched record set and the offset to fetch next (-1: no batch was whole)."""

    batches: list[pa.RecordBatch] = field(default_factory=list)
    next_offset: int = -1


@dataclass
class AbortFilter:
    """Kafka's read_committed filter over one partition's batches, fed the fetch response's
    ``aborted_transactions`` (producer id, first offset)."""

    pending: list[tuple[int, int]] = field(default_factory=list)  # heap of (first_offset, producer_id)
    aborted: set[int] = field(default_factory=set)

    def add(self, aborted_transactions: Iterable[tuple[int, int]] | None) -> None:
        """``(producer_id, first_offset)`` pairs, as the fetch response lists them."""
        for producer_id, first_offset in aborted_transactions or ():
            heapq.heappush(self.pending, (int(first_offset), int(producer_id)))

    @property
    def idle(self) -> bool:
        return not self.pending and not self.aborted

    def keep(self, buf: memoryview, pos: int, h: rec.BatchHeader) -> bool:
        """Whether the batch at ``pos`` holds records a read_committed consumer returns."""
        if h.is_transactional:
            while self.pending and self.pending[0][0] <= h.last_offset:
                self.aborted.add(heapq.heappop(self.pending)[1])
            if h.is_control:
                if h.producer_id in self.aborted and _control_type(buf, pos, h) == 0:  # ABORT marker
                    self.aborted.discard(h.producer_id)
                return False
            return h.producer_id not in self.aborted
        return not h.is_control


def _control_type(buf: memoryview, pos: int, h: rec.BatchHeader) -> int:
    """The control record's type (0 ABORT, 1 COMMIT) from its key: version int16, type int16."""
    records = rec.decode_records(buf[pos : pos + h.size])
    key = records[0].key if records else None
    return int.from_bytes(key[2:4], "big", signed=True) if key and len(key) >= 4 else -1


def _batch(schema: pa.Schema, topic: bytes, partition: int, n: int, cols: tuple[Any, ...]) -> pa.RecordBatch:
    kv, ko, kd, vv, vo, vd, offs, ts, tt = cols
    tdata = pa.py_buffer(topic * n)
    toffs = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * len(topic)).tobytes())
    f = schema.field
    arrays = [
        pa.Array.from_buffers(f("key").type, n, [pa.py_buffer(kv) if kv is not None else None, pa.py_buffer(ko),
                                                pa.py_buffer(kd)]),
        pa.Array.from_buffers(f("value").type, n, [pa.py_buffer(vv) if vv is not None else None, pa.py_buffer(vo),
                                                  pa.py_buffer(vd)]),
        pa.Array.from_buffers(f("topic").type, n, [None, toffs, tdata]),
        pa.Array.from_buffers(f("partition").type, n, [None, pa.py_buffer(np.full(n, partition, np.int32).tobytes())]),
        pa.Array.from_buffers(f("offset").type, n, [None, pa.py_buffer(offs)]),
        pa.Array.from_buffers(f("timestamp").type, n, [None, pa.py_buffer(ts)]),
        pa.Array.from_buffers(f("timestampType").type, n, [None, pa.py_buffer(tt)]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def decode(schema: pa.Schema, topic: str, partition: int, data: bytes | memoryview, lo: int, hi: int,
           filt: AbortFilter | None = None, inflate_limit: int = rec.READ_INFLATE_LIMIT,
           check_crcs: bool = True) -> Decoded:
    """The records of ``data`` (a fetch response's record set) with ``lo <= offset < hi``. Raises
    :class:`CorruptRecordException` (CRC-32C mismatch, with ``check_crcs``) or :class:`MalformedRecords`."""
    assert _c is not None
    buf = memoryview(data)
    tname = topic.encode()
    out = Decoded()
    pos, end = 0, len(buf)

    def add(n: int, cols: tuple[Any, ...]) -> None:
        if n:
            out.batches.append(_batch(schema, tname, partition, n, cols))

    while pos < end:
        if filt is None or filt.idle:
            n, stop, nxt, cols = _batches_to_columns(topic, partition, buf, pos, end, lo, hi, check_crcs)
            add(n, cols)
            if nxt >= 0:
                out.next_offset = nxt
            pos = stop
            if end - pos < rec.BATCH_HEADER_SIZE:
                break
            h = rec.read_header(buf, pos)
            _check_length(h, topic, partition)
            if pos + h.size > end:
                break  # an incomplete batch at the end of the response
            if check_crcs:
                _check_crc(buf, pos, h, topic, partition)
            pos = _compressed(topic, partition, buf, pos, h, lo, hi, add, inflate_limit)  # where the C walk stopped
            out.next_offset = h.next_offset
            continue
        # read_committed with aborted transactions in view: batch by batch
        if end - pos < rec.BATCH_HEADER_SIZE:
            break
        h = rec.read_header(buf, pos)
        _check_length(h, topic, partition)
        if pos + h.size > end:
            break
        if h.magic != rec.MAGIC_V2:
            raise _malformed(topic, partition, h.base_offset, f"magic {h.magic}")
        if check_crcs:
            _check_crc(buf, pos, h, topic, partition)  # before the filter reads a control record
        try:
            kept = filt.keep(buf, pos, h)
        except rec.InvalidRecordError as e:
            raise _malformed(topic, partition, h.base_offset, e.message) from None
        except ValueError as e:  # a control record's header key that is not UTF-8
            raise _malformed(topic, partition, h.base_offset, str(e)) from None
        if kept:
            if h.compression:
                _compressed(topic, partition, buf, pos, h, lo, hi, add, inflate_limit)
            else:  # its CRC is checked above
                r = _batches_to_columns(topic, partition, buf, pos, pos + h.size, lo, hi, False)
                add(r[0], r[3])
        out.next_offset = h.next_offset
        pos += h.size
    if len(out.batches) > 1 and min(b.num_rows for b in out.batches) < 1024:
        out.batches = pa.Table.from_batches(out.batches, schema).combine_chunks().to_batches()
    return out


def _compressed(topic: str, partition: int, buf: memoryview, pos: int, h: rec.BatchHeader, lo: int, hi: int,
                add: Any, limit: int) -> int:
    """Decode the compressed batch at ``pos`` (its CRC already checked); returns the position after it."""
    if h.magic != rec.MAGIC_V2:
        raise _malformed(topic, partition, h.base_offset, f"magic {h.magic}")
    if not h.is_control and h.last_offset >= lo and h.base_offset < hi:
        assert _c is not None
        try:
            data = rec.decompress(h.compression, buf[pos + rec.BATCH_HEADER_SIZE : pos + h.size], limit)
        except rec.InvalidRecordError as e:
            raise _malformed(topic, partition, h.base_offset, e.message) from None
        try:
            r = _c.records_to_columns(data, 0, len(data), h.base_offset, h.base_timestamp, h.max_timestamp,
                                      h.timestamp_type == 1, lo, hi)
        except _c.MalformedRecordError as e:
            why, _base, position = e.args
            raise _malformed(topic, partition, h.base_offset,
                             f"{why} (byte {position} of its inflated records)") from None
        add(r[0], r[1])
    return pos + h.size
