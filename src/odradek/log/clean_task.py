"""The work of one compaction (see :mod:`odradek.log.cleaner` for when and what):
building the offset map and writing the cleaned segment files, in a worker thread;
plus the produce-time key check and the recovery of interrupted swaps.

Batches are rewritten as Kafka's ``MemoryRecords.filterTo`` does: a batch whose
records all survive (and that needs no delete horizon) is copied byte for byte;
otherwise it keeps its baseOffset, lastOffsetDelta (so baseSequence +
lastOffsetDelta still gives the producer's last sequence), producer id / epoch /
base sequence, partition leader epoch and attributes, with recordCount = the kept
records, maxTimestamp recomputed (CreateTime) and the kept records copied
verbatim (their offsetDelta and timestampDelta unchanged). Compressed batches are
inflated with a hard output bound (``inflate_limit``, streaming), so a decompression bomb
in a segment fails the clean instead of the broker. An empty batch is
dropped. Compression: the original codec for gzip,
snappy (xerial framing, as Java producers write it) and zstd; LZ4 batches that
must be rewritten are written uncompressed.

Delete horizon (KIP-534): when a batch with a surviving tombstone and no horizon is
rewritten, attribute bit 6 is set and baseTimestamp becomes now +
``delete.retention.ms``; every record's timestampDelta is re-encoded relative to
it (record timestamps are unchanged). A later clean after the horizon drops the
batch's tombstones.

Transactions (KIP-98; Kafka's LogCleaner with CleanedTransactionMetadata). The aborted
transactions overlapping the cleaned range come from the transaction indexes of the log's
segments (:meth:`odradek.log.log.Log.collect_aborted_transactions`, taken in ``prepare``).
Walking the batches in offset order, an aborted transaction becomes *current* for its
producer once a batch at or after its first offset is met, until its ABORT marker: a
transactional batch of a producer with a current aborted transaction is dropped whole
(and is never put in the offset map, so it cannot shadow committed records); other
transactional batches mark their producer's transaction as committed-with-data. A marker
is kept while its transaction may still have data in the log: an ABORT whose transaction
had batches in this pass (they are dropped now; its index entry is copied into the
cleaned segment's ``.txnindex``), a COMMIT whose transaction had batches in this pass.
Otherwise the marker is removed like a tombstone: the first clean that could remove it
sets its delete horizon (now + ``delete.retention.ms``, see below), a clean after the
horizon drops it. The cleaned range never reaches the first unstable offset (see
:mod:`odradek.log.cleaner`), so no ongoing transaction is touched. Each pass (offset map,
each group of segments) uses a fresh walk over the aborted transactions whose marker is
at or after the pass's first offset.

Byte layout of a rewritten batch (v2; see :mod:`odradek.protocol.records`)::

    0   baseOffset int64         original            27  baseTimestamp int64   original or horizon
    8   batchLength int32        new                 35  maxTimestamp int64    max of kept records
    12  partitionLeaderEpoch     original            43  producerId int64      original
    16  magic int8 = 2                               51  producerEpoch int16   original
    17  crc uint32               new (CRC-32C 21..)  53  baseSequence int32    original
    21  attributes int16         codec, bit 6 set    57  recordCount int32     kept records
    23  lastOffsetDelta int32    original            61  records (compressed as a whole)

Records (uncompressed)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint (-1: tombstone) | value | headers

Files. The worker writes ``<base>.log.cleaned``, ``<base>.index.cleaned``,
``<base>.timeindex.cleaned`` and ``<base>.txnindex.cleaned`` (``<base>`` = the group's
first segment's base offset, 20 digits; index layouts in :mod:`odradek.log.offset_index`,
:mod:`odradek.log.time_index` (trimmed) and :mod:`odradek.log.txn_index`, possibly empty)
and fsyncs them. The swap, on the caller's
thread: rename all ``.cleaned`` -> ``.swap``, fsync the directory, rename the old
segments to ``.deleted`` (their descriptors stay open for outstanding reads until
``file.delete.delay.ms``), rename ``.swap`` -> live names, splice the segment list
in one step, fsync the directory. On load (:func:`complete_swaps`): ``.cleaned``
files are deleted; a ``<base>.log.swap`` replaces every segment whose base offset
lies in [base, swap's next offset) and is renamed to its live name.

One concept in one file (over 600 lines): one compaction's work (offset map, cleaned segments, swap recovery).
"""

