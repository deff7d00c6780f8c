"""One log segment (Kafka's LogSegment): ``<base>.log`` + ``<base>.index`` + ``<base>.timeindex``
+ ``<base>.txnindex``.

``<base>`` is the segment's base offset, zero-padded to 20 digits. Byte layouts:
``.log`` in :mod:`odradek.log.file_records`, ``.index`` in
:mod:`odradek.log.offset_index`, ``.timeindex`` in :mod:`odradek.log.time_index`,
``.txnindex`` (aborted transactions, KIP-98) in :mod:`odradek.log.txn_index`.
A segment being deleted has ``.deleted`` appended to each file name. The segment owns
the four files: it creates, truncates, flushes, renames and deletes them together. The
transaction index is filled by the log (it needs the producer state to know a
transaction's first offset): :meth:`odradek.log.log.Log.append_as_leader` and the
recovery; :meth:`recover` resets it.

Both indexes are loaded lazily: opening a segment costs one ``stat`` of its
``.log`` (done by the caller), and nothing is read or mapped until an append,
read, timestamp lookup or retention check needs it. An index that is missing or
fails its sanity check is rebuilt from the batch headers when first loaded.

Index rule (Kafka's): while appending, a batch gets an offset index entry (its
last offset -> its position) when more than ``index.interval.bytes`` were
appended since the previous entry, and at the same moment a time index entry
(max timestamp so far -> offset of the batch that carried it) if the max
timestamp grew; when the segment stops being active a final time index entry
records its largest timestamp.

One concept in one file (over 600 lines): a log segment and its three indexes, appended, read, recovered and truncated together.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import random
import struct
import time
from pathlib import Path
from typing import TypeVar

import crc32c as _crc32c

from odradek.log.abstract_index import AbstractIndex
from odradek.log.config import LogConfig
from odradek.log.errors import CorruptIndexError
from odradek.log.file_records import FetchData, FileRecords
from odradek.log.offset_index import ENTRY as OFFSET_INDEX_ENTRY
from odradek.log.offset_index import MAX_RELATIVE_OFFSET, OffsetIndex
from odradek.log.time_index import TimeIndex
from odradek.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    READ_INFLATE_LIMIT,
    BatchHeader,
    record_times,
)

log = logging.getLogger("odradek.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# the most a batch-header scan reads at once (a larger index.interval.bytes is read in pieces this size)
_SCAN_CHUNK_MAX = 16 << 10

_I = TypeVar("_I", bound=AbstractIndex)
_BATCH_LENGTH = struct.Struct(">i")


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogSegment:
    def __init__(
        self,
        dir: Path,
        base_offset: int,
        config: LogConfig,
        records: FileRecords,
        *,
        active: bool,
        time_ms: int,
        indexes_present: bool = True,
        txn_index_present: bool = True,
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.config = config
        self.log = records
        self._active = active
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._indexes_need_rebuild = not indexes_present
        # the index files are not there (a new segment, or the directory listing lacks them): they are
        # made when the active segment's entries are first written out rather than when loaded
        self._index_files_absent = not indexes_present
        self._max_ts: int | None = None  # None: not loaded yet (from the time index)
        self._offset_of_max_ts = base_offset
        self._rolling_ts: int | None = None
        self._rolling_ts_loaded = False
        self.created_ms = time_ms
        self._bytes_since_last_index_entry = 0
        jitter = config.segment_jitter_ms
        self._roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter > 0 else 0
        self.dirty = False  # appended to or truncated since the last flush
        self._renamed_for_delete = False
        self.txn_index = TransactionIndex(self.txn_index_path, base_offset, absent=not txn_index_present)

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls, dir: Path, base_offset: int, config: LogConfig, time_ms: int, *, lazy: bool = False
    ) -> LogSegment:
        """A new, empty, active segment (stale files with the same name are replaced).
        ``lazy``: the ``.log`` file is made when first used (a new partition's first segment)."""
        prefix = dir / filename_prefix(base_offset)
        if not lazy:  # lazy: a new directory, there is nothing stale
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{prefix}{suffix}")
        records = FileRecords.create(
            Path(f"{prefix}{LOG_SUFFIX}"), preallocate_to=config.segment_bytes if config.preallocate else 0,
            lazy=lazy,
        )
        # a new partition's first segment (lazy) makes its index files when the indexes are first
        # written out (flush, roll, close): creating a partition, and its first append, cost two files
        # fewer; a rolled segment makes them on first use, as Kafka's are there from the roll on
        seg = cls(dir, base_offset, config, records, active=True, time_ms=time_ms)
        seg._index_files_absent = lazy
        seg._max_ts = -1
        seg._rolling_ts_loaded = True
        seg.dirty = True
        return seg

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        config: LogConfig,
        size: int,
        *,
        active: bool,
        time_ms: int,
        indexes_present: bool = True,
        txn_index_present: bool = True,
    ) -> LogSegment:
        """An existing segment whose ``.log`` is ``size`` bytes; nothing is read yet.
        ``txn_index_present`` false: the directory listing has no ``.txnindex`` for it."""
        records = FileRecords(dir / f"{filename_prefix(base_offset)}{LOG_SUFFIX}", size)
        return cls(dir, base_offset, config, records, active=active, time_ms=time_ms, indexes_present=indexes_present,
                   txn_index_present=txn_index_present)

    @property
    def offset_index_path(self) -> Path:
        return self.dir / f"{filename_prefix(self.base_offset)}{INDEX_SUFFIX}"

    @property
    def time_index_path(self) -> Path:
        return self.dir / f"{filename_prefix(self.base_offset)}{TIME_INDEX_SUFFIX}"

    @property
    def txn_index_path(self) -> Path:
        return self.dir / f"{filename_prefix(self.base_offset)}{TXN_INDEX_SUFFIX}"

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    @property
    def offset_index(self) -> OffsetIndex:
        idx = self._offset_index
        if idx is None:
            self._load_indexes()
            idx = self._offset_index
            assert idx is not None
        return idx

    @property
    def time_index(self) -> TimeIndex:
        idx = self._time_index
        if idx is None:
            self._load_indexes()
            idx = self._time_index
            assert idx is not None
        return idx

    def _load_indexes(self) -> None:
        max_size = self.config.segment_index_bytes
        oi: OffsetIndex | None = None
        ti: TimeIndex | None = None
        try:
            if self._indexes_need_rebuild and self.log.size == 0:
                # nothing to index (a segment never written has no index files): start them afresh
                for path in (self.offset_index_path, self.time_index_path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                self._indexes_need_rebuild = False
            if self._indexes_need_rebuild:
                raise CorruptIndexError("index files missing")
            absent = self._index_files_absent and self._active
            self._index_files_absent = False
            oi = OffsetIndex(self.offset_index_path, self.base_offset, max_size, writable=self._active, absent=absent)
            ti = TimeIndex(self.time_index_path, self.base_offset, max_size, writable=self._active, absent=absent)
            oi.sanity_check()
            ti.sanity_check()
        except (CorruptIndexError, OSError) as exc:
            for idx in (oi, ti):
                if idx is not None:
                    idx.close_handler()
            log.warning("Rebuilding the indexes of segment %s: %s", self.log.path, exc)
            self._rebuild_indexes()
            return
        self._offset_index, self._time_index = oi, ti

    def _fresh_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Both indexes, writable and empty, for a rebuild. The files are kept and their entries
        dropped (Kafka's AbstractIndex.reset): unlinking and recreating two files per segment was
        a quarter of a crash recovery of 1,000 partitions. Stale bytes past the new entries are
        cut when the index is trimmed; an unusable file is replaced."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        max_size = self.config.segment_index_bytes
        # files missing after a crash (a segment never flushed): made at the next flush, not here
        absent = self._index_files_absent and self._active
        self._index_files_absent = False
        oi = self._empty_index(OffsetIndex, self.offset_index_path, max_size, absent)
        ti = self._empty_index(TimeIndex, self.time_index_path, max_size, absent)
        self._offset_index, self._time_index = oi, ti
        self._indexes_need_rebuild = False
        return oi, ti

    def _empty_index(self, cls: type[_I], path: Path, max_size: int, absent: bool = False) -> _I:
        if absent:
            return cls(path, self.base_offset, max_size, writable=True, absent=True)
        try:
            idx = cls(path, self.base_offset, max_size, writable=True)
        except CorruptIndexError:  # a size that is no multiple of the entry size
            os.unlink(path)
            idx = cls(path, self.base_offset, max_size, writable=True)
        idx.reset()
        return idx

    def _rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers (no CRC check, no truncation)."""
        oi, ti = self._fresh_indexes()
        self._reset_index_state()
        for pos, h in self.log.iter_headers():
            self._index_batch(oi, ti, pos, h)
        if not self._active:
            self._finish_inactive(oi, ti)
        self.dirty = True

    def _reset_index_state(self) -> None:
        self._bytes_since_last_index_entry = 0
        self._max_ts = -1
        self._offset_of_max_ts = self.base_offset

    def _index_batch(self, oi: OffsetIndex, ti: TimeIndex, pos: int, h: BatchHeader) -> None:
        max_ts = self._max_ts
        assert max_ts is not None
        if h.max_timestamp > max_ts:
            self._max_ts = max_ts = h.max_timestamp
            self._offset_of_max_ts = h.base_offset + h.last_offset_delta
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes and not oi.is_full():
            oi.append(h.base_offset + h.last_offset_delta, pos)
            if not ti.is_full():
                ti.maybe_append(max_ts, self._offset_of_max_ts)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += h.batch_length + LOG_OVERHEAD

    # ------------------------------------------------------------------ state

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def is_active(self) -> bool:
        return self._active

    def _ensure_max_ts(self) -> None:
        if self._max_ts is None:
            ts, off = self.time_index.last_entry()
            if self._max_ts is None:  # loading may have rebuilt and set it
                self._max_ts, self._offset_of_max_ts = ts, off

    @property
    def max_timestamp(self) -> int:
        """Largest batch maxTimestamp in the segment (-1 if none)."""
        self._ensure_max_ts()
        assert self._max_ts is not None
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        self._ensure_max_ts()
        return self._offset_of_max_ts

    def largest_timestamp(self) -> int:
        """Kafka's largestTimestamp: the max timestamp, or the file's mtime if there is none."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        try:
            return os.stat(self.log.path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def _load_rolling_ts(self) -> None:
        if not self._rolling_ts_loaded:
            h = self.log.read_header(0)
            self._rolling_ts = h.max_timestamp if h is not None else None
            self._rolling_ts_loaded = True

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Kafka's rule: time between the first batch's timestamp and the incoming
        batch's, or since the segment was created when there is no timestamp."""
        self._load_rolling_ts()
        t = self._rolling_ts
        if t is not None and t >= 0:
            return message_timestamp - t
        return now - self.created_ms

    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now: int) -> bool:
        cfg = self.config
        size = self.log.size
        if size > cfg.segment_bytes - messages_size:
            return True
        if size > 0 and self.time_waited_for_roll(now, max_timestamp) > cfg.segment_ms - self._roll_jitter_ms:
            return True
        if max_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            return True
        oi, ti = self._offset_index, self._time_index
        if oi is None or ti is None:
            return self.offset_index.is_full() or self.time_index.is_full()
        return oi.is_full() or ti.is_full()

    # ------------------------------------------------------------------ append

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader], *, written_at: int = -1) -> int:
        """Write batches (already carrying their final offsets) and index them; with
        ``written_at`` they are in the file at that position (the end) already and only counted.

        Returns the position the data was written at. Per-batch work only."""
        oi = self.offset_index
        ti = self.time_index
        self._ensure_max_ts()
        if self.log.size == 0 and headers:
            self._rolling_ts = headers[0].max_timestamp
            self._rolling_ts_loaded = True
        pos = self.log.append(data) if written_at < 0 else self.log.append_written(written_at, len(data))
        interval = self.config.index_interval_bytes
        since = self._bytes_since_last_index_entry
        max_ts = self._max_ts
        assert max_ts is not None
        off_max = self._offset_of_max_ts
        p = pos
        for h in headers:
            last = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                off_max = last
            if since > interval and not oi.is_full():
                oi.append(last, p)
                if not ti.is_full():
                    ti.maybe_append(max_ts, off_max)
                since = 0
            size = h.batch_length + LOG_OVERHEAD
            p += size
            since += size
        self._bytes_since_last_index_entry = since
        self._max_ts = max_ts
        self._offset_of_max_ts = off_max
        self.dirty = True
        return pos

    # ------------------------------------------------------------------ reading

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        _, pos = self.offset_index.lookup(offset)
        if pos < starting_position:
            pos = starting_position
        # inline header scan (hot path). The file is read a chunk at a time, one index interval and a
        # header: a batch's header is read from the chunk when it lies in it, so the batches between an
        # index entry and the offset (up to index.interval.bytes of them) cost one pread, not one each
        records = self.log
        limit = records.size
        fd = records.fileno()
        pread = os.pread
        unpack_from = BATCH_HEADER.unpack_from
        chunk = min(self.config.index_interval_bytes, _SCAN_CHUNK_MAX) + BATCH_HEADER_SIZE
        buf = b""
        base = pos  # buf holds the file's bytes [base, base + len(buf))
        while limit - pos >= BATCH_HEADER_SIZE:
            at = pos - base
            if at + BATCH_HEADER_SIZE > len(buf):
                buf = pread(fd, min(limit - pos, chunk), pos)
                base, at = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return None
            fields = unpack_from(buf, at)
            size = fields[1] + LOG_OVERHEAD
            if fields[1] < MIN_BATCH_LENGTH or pos + size > limit:
                return None
            if fields[0] + fields[6] >= offset:
                return pos, BatchHeader._make(fields)
            pos += size
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> FetchData | None:
        """Whole batches from the one containing ``start_offset`` up to ``max_position``
        (default: the segment's end), at most ``max_size`` bytes unless ``min_one_message``
        and the first batch alone is larger (KIP-74).

        Where Kafka cuts the last batch at ``max_size`` and leaves the client to drop the
        fragment (and fetch it again in full next time), the region here ends at the last
        batch boundary within the limit: the protocol allows a broker to return less, and
        the fragment is pure waste (with producer batches near 1 MB and the default 1 MB
        ``max.partition.fetch.bytes`` it is a fifth of the bytes sent). A first batch larger
        than the limit without ``min_one_message`` gives an empty region.

        None when no batch of this segment contains ``start_offset`` or later."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, h = found
        end = self.log.size if max_position is None else min(max_position, self.log.size)
        first_size = h.batch_length + LOG_OVERHEAD
        adjusted = max(max_size, first_size) if min_one_message else max_size
        length = min(end - pos, adjusted)
        if length < end - pos:  # cut by the size limit, not by the end of the data
            length = self._whole_batches(pos, first_size, length)
        if length <= 0:
            return FetchData([], 0, start_offset, self.base_offset, pos)
        return FetchData([FileRegion(self.log, pos, length)], length, start_offset, self.base_offset, pos)

    def _whole_batches(self, pos: int, first_size: int, length: int, max_steps: int = 32) -> int:
        """Bytes from ``pos`` to the last batch boundary within ``length`` (0 when even the first
        batch does not fit). The offset index gives a boundary close to the limit (an entry per
        ``index.interval.bytes``); at most ``max_steps`` batch headers are read after it, and a
        batch boundary found so far is kept when they run out."""
        if length < first_size:
            return 0
        limit = pos + length
        boundary = max(pos + first_size, self.offset_index.position_at_most(limit))
        fd = self.log.fileno()
        for _ in range(max_steps):
            head = os.pread(fd, 12, boundary)
            if len(head) < 12:
                break
            nxt = boundary + LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(head, 8)[0]
            if nxt > limit or nxt <= boundary:
                break
            boundary = nxt
        return boundary - pos

    def read_next_offset(self) -> int | None:
        """Next offset after the last batch, found by scanning forward from the last
        offset index entry; None when the data does not end cleanly at the file end
        or disagrees with the index (the caller then recovers the segment)."""
        entry = self._peek_last_index_entry()
        if entry is None:
            return None
        entry_offset, pos = entry
        next_offset = self.base_offset
        end = pos
        first = True
        for p, h in self.log.iter_headers(pos):
            if first and pos > 0 and h.base_offset + h.last_offset_delta != entry_offset:
                return None
            first = False
            next_offset = h.base_offset + h.last_offset_delta + 1
            end = p + h.batch_length + LOG_OVERHEAD
        if end != self.log.size or (first and pos > 0):
            return None
        return next_offset

    def _peek_last_index_entry(self) -> tuple[int, int] | None:
        """Last offset index entry without mapping the index (it is trimmed after a
        clean shutdown); None if the file looks wrong."""
        if self._offset_index is not None:
            return self._offset_index.last_entry()
        if self._indexes_need_rebuild:
            # a segment never written has no index files (they are made on first use)
            return (self.base_offset, 0) if self.log.size == 0 else None
        try:
            fd = os.open(self.offset_index_path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size % 8:
                return None
            if size == 0:
                return self.base_offset, 0
            rel, pos = OFFSET_INDEX_ENTRY.unpack(os.pread(fd, 8, size - 8))
        finally:
            os.close(fd)
        if rel < 0 or pos < 0 or pos > self.log.size or (size > 8 and rel == 0):
            return None
        return self.base_offset + rel, pos

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0, inflate_limit: int = READ_INFLATE_LIMIT
    ) -> tuple[int, int] | None:
        """Kafka's ListOffsets lookup: (offset, timestamp) of the first record with
        timestamp >= ``timestamp`` and offset >= ``starting_offset`` (:meth:`find_timestamp_and_offset`)."""
        found = self.find_timestamp_and_offset(timestamp, starting_offset, inflate_limit)
        return None if found is None else (found[0], found[1])

    def find_timestamp_and_offset(
        self, timestamp: int, starting_offset: int = 0, inflate_limit: int = READ_INFLATE_LIMIT
    ) -> tuple[int, int, int] | None:
        """Kafka's LogSegment.findOffsetByTimestamp: (offset, timestamp, leader epoch of its batch, -1 if
        none) of the first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``.

        Time index, then offset index, then batch headers find the first batch whose
        maxTimestamp qualifies; only that batch's records are read and decoded (this
        is not the produce/fetch path)."""
        if self.max_timestamp < timestamp:
            return None
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, starting_offset))
        for p, h in self.log.iter_headers(pos):
            if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= starting_offset:
                found = self.first_record_with_epoch(p, h, timestamp, starting_offset, inflate_limit)
                if found is not None:
                    return found
        return None

    def first_record_at_or_after(
        self, position: int, h: BatchHeader, timestamp: int, starting_offset: int,
        inflate_limit: int = READ_INFLATE_LIMIT,
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of :meth:`first_record_with_epoch`."""
        found = self.first_record_with_epoch(position, h, timestamp, starting_offset, inflate_limit)
        return None if found is None else (found[0], found[1])

    def first_record_with_epoch(
        self, position: int, h: BatchHeader, timestamp: int, starting_offset: int,
        inflate_limit: int = READ_INFLATE_LIMIT,
    ) -> tuple[int, int, int] | None:
        """(offset, timestamp, the batch's leader epoch or -1) of the first record of the batch at
        ``position`` with timestamp >= ``timestamp`` and offset >= ``starting_offset``. Records of a
        LogAppendTime batch all carry its maxTimestamp (Kafka's rule).

        A compressed batch is inflated to at most ``inflate_limit`` bytes and only the
        records' timestamps and offsets are read (keys and values skipped); a batch that
        inflates past it or whose records do not decode raises ``InvalidRecordError``."""
        epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
        if h.timestamp_type == 1 or (
            h.record_count == 1 and h.last_offset_delta == 0 and h.base_offset >= starting_offset
        ):
            if h.max_timestamp < timestamp:
                return None
            return max(h.base_offset, starting_offset), h.max_timestamp, epoch
        batch = self.log.pread(h.batch_length + LOG_OVERHEAD, position)
        for offset, ts in record_times(batch, inflate_limit):
            if ts >= timestamp and offset >= starting_offset:
                return offset, ts, epoch
        return None

    # ------------------------------------------------------------------ recovery

    def recover(self, recovery_point: int = -1) -> int:
        """Check batches for framing, magic, CRC-32C and offsets; truncate at the first bad batch and
        index what is kept. Returns bytes truncated. ``recovered_epochs`` then lists (leader epoch,
        base offset) where the batches' leader epoch grew, for the leader epoch cache (Kafka's
        LogSegment.recover does the same); ``checked_from`` is the first offset checked, and the
        transaction index holds what lies below ``recovered_from`` (the rest is the log's to refill).

        With a ``recovery_point`` inside this segment the check starts at the last offset index entry
        below it, not at position 0: everything below the recovery point was flushed with its index
        entries (``Log.flush`` syncs the segment before it moves the point, and a truncation below the
        point has the owner write the lowered point at once: ``Log.on_recovery_point_lowered``), so a 1 GB
        segment that crashed with 1 MB past its recovery point has 1 MB checked. An index that does not agree with
        the batch it points at is not trusted: the whole segment is checked, as Kafka always does."""
        self.recovered_epochs: list[tuple[int, int]] = []
        fd = self.log.fileno()
        file_size = os.fstat(fd).st_size
        self.log._size = file_size
        resume = self._indexed_resume(recovery_point) if recovery_point > self.base_offset else None
        if resume is None:
            self.txn_index.reset()  # refilled by the log from the recovered batches
            oi, ti = self._fresh_indexes()
            self._reset_index_state()
            start, prev_last = 0, self.base_offset - 1
            self.recovered_from = self.base_offset
        else:
            # the transaction index was flushed with the batches below the recovery point: what lies
            # past it is refilled by the log, from a producer snapshot at or below the point
            oi, ti, start, prev_last, checked_from = resume
            self.recovered_from = recovery_point
            self.txn_index.truncate_to(recovery_point)
        valid = start
        if file_size > start:
            mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_READ)
            try:
                valid = self._scan_valid(mm, file_size, oi, ti, start, prev_last)
            finally:
                mm.close()
        truncated = self.log.truncate_to(valid)
        if resume is not None:
            self.checked_from = checked_from
            end = self.read_next_offset()  # below the point only if the disk lost flushed data
            if end is not None and end < self.recovered_from:
                self.recovered_from = end
                self.txn_index.truncate_to(end)
        else:
            self.checked_from = self.base_offset
        self._rolling_ts_loaded = False
        if not self._active:
            self._finish_inactive(oi, ti)
        self.dirty = True
        return truncated

    def _indexed_resume(self, recovery_point: int) -> tuple[OffsetIndex, TimeIndex, int, int, int] | None:
        """Indexes cut back to the batch of the last offset index entry below ``recovery_point``, and
        (position, a lower bound of the previous batch's last offset, base offset) of that batch; the
        index-building state (bytes since the last entry, largest timestamp) is set as it was before
        that batch was appended. None when the indexes cannot be trusted for it."""
        if self._indexes_need_rebuild:
            return None
        try:
            oi, ti = self.offset_index, self.time_index
            oi.make_writable()  # a rolled segment's: its full size counts when it is writable
            ti.make_writable()
            n = oi.entries_below(recovery_point)
            if n == 0 or ti.is_full():
                return None
            last, pos = oi.entry(n - 1)
            h = self.log.read_header(pos)
            if h is None or h.magic != MAGIC_V2 or h.base_offset + h.last_offset_delta != last:
                log.warning("The offset index of %s does not match its batch at position %d; checking the "
                            "whole segment", self.log.path, pos)
                return None
            prev_last, prev_pos = oi.entry(n - 2) if n > 1 else (self.base_offset - 1, 0)
            oi.truncate_to(last)
            # a time index entry is made with an offset index entry: those of the kept entries have
            # offsets up to the previous one's; the largest timestamp since comes from the batches between
            ti.truncate_to(prev_last + 1)
        except (CorruptIndexError, OSError) as exc:
            log.warning("Checking the whole segment %s: %s", self.log.path, exc)
            return None
        max_ts, off_max = ti.last_entry()
        for _p, b in self.log.iter_headers(prev_pos, pos):
            if b.max_timestamp > max_ts:
                max_ts, off_max = b.max_timestamp, b.base_offset + b.last_offset_delta
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        self._bytes_since_last_index_entry = pos - prev_pos
        return oi, ti, pos, prev_last, h.base_offset

    def _scan_valid(self, mm: mmap.mmap, file_size: int, oi: OffsetIndex, ti: TimeIndex, pos: int,
                    prev_last: int) -> int:
        unpack = BATCH_HEADER.unpack_from
        crc = _crc32c.crc32c
        epochs = self.recovered_epochs
        epoch = -1
        with memoryview(mm) as view:
            while file_size - pos >= BATCH_HEADER_SIZE:
                h = BatchHeader._make(unpack(view, pos))
                size = h.batch_length + LOG_OVERHEAD
                reason = None
                if h.batch_length < MIN_BATCH_LENGTH or pos + size > file_size:
                    reason = "torn or bad batch length"
                elif h.magic != MAGIC_V2:
                    reason = f"magic {h.magic}"
                elif h.base_offset <= prev_last or h.last_offset_delta < 0:
                    reason = f"offset {h.base_offset} not after {prev_last}"
                elif h.base_offset + h.last_offset_delta - self.base_offset > MAX_RELATIVE_OFFSET:
                    reason = "offset out of the segment's range"
                elif crc(view[pos + CRC_START : pos + size]) != h.crc:
                    reason = "CRC mismatch"
                if reason is not None:
                    log.warning(
                        "Found invalid batch at position %d of %s (%s); truncating", pos, self.log.path, reason
                    )
                    break
                self._index_batch(oi, ti, pos, h)
                if h.partition_leader_epoch > epoch:
                    epoch = h.partition_leader_epoch
                    epochs.append((epoch, h.base_offset))
                prev_last = h.base_offset + h.last_offset_delta
                pos += size
        return pos

    # ------------------------------------------------------------------ lifecycle

    def _finish_inactive(self, oi: OffsetIndex, ti: TimeIndex) -> None:
        max_ts = self.max_timestamp
        if max_ts >= 0 and ti.writable:
            ti.maybe_append(max_ts, self._offset_of_max_ts, skip_full_check=True)
        oi.trim()
        ti.trim()

    def on_become_inactive(self) -> None:
        """Segment rolled: final time index entry, trim indexes and a preallocated log."""
        self._finish_inactive(self.offset_index, self.time_index)
        self.log.trim()
        self._active = False
        self.dirty = True

    def make_active(self) -> None:
        """Segment becomes the active one again (after truncation)."""
        self._active = True
        if self._offset_index is not None and self._time_index is not None:
            self._offset_index.make_writable()
            self._time_index.make_writable()

    def truncate_to(self, offset: int, time_ms: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        if not self._active:
            self.make_active()
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._bytes_since_last_index_entry = 0
        if found is None:
            return 0
        removed = self.log.truncate_to(found[0])
        if self.log.size == 0:
            self.created_ms = time_ms
            self._rolling_ts = None
            self._rolling_ts_loaded = True
        # largest timestamp: last time index entry, then the batches after it
        ts, ts_off = self.time_index.last_entry()
        self._max_ts, self._offset_of_max_ts = ts, ts_off
        _, pos = self.offset_index.lookup(ts_off)
        for _p, h in self.log.iter_headers(pos):
            if h.max_timestamp > self._max_ts:
                self._max_ts = h.max_timestamp
                self._offset_of_max_ts = h.base_offset + h.last_offset_delta
        self.dirty = True
        return removed

    def flush(self) -> None:
        self.log.flush()
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()
        self.dirty = False

    def close(self) -> None:
        """Clean close: final time index entry for an active segment, trim, close files."""
        if self._active and self._offset_index is not None and self._time_index is not None:
            self._finish_inactive(self._offset_index, self._time_index)
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        self._offset_index = self._time_index = None
        self.txn_index.close()
        self.log.close()

    def close_handlers(self) -> None:
        """Unmap the indexes and close the descriptor without trimming or writing."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        self._offset_index = self._time_index = None
        self._indexes_need_rebuild = True
        self.txn_index.close_handler()
        self.log.close_fd()

    def rename_for_delete(self) -> None:
        """Append ``.deleted`` to the file names; the log descriptor stays open so
        outstanding file regions remain readable until :meth:`delete_files`."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        self._offset_index = self._time_index = None
        self._indexes_need_rebuild = True
        for path in (self.offset_index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, Path(f"{path}{DELETED_SUFFIX}"))
        self.txn_index.close_handler()
        self.txn_index.rename_to(Path(f"{self.txn_index_path}{DELETED_SUFFIX}"))
        if self.log.is_open or self.log.path.exists():
            with contextlib.suppress(OSError):
                self.log.fileno()  # keep the data reachable through the descriptor
            self.log.rename_to(Path(f"{self.log.path}{DELETED_SUFFIX}"))
        self._renamed_for_delete = True

    def delete_files(self) -> None:
        """Close and unlink (``.deleted`` names if renamed, else the live names)."""
        self.log.delete()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handler()
        self._offset_index = self._time_index = None
        suffix = DELETED_SUFFIX if self._renamed_for_delete else ""
        self.txn_index.delete()
        for path in (self.offset_index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{path}{suffix}")

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, active={self._active})"
