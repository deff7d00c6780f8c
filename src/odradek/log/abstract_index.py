"""Common machinery of the sparse indexes (``.index``, ``.timeindex``).

An index file is a flat array of fixed-size big-endian entries, sorted by offset
(see :mod:`odradek.log.offset_index` and :mod:`odradek.log.time_index` for the
entry layouts). A file on disk always holds exactly its entries: its entry count
is its size divided by the entry size.

While its segment is active an index lives in memory (a ``bytearray`` of its
entries, which are few: one per ``index.interval.bytes`` of log) and is written to
its file when the segment is flushed, rolled or closed. The files of a new segment
are only made then (``absent``): making two files per partition on its first append
was half of the broker's time in a first produce across 10,000 new partitions here
(Kafka makes them when it creates the segment); a segment with data always has both
files once it was flushed, rolled or closed, and one lost in a crash before that is
above the recovery point, so recovered and its indexes rebuilt. At most
``segment.index.bytes`` worth of entries fit (Kafka's limit). Kafka maps the active
index preallocated to that size instead; here a map would cost a descriptor per
index (CPython's ``mmap`` keeps a duplicate of the file's descriptor) and 64 KB of
zeros written per index, which at 10,000 partitions exhausted the descriptor limit.
Nothing is lost: an index is only trusted after a crash up to the recovery point,
which only moves when the segment (and so the index) is flushed; later segments are
rebuilt by the recovery.

When the segment stops being active the index is mapped read-only (``mmap``; the
descriptor is closed as soon as the map exists).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from odradek.fsutil import fsync_file
from odradek.log.errors import CorruptIndexError

# what lookups read entries from: the read-only map of an inactive index, or the
# in-memory entries of an active one
Buffer = mmap.mmap | bytearray


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int]
    KIND: ClassVar[str]

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True,
                 absent: bool = False) -> None:
        """``absent`` (writable only): the file is known not to exist yet (a new segment's); it is
        made when the entries are first written out rather than opened now."""
        self.path = path
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._mm: Buffer | None = None
        self._entries = 0
        self._max_entries = 0
        self._on_disk = 0  # writable: leading entries the file is known to hold unchanged
        self._file_entries = 0  # writable: the file's size in entries
        self._closed = False
        self._file_missing = absent and writable
        if self._file_missing:
            self._mm = bytearray()
            self._max_entries = max_index_size // self.ENTRY_SIZE
        else:
            self._open()

    # ------------------------------------------------------------------ mapping

    def _open(self) -> None:
        es = self.ENTRY_SIZE
        if self._writable:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # the file is there, as in Kafka
            try:
                size = os.fstat(fd).st_size
                if size % es:
                    raise CorruptIndexError(f"{self.KIND} file {self.path} has size {size}, not a multiple of {es}")
                buf = bytearray(os.pread(fd, size, 0)) if size else bytearray()
            finally:
                os.close(fd)
            if len(buf) != size:
                raise CorruptIndexError(f"{self.KIND} file {self.path} changed size while read")
            self._entries = self._on_disk = self._file_entries = size // es
            self._max_entries = max(self._max_index_size // es, self._entries)
            self._mm = buf
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if size % es:
                    raise CorruptIndexError(f"{self.KIND} file {self.path} has size {size}, not a multiple of {es}")
                self._entries = self._max_entries = size // es
                self._mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
            finally:
                os.close(fd)
        self._closed = False

    def _persist(self, *, sync: bool = False) -> None:
        """Write the in-memory entries the file lacks and cut it to the entry count."""
        if not self._writable or self._closed or not isinstance(self._mm, bytearray):
            return
        es = self.ENTRY_SIZE
        n = self._entries
        if self._on_disk == n and self._file_entries == n and not sync and not self._file_missing:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self._on_disk < n:
                os.pwrite(fd, memoryview(self._mm)[self._on_disk * es : n * es], self._on_disk * es)
            if self._file_entries != n or self._file_missing:  # a file thought missing may hold stale bytes
                os.ftruncate(fd, n * es)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._on_disk = self._file_entries = n
        self._file_missing = False

    def _unmap(self) -> None:
        mm = self._mm
        self._mm = None
        if isinstance(mm, mmap.mmap):
            mm.close()

    def _resize_file(self, new_size: int) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, new_size)
        finally:
            os.close(fd)

    def trim(self) -> None:
        """Write the entries out and map the file read-only (segment no longer active)."""
        if self._closed:
            return
        self._persist()
        self._unmap()
        self._writable = False
        self._open()

    def make_writable(self) -> None:
        """Re-open a trimmed index for appends (its segment became active again)."""
        if self._writable and not self._closed:
            return
        self._file_missing = False
        self._unmap()
        self._writable = True
        self._open()

    def flush(self) -> None:
        if self._writable and not self._closed:
            self._persist(sync=True)
            return
        with contextlib.suppress(FileNotFoundError):
            fsync_file(self.path)

    def close(self) -> None:
        """Write out and release."""
        if self._closed:
            return
        self._persist()
        self._unmap()
        self._closed = True

    def close_handler(self) -> None:
        """Release without writing (file about to be deleted or renamed, or a simulated crash)."""
        self._unmap()
        self._closed = True

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close_handler()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    # ------------------------------------------------------------------ entries

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def writable(self) -> bool:
        return self._writable

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        if n == self._entries:
            return
        self._entries = n
        if self._writable:
            self._on_disk = min(self._on_disk, n)
            if isinstance(self._mm, bytearray):
                del self._mm[n * self.ENTRY_SIZE :]
        else:
            # a trimmed index shrinks with its entries
            self._unmap()
            self._resize_file(n * self.ENTRY_SIZE)
            self._open()

    def _ensure_append(self) -> bytearray:
        """The in-memory entries with room for one more at ``entries * ENTRY_SIZE``."""
        mm = self._mm
        if not self._writable or not isinstance(mm, bytearray):
            raise CorruptIndexError(f"{self.KIND} {self.path} is not writable")
        if self._entries >= self._max_entries:
            raise CorruptIndexError(f"attempt to append to a full {self.KIND} {self.path}")
        end = (self._entries + 1) * self.ENTRY_SIZE
        if len(mm) < end:
            mm.extend(bytes(end - len(mm)))
        return mm

    def _slot_key(self, mm: Buffer, slot: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _largest_lower_bound_slot(
        self, target: int, key: Callable[[Buffer, int], int] | None = None
    ) -> int:
        """Largest slot whose key (default ``_slot_key``) is <= target, or -1; keys must grow with slots."""
        mm = self._mm
        n = self._entries
        if mm is None or n == 0:
            return -1
        key = key or self._slot_key
        if key(mm, 0) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if key(mm, mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path}, entries={self._entries})"