from __future__ import annotations

import bisect
import contextlib
import gzip
import logging
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import crc32c as _crc32c

from odradek.fsutil import fsync_dir, write_all, write_file
from odradek.log.checkpoint import TopicPartition
from odradek.log.errors import LogError
from odradek.log.file_records import FileRecords
from odradek.log.offset_index import ENTRY as OFFSET_INDEX_ENTRY
from odradek.log.offset_index import MAX_RELATIVE_OFFSET
from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, filename_prefix
from odradek.log.time_index import ENTRY as TIME_INDEX_ENTRY
from odradek.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries
from odradek.log.txn_marker import EndTxnMarker, parse_marker
from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    COMPRESSION_GZIP,
    COMPRESSION_MASK,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    READ_INFLATE_LIMIT,
    BatchHeader,
    decompress,
)
from odradek.protocol.varint import VARLONG_MAX_BYTES, encode_varint, read_varint

if TYPE_CHECKING:
    from odradek.log.log import Log

log = logging.getLogger("odradek.log.cleaner")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_BEFORE_CRC = struct.Struct(">qiibI")  # baseOffset .. crc
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


# ---------------------------------------------------------------------------------- records


class _Rec(NamedTuple):
    start: int  # position of the length varint
    end: int  # position after the record
    ts_pos: int  # position of timestampDelta
    after_ts: int  # position of offsetDelta
    ts_delta: int
    offset_delta: int
    key: bytes | None
    tombstone: bool


def _scan_records(data: bytes, count: int) -> list[_Rec]:
    """Locate the records of an uncompressed records section (see the module docstring)."""
    out: list[_Rec] = []
    pos = 0
    n = len(data)
    for _ in range(count):
        length, body = read_varint(data, pos, n, VARLONG_MAX_BYTES)
        end = body + length
        if length <= 0 or end > n:
            raise ValueError("record length out of bounds")
        ts_pos = body + 1
        ts_delta, p = read_varint(data, ts_pos, n, VARLONG_MAX_BYTES)
        off_delta, p2 = read_varint(data, p, n, VARLONG_MAX_BYTES)
        klen, p3 = read_varint(data, p2, n, VARLONG_MAX_BYTES)
        if klen < 0:
            key = None
        else:
            key = data[p3 : p3 + klen]
            p3 += klen
        vlen, _ = read_varint(data, p3, n, VARLONG_MAX_BYTES)
        out.append(_Rec(pos, end, ts_pos, p, ts_delta, off_delta, key, vlen < 0))
        pos = end
    return out


def _keys_and_offsets(data: bytes, count: int) -> Iterator[tuple[int, bytes | None]]:
    """(offsetDelta, key) of each record of an uncompressed records section."""
    pos = 0
    n = len(data)
    for _ in range(count):
        length, body = read_varint(data, pos, n, VARLONG_MAX_BYTES)
        _, p = read_varint(data, body + 1, n, VARLONG_MAX_BYTES)
        off_delta, p = read_varint(data, p, n, VARLONG_MAX_BYTES)
        klen, p = read_varint(data, p, n, VARLONG_MAX_BYTES)
        yield off_delta, (None if klen < 0 else data[p : p + klen])
        pos = body + length


def has_keyless_record(
    buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader, limit: int = READ_INFLATE_LIMIT
) -> bool:
    """True if the batch at ``pos`` holds a record with a null key, or records that do not
    decode. Compressed batches are inflated to at most ``limit`` bytes (streaming; past it
    ``InvalidRecordError`` MESSAGE_TOO_LARGE). Produce validation does this check itself
    (:mod:`odradek.log.validator`)."""
    view = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + h.batch_length + LOG_OVERHEAD]
    data = decompress(h.compression, view, limit)
    try:
        return _has_null_key(data, h.record_count)
    except (IndexError, ValueError):
        return True


