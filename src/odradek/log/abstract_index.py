"""Common machinery of the memory-mapped sparse indexes (``.index``, ``.timeindex``).

An index file is a flat array of fixed-size big-endian entries, sorted by offset
(see :mod:`odradek.log.offset_index` and :mod:`odradek.log.time_index` for the
entry layouts). While its segment is active the file is preallocated to
``segment.index.bytes`` rounded down to a multiple of the entry size and the
number of valid entries is kept in memory; when the segment is rolled or closed
the file is trimmed to ``entries * entry_size`` bytes (Kafka does the same), so a
trimmed file's entry count is its size divided by the entry size.

The file descriptor is closed as soon as the map exists (the map keeps the file
alive), so a loaded index costs no descriptor.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from odradek.log.errors import CorruptIndexError


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int]
    KIND: ClassVar[str]

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._mm: mmap.mmap | None = None
        self._entries = 0
        self._max_entries = 0
        self._allocated = 0  # bytes of the file known to be backed by written blocks
        self._closed = False
        self._open()

    # ------------------------------------------------------------------ mapping

    def _open(self) -> None:
        es = self.ENTRY_SIZE
        flags = os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY
        fd = os.open(self.path, flags, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size % es:
                raise CorruptIndexError(f"{self.KIND} file {self.path} has size {size}, not a multiple of {es}")
            self._entries = size // es
            self._allocated = size
            if self._writable and size:
                # a crashed active index was extended sparse: only the start is backed by blocks
                with contextlib.suppress(OSError):
                    self._allocated = min(size, os.lseek(fd, 0, os.SEEK_HOLE))
            if self._writable:
                target = max(self._max_index_size // es * es, size)
                if target != size:
                    os.ftruncate(fd, target)
                length = target
            else:
                length = size
            self._max_entries = length // es if self._writable else self._entries
            if length:
                access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
                self._mm = mmap.mmap(fd, length, access=access)
            else:
                self._mm = None
        finally:
            os.close(fd)
        self._closed = False

    def _unmap(self) -> None:
        if self._mm is not None:
            if self._writable:
                self._mm.flush()
            self._mm.close()
            self._mm = None

    def _resize_file(self, new_size: int) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, new_size)
        finally:
            os.close(fd)

    def trim(self) -> None:
        """Shrink the file to its valid entries and map it read-only (segment no longer active)."""
        if self._closed:
            return
        entries = self._entries
        self._unmap()
        if self._writable:
            self._resize_file(entries * self.ENTRY_SIZE)
        self._writable = False
        self._open()

    def make_writable(self) -> None:
        """Re-open a trimmed index for appends (its segment became active again)."""
        if self._writable and not self._closed:
            return
        self._unmap()
        self._writable = True
        self._open()

    def flush(self) -> None:
        if self._mm is not None and self._writable:
            self._mm.flush()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trim and unmap."""
        if self._closed:
            return
        if self._writable:
            self.trim()
        self._unmap()
        self._closed = True

    def close_handler(self) -> None:
        """Unmap without trimming (file about to be deleted or renamed)."""
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
        if not self._writable:
            # a trimmed index shrinks with its entries
            self._unmap()
            self._resize_file(n * self.ENTRY_SIZE)
            self._open()

    def _ensure_append(self) -> mmap.mmap:
        if not self._writable or self._mm is None:
            raise CorruptIndexError(f"{self.KIND} {self.path} is not writable")
        if self._entries >= self._max_entries:
            raise CorruptIndexError(f"attempt to append to a full {self.KIND} {self.path}")
        end = (self._entries + 1) * self.ENTRY_SIZE
        if end > self._allocated:
            self._allocate(end)
        return self._mm

    _ALLOCATE_CHUNK = 64 * 1024

    def _allocate(self, end: int) -> None:
        """Back the preallocated (sparse) file with written zeros before the mapping
        touches it: a first write through the mapping into a hole costs ~2.6 ms here (the
        page fault allocates blocks), a pwrite of the same page ~10 µs. Without this,
        creating or recovering 1,000 partitions spends seconds in page faults."""
        assert self._mm is not None
        chunk = self._ALLOCATE_CHUNK
        new = min(-(-end // chunk) * chunk, len(self._mm))
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.pwrite(fd, bytes(new - self._allocated), self._allocated)
        finally:
            os.close(fd)
        self._allocated = new

    def _slot_key(self, mm: mmap.mmap, slot: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _largest_lower_bound_slot(
        self, target: int, key: Callable[[mmap.mmap, int], int] | None = None
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