def _has_null_key(data: bytes, count: int) -> bool:
    """Walk the records of an uncompressed section looking only at keyLength; a null key
    is keyLength -1 (zig-zag: the single byte 0x01)."""
    pos = 0
    n = len(data)
    for _ in range(count):
        x = data[pos]
        if x < 0x80:
            length, body = (x >> 1) ^ -(x & 1), pos + 1
        else:
            length, body = read_varint(data, pos, n, VARLONG_MAX_BYTES)
        p = body + 1  # attributes
        while data[p] & 0x80:  # timestampDelta
            p += 1
        p += 1
        while data[p] & 0x80:  # offsetDelta
            p += 1
        p += 1
        x = data[p]
        if x == 1 or (x & 0x80 and read_varint(data, p, n, VARLONG_MAX_BYTES)[0] < 0):
            return True
        if length <= 0:
            raise ValueError("bad record length")
        pos = body + length
    return False


def _compress(codec: int, data: bytes) -> tuple[int, bytes]:
    """(codec actually used, payload). LZ4 falls back to uncompressed (see module docstring)."""
    if codec == COMPRESSION_NONE:
        return codec, data
    if codec == COMPRESSION_GZIP:
        return codec, gzip.compress(data, compresslevel=6)
    import cramjam

    if codec == COMPRESSION_SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return codec, bytes(out)
    if codec == COMPRESSION_ZSTD:
        return codec, bytes(cramjam.zstd.compress(data, level=3))
    return COMPRESSION_NONE, data


# ---------------------------------------------------------------------------------- stats


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0
    batches_copied: int = 0
    batches_rewritten: int = 0
    batches_removed: int = 0
    map_entries: int = 0
    segments_before: int = 0
    segments_after: int = 0
    run_seconds: float = 0.0
    total_seconds: float = 0.0
    min_horizon: int | None = None  # earliest delete horizon of a batch with surviving tombstones or marker
    aborted_batches_removed: int = 0  # batches of aborted transactions
    markers_removed: int = 0


class SourceSegment(NamedTuple):
    base: int
    path: Path
    size: int
    fd: int
    oi_bytes: int
    ti_bytes: int


class _Output(NamedTuple):
    base: int
    first: int  # index of the first source segment replaced
    n_segments: int  # number of source segments replaced
    size: int


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata for one pass (see the module docstring)."""

    def __init__(self, aborted: list[AbortedTxn], start_offset: int) -> None:
        pending = sorted((t for t in aborted if t.last_offset >= start_offset), key=lambda t: t.first_offset)
        self._pending = pending
        self._next = 0
        self._aborted: dict[int, list[object]] = {}  # producer id -> [AbortedTxn, batches seen]
        self._committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            t = pending[self._next]
            self._aborted[t.producer_id] = [t, False]
            self._next += 1

    def discard_batch(self, h: BatchHeader) -> bool:
        """For a data batch: True when it belongs to an aborted transaction."""
        if not h.is_transactional and not self._aborted and self._next >= len(self._pending):
            return False
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if not h.is_transactional:
            return False
        entry = self._aborted.get(h.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self._committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, marker: EndTxnMarker | None) -> tuple[bool, AbortedTxn | None]:
        """For a control batch: (may be removed, index entry to keep for the cleaned segment)."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if marker is None:
            return False, None
        pid = h.producer_id
        if marker.is_abort:
            entry = self._aborted.pop(pid, None)
            if entry is not None and entry[1]:
                txn = entry[0]
                assert isinstance(txn, AbortedTxn)
                return False, txn
            return True, None
        if pid in self._committed:
            self._committed.discard(pid)
            return False, None
        return True, None


# ---------------------------------------------------------------------------------- the task


@dataclass
class CleanTask:
    """One log's clean: made by :meth:`LogCleaner.prepare`, run in a worker thread,
    installed (or discarded) by :meth:`LogCleaner.commit`."""

    log: Log
    key: tuple[Path, TopicPartition]
    dir: Path
    segments: list[LogSegment]  # identity snapshot, for commit's check; not used by run()
    sources: list[SourceSegment]
    map_start: int  # index of the first dirty source
    first_dirty: int
    end_offset: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_map_entries: int
    # a batch's records are inflated to at most this many bytes (records.read_inflate_limit); a
    # batch past it fails the clean (the cleaner retries after a back-off), it never inflates whole
    inflate_limit: int = READ_INFLATE_LIMIT
    # aborted transactions overlapping the sources (from the log's transaction indexes)
    aborted_txns: list[AbortedTxn] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)
    outputs: list[_Output] = field(default_factory=list)
    error: BaseException | None = None
    finished: bool = False
    started_at: float = field(default_factory=time.monotonic)
    _aborted: bool = False
    _fds_closed: bool = False

    # -------------------------------------------------------------- worker side

    def abort(self) -> None:
        """Ask a running :meth:`run` to stop at the next batch (any thread)."""
        self._aborted = True

    def run(self) -> None:
        """Build the offset map and write the cleaned files (worker thread). Never
        raises: failures are kept in ``error`` and the partial files are removed."""
        t0 = time.monotonic()
        try:
            offset_map, n_sources = self._build_offset_map()
            self.end_offset = self.sources[n_sources].base if n_sources < len(self.sources) else self.end_offset
            for first, count in self._groups(n_sources):
                self._clean_group(first, count, offset_map)
            self.stats.map_entries = len(offset_map)
        except BaseException as exc:  # noqa: BLE001 - reported by commit
            self.error = exc
            self._remove_outputs()
        finally:
            self._close_fds()
            self.stats.run_seconds = time.monotonic() - t0
            self.finished = True

    def _check_abort(self) -> None:
        if self._aborted:
            raise CleanAborted()

    def _batches(self, src: SourceSegment) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, whole batch bytes) of a source segment, read in ~1 MB chunks."""
        fd, size = src.fd, src.size
        pos = 0
        unpack = BATCH_HEADER.unpack_from
        while size - pos >= BATCH_HEADER_SIZE:
            chunk = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
            off = 0
            n = len(chunk)
            progressed = False
            while n - off >= BATCH_HEADER_SIZE:
                h = BatchHeader._make(unpack(chunk, off))
                bsize = h.batch_length + LOG_OVERHEAD
                if h.batch_length < MIN_BATCH_LENGTH or h.magic != MAGIC_V2 or pos + off + bsize > size:
                    raise ValueError(f"bad batch at position {pos + off} of {src.path}")
                if off + bsize > n:
                    if off == 0:  # a batch larger than the chunk
                        chunk = os.pread(fd, bsize, pos)
                        if len(chunk) < bsize:
                            raise ValueError(f"short read at position {pos} of {src.path}")
                        yield h, chunk
                        off = bsize
                        progressed = True
                    break
                yield h, chunk[off : off + bsize]
                off += bsize
                progressed = True
            if not progressed:
                raise ValueError(f"short read at position {pos} of {src.path}")
            pos += off

    def _build_offset_map(self) -> tuple[dict[bytes, int], int]:
        """key -> last offset over the dirty sources; returns (map, number of sources
        to clean), fewer than all when the map filled up."""
        offset_map: dict[bytes, int] = {}
        cap = self.max_map_entries
        n = len(self.sources)
        txns = _TxnTracker(self.aborted_txns, self.sources[self.map_start].base) if n > self.map_start else None
        for i in range(self.map_start, n):
            for h, batch in self._batches(self.sources[i]):
                self._check_abort()
                if h.is_control:
                    continue
                assert txns is not None
                if txns.discard_batch(h):
                    continue
                data = decompress(h.compression, memoryview(batch)[BATCH_HEADER_SIZE:], self.inflate_limit)
                base = h.base_offset
                for off_delta, key in _keys_and_offsets(data, h.record_count):
                    if key is not None:
                        offset_map[key] = base + off_delta
            if len(offset_map) > cap:
                if i == self.map_start:
                    raise RuntimeError(
                        f"offset map of {cap} entries cannot hold segment {self.sources[i].base}; "
                        "raise log.cleaner.dedupe.buffer.size"
                    )
                log.info("Offset map full: cleaning %s only up to offset %d", self.log_name, self.sources[i].base)
                return self._map_until(i), i
        return offset_map, n

    def _map_until(self, stop: int) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        txns = _TxnTracker(self.aborted_txns, self.sources[self.map_start].base)
        for i in range(self.map_start, stop):
            for h, batch in self._batches(self.sources[i]):
                if h.is_control or txns.discard_batch(h):
                    continue
                data = decompress(h.compression, memoryview(batch)[BATCH_HEADER_SIZE:], self.inflate_limit)
                for off_delta, key in _keys_and_offsets(data, h.record_count):
                    if key is not None:
                        offset_map[key] = h.base_offset + off_delta
        return offset_map

    def _groups(self, n_sources: int) -> list[tuple[int, int]]:
        """Kafka's groupSegmentsBySize over sources [0, n_sources)."""
        out: list[tuple[int, int]] = []
        srcs = self.sources
        i = 0
        while i < n_sources:
            first = srcs[i]
            size, oi, ti = first.size, first.oi_bytes, first.ti_bytes
            j = i + 1
            while j < n_sources:
                s = srcs[j]
                nxt_end = srcs[j + 1].base if j + 1 < len(srcs) else self.end_offset
                if (
                    size + s.size > self.segment_bytes
                    or oi + s.oi_bytes > self.segment_index_bytes
                    or ti + s.ti_bytes > self.segment_index_bytes
                    or nxt_end - 1 - first.base > MAX_RELATIVE_OFFSET
                ):
                    break
                size += s.size
                oi += s.oi_bytes
                ti += s.ti_bytes
                j += 1
            out.append((i, j - i))
            i = j
        return out

    def _clean_group(self, first: int, count: int, offset_map: dict[bytes, int]) -> None:
        base = self.sources[first].base
        prefix = self.dir / filename_prefix(base)
        log_path = Path(f"{prefix}{LOG_SUFFIX}{CLEANED_SUFFIX}")
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.outputs.append(_Output(base, first, count, 0))
        oi_cap = self.segment_index_bytes // 8
        ti_cap = self.segment_index_bytes // 12
        oi = bytearray()
        ti = bytearray()
        ti_n = 0
        last_ti_ts = -1
        max_ts = -1
        off_of_max = base
        since = 0
        pos = 0
        pending = bytearray()
        interval = self.index_interval_bytes
        stats = self.stats
        mtime = 0
        txns = _TxnTracker(self.aborted_txns, base)
        txn_entries: list[AbortedTxn] = []
        try:
            for src in self.sources[first : first + count]:
                mtime = max(mtime, os.fstat(src.fd).st_mtime_ns)
                stats.bytes_read += src.size
                for h, batch in self._batches(src):
                    self._check_abort()
                    out = self._filter_batch(h, batch, offset_map, txns, txn_entries)
                    if out is None:
                        continue
                    oh = h if out is batch else BatchHeader._make(BATCH_HEADER.unpack_from(out, 0))
                    last = oh.base_offset + oh.last_offset_delta
                    if oh.max_timestamp > max_ts:
                        max_ts, off_of_max = oh.max_timestamp, last
                    if since > interval and len(oi) // 8 < oi_cap:
                        oi += OFFSET_INDEX_ENTRY.pack(last - base, pos)
                        if ti_n < ti_cap - 1 and max_ts > last_ti_ts:
                            ti += TIME_INDEX_ENTRY.pack(max_ts, off_of_max - base)
                            ti_n += 1
                            last_ti_ts = max_ts
                        since = 0
                    pending += out
                    pos += len(out)
                    since += len(out)
                    if len(pending) >= _WRITE_CHUNK:
                        write_all(fd, pending)
                        pending.clear()
            if pending:
                write_all(fd, pending)
            if pos > 2**31 - 1:
                raise RuntimeError(f"cleaned segment {base} of {self.log_name} would exceed 2 GiB")
            os.fsync(fd)
        finally:
            os.close(fd)
        if max_ts >= 0 and max_ts > last_ti_ts and ti_n < ti_cap:
            ti += TIME_INDEX_ENTRY.pack(max_ts, off_of_max - base)
        txi = encode_entries(txn_entries)
        for suffix, data in ((INDEX_SUFFIX, oi), (TIME_INDEX_SUFFIX, ti), (TXN_INDEX_SUFFIX, txi)):
            write_file(Path(f"{prefix}{suffix}{CLEANED_SUFFIX}"), bytes(data))
        if mtime:
            os.utime(log_path, ns=(mtime, mtime))
        self.outputs[-1] = _Output(base, first, count, pos)
        stats.bytes_written += pos

    def _filter_marker(
        self, h: BatchHeader, batch: bytes, txns: _TxnTracker, txn_entries: list[AbortedTxn]
    ) -> bytes | None:
        stats = self.stats
        try:
            marker = parse_marker(batch, h)
        except LogError:
            marker = None  # kept as it is
        removable, entry = txns.on_marker(h, marker)
        if entry is not None:
            txn_entries.append(entry)
        has_horizon = bool(h.attributes & DELETE_HORIZON_FLAG)
        if not removable:
            stats.batches_copied += 1
            return batch
        if has_horizon and self.now_ms >= h.base_timestamp:
            stats.markers_removed += 1
            stats.batches_removed += 1
            return None
        horizon = h.base_timestamp if has_horizon else self.now_ms + self.delete_retention_ms
        if stats.min_horizon is None or horizon < stats.min_horizon:
            stats.min_horizon = horizon
        if has_horizon:
            stats.batches_copied += 1
            return batch
        data = decompress(h.compression, memoryview(batch)[BATCH_HEADER_SIZE:], self.inflate_limit)
        stats.batches_rewritten += 1
        return self._rewrite(h, data, _scan_records(data, h.record_count), True)

    def _filter_batch(
        self,
        h: BatchHeader,
        batch: bytes,
        offset_map: dict[bytes, int],
        txns: _TxnTracker | None = None,
        txn_entries: list[AbortedTxn] | None = None,
    ) -> bytes | None:
        """The batch to write for ``batch`` (the same object when copied unchanged), or None."""
        stats = self.stats
        if h.is_control:
            if txns is None or txn_entries is None:
                stats.batches_copied += 1
                return batch
            return self._filter_marker(h, batch, txns, txn_entries)
        if txns is not None and txns.discard_batch(h):
            stats.aborted_batches_removed += 1
            stats.batches_removed += 1
            stats.records_read += h.record_count
            stats.records_removed += h.record_count
            return None
        data = decompress(h.compression, memoryview(batch)[BATCH_HEADER_SIZE:], self.inflate_limit)
        recs = _scan_records(data, h.record_count)
        has_horizon = bool(h.attributes & DELETE_HORIZON_FLAG)
        horizon_passed = has_horizon and self.now_ms >= h.base_timestamp
        base = h.base_offset
        kept: list[_Rec] = []
        tombstone_kept = False
        get = offset_map.get
        for r in recs:
            key = r.key
            if key is None:
                stats.keyless_removed += 1
                continue
            if base + r.offset_delta < get(key, -1):
                continue
            if r.tombstone:
                if horizon_passed:
                    stats.tombstones_removed += 1
                    continue
                tombstone_kept = True
            kept.append(r)
        stats.records_read += len(recs)
        stats.records_kept += len(kept)
        stats.records_removed += len(recs) - len(kept)
        if not kept:
            stats.batches_removed += 1
            return None
        set_horizon = tombstone_kept and not has_horizon
        if tombstone_kept:
            horizon = h.base_timestamp if has_horizon else self.now_ms + self.delete_retention_ms
            if stats.min_horizon is None or horizon < stats.min_horizon:
                stats.min_horizon = horizon
        if len(kept) == len(recs) and not set_horizon:
            stats.batches_copied += 1
            return batch
        stats.batches_rewritten += 1
        return self._rewrite(h, data, kept, set_horizon)

    def _rewrite(self, h: BatchHeader, data: bytes, kept: list[_Rec], set_horizon: bool) -> bytes:
        """The batch ``h`` with only the ``kept`` records of its uncompressed ``data`` (and the
        delete horizon set when ``set_horizon``); see the module docstring's layout."""
        base = h.base_offset
        base_ts = h.base_timestamp
        new_base_ts = self.now_ms + self.delete_retention_ms if set_horizon else base_ts
        body = bytearray()
        max_ts = -1
        for r in kept:
            ts = base_ts + r.ts_delta
            if ts > max_ts:
                max_ts = ts
            if set_horizon:
                rest = bytes(data[r.ts_pos - 1 : r.ts_pos]) + encode_varint(ts - new_base_ts) + data[r.after_ts : r.end]
                body += encode_varint(len(rest))
                body += rest
            else:
                body += data[r.start : r.end]
        if h.timestamp_type == 1:
            max_ts = h.max_timestamp
        codec, payload = _compress(h.compression, bytes(body))
        attrs = (h.attributes & ~COMPRESSION_MASK) | codec
        if set_horizon:
            attrs |= DELETE_HORIZON_FLAG
        after_crc = (
            _AFTER_CRC.pack(
                attrs, h.last_offset_delta, new_base_ts, max_ts, h.producer_id, h.producer_epoch,
                h.base_sequence, len(kept),
            )
            + payload
        )
        crc = _crc32c.crc32c(after_crc)
        return _BEFORE_CRC.pack(base, len(after_crc) + 9, h.partition_leader_epoch, MAGIC_V2, crc) + after_crc

    # -------------------------------------------------------------- cleanup

    @property
    def log_name(self) -> str:
        return f"{self.key[1][0]}-{self.key[1][1]}"

    def _close_fds(self) -> None:
        if self._fds_closed:
            return
        self._fds_closed = True
        for s in self.sources:
            with contextlib.suppress(OSError):
                os.close(s.fd)

    def _remove_outputs(self, suffix: str = CLEANED_SUFFIX) -> None:
        for out in self.outputs:
            prefix = self.dir / filename_prefix(out.base)
            for seg_suffix in SEGMENT_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{prefix}{seg_suffix}{suffix}")

    def discard(self) -> None:
        """Drop the task: close descriptors, delete its ``.cleaned`` files (call after run
        finished or when it never started)."""
        self._close_fds()
        self._remove_outputs()


class CleanAborted(Exception):
    pass


# ---------------------------------------------------------------------------------- recovery


def complete_swaps(dir: Path) -> int:
    """Finish swaps interrupted by a crash (called when a partition directory is
    loaded): each ``<base>.log.swap`` replaces the segments whose base offsets lie in
    [base, its next offset), its ``.index.swap``/``.timeindex.swap`` become the live
    indexes (a missing offset or time index is rebuilt later; a missing ``.txnindex`` means
    no aborted transaction). ``.cleaned`` files are left for the
    loader, which deletes them. Returns the number of swaps completed."""
    swaps: list[int] = []
    logs: list[int] = []
    for name in os.listdir(dir):
        stem = name.partition(".")[0]
        if len(stem) != 20 or not stem.isdigit():
            continue
        if name == f"{stem}{LOG_SUFFIX}{SWAP_SUFFIX}":
            swaps.append(int(stem))
        elif name == f"{stem}{LOG_SUFFIX}":
            logs.append(int(stem))
    logs.sort()
    for base in sorted(swaps):
        prefix = dir / filename_prefix(base)
        swap_path = Path(f"{prefix}{LOG_SUFFIX}{SWAP_SUFFIX}")
        records = FileRecords(swap_path, swap_path.stat().st_size)
        next_offset = base
        try:
            for _pos, h in records.iter_headers():
                next_offset = h.base_offset + h.last_offset_delta + 1
        finally:
            records.close_fd()
        lo = bisect.bisect_right(logs, base)
        hi = bisect.bisect_left(logs, max(next_offset, base + 1))
        for old in logs[lo:hi]:
            for suffix in SEGMENT_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dir / f"{filename_prefix(old)}{suffix}")
            log.info("Deleted segment %d of %s replaced by an interrupted swap", old, dir.name)
        del logs[lo:hi]
        # the replaced segment at this base still live (the crash came before it was renamed .deleted):
        # its index files that the swap has no counterpart for are stale. Otherwise a live index file
        # beside the .log.swap was renamed from the swap before the crash (the install renames the
        # indexes first, the .log last) and is the cleaned segment's own: unlinking it would lose the
        # aborted transactions of its .txnindex, which nothing rebuilds below the recovery point
        replaced_live = Path(f"{prefix}{LOG_SUFFIX}").exists()
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            swapped = Path(f"{prefix}{suffix}{SWAP_SUFFIX}")
            live = Path(f"{prefix}{suffix}")
            if swapped.exists():
                os.replace(swapped, live)
            elif replaced_live:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(live)
        log.info("Completed the interrupted swap of segment %d of %s", base, dir.name)
    if swaps:
        fsync_dir(dir)
    return len(swaps)
