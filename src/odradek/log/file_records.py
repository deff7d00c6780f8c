"""The ``.log`` file of a segment (Kafka's FileRecords) and fetch result types.

Byte layout of a ``.log`` file: record batches (magic v2, see
:mod:`odradek.protocol.records`) laid end to end, exactly as produced, with
baseOffset and partitionLeaderEpoch rewritten by the leader. There is no file
header and no padding; with ``preallocate`` the file is extended with zeros while
active and trimmed to the last batch when the segment is rolled or closed (a
zero batchLength ends a scan).

The file descriptor is opened lazily (segments of an idle partition cost no
descriptor), and the file of a new partition's first segment is only made when
first used and stays open until the file is closed or, for a deleted segment,
until its delayed deletion, so a :class:`~odradek.protocol.fetch_response.FileRegion`
(``length`` bytes at ``position`` of this file) handed to the network layer
stays readable with ``os.sendfile`` for ``file.delete.delay.ms``. Only batch
headers are ever read into Python (61-byte ``os.pread`` calls).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
)


class FetchData(NamedTuple):
    """Result of ``Log.read``: regions of one segment, ``size`` bytes in total.

    ``segment_base_offset``/``position`` locate the first batch returned (Kafka's
    fetch offset metadata); both are -1 for an empty result."""

    regions: list[FileRegion]
    size: int
    fetch_offset: int
    segment_base_offset: int = -1
    position: int = -1

    @classmethod
    def empty(cls, fetch_offset: int) -> FetchData:
        return cls([], 0, fetch_offset)


class FileRecords:
    def __init__(self, path: Path, size: int, *, preallocated_size: int = 0) -> None:
        self.path = path
        self._size = size
        self._fd = -1
        self._closed = False
        self._preallocated = preallocated_size > 0
        self._create_to = -1  # >= 0: the file does not exist yet; created (at this size) when first opened
        self.splicer: object | None = None  # the follower reader writing past the end right now, if any

    @classmethod
    def create(cls, path: Path, *, preallocate_to: int = 0, lazy: bool = False) -> FileRecords:
        """A new, empty file. ``lazy``: made on first use (a partition nobody writes to
        costs no file and no descriptor; 10,000 new partitions cost 10,000 files fewer)."""
        fr = cls(path, 0, preallocated_size=preallocate_to)
        fr._create_to = preallocate_to
        if not lazy:
            fr.fileno()
        return fr

    # ------------------------------------------------------------------ handle

    def fileno(self) -> int:
        fd = self._fd
        if fd >= 0:
            return fd
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        if self._create_to >= 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            if self._create_to > 0:
                os.ftruncate(fd, self._create_to)
            self._create_to = -1
        else:
            fd = os.open(self.path, os.O_RDWR)
        self._fd = fd
        return fd

    @property
    def exists(self) -> bool:
        """False while a lazily created file has not been made yet."""
        return self._create_to < 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def preallocated(self) -> bool:
        return self._preallocated

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        """Close the descriptor (trimming a preallocated file first)."""
        self.trim()
        self.close_fd()

    def close_fd(self) -> None:
        """Close the descriptor without trimming; the file cannot be reopened."""
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def release_fd(self) -> None:
        """Close the descriptor; the next use opens the file again. Only while nothing holds
        a region of this file (loading)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def trim(self) -> None:
        if self._create_to >= 0:
            self._preallocated = False
            self._create_to = 0
            return
        if self.splicer is not None:  # rolled or closed under a follower's splice: its bytes go now
            self.discard_past_end()
        if self._preallocated and not self._closed:
            os.ftruncate(self.fileno(), self._size)
            self._preallocated = False

    def rename_to(self, path: Path) -> None:
        if self._create_to < 0:
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close_fd()
        self._closed = True
        if self._create_to >= 0:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    # ------------------------------------------------------------------ writing

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the end; returns the position it was written at."""
        fd = self.fileno()
        pos = self._size
        view = memoryview(data)
        total = len(view)
        written = os.pwrite(fd, view, pos)
        while written < total:
            written += os.pwrite(fd, view[written:], pos + written)
        self._size = pos + total
        return pos

    def append_written(self, position: int, n: int) -> int:
        """Count ``n`` bytes a caller already wrote at the end (``position``, the current size)
        straight into the file: a follower's records spliced from its socket. Returns ``position``."""
        if position != self._size or self._preallocated:
            raise ValueError(f"{self.path}: bytes written at {position}, the end is {self._size}")
        self._size = position + n
        return position

    @property
    def splice_position(self) -> int:
        """Where bytes written straight into the file must go to be appended with
        :meth:`append_written`; -1 when they cannot be (a preallocated file, whose tail of zeros a
        writer past the end would overwrite; a closed or not yet made file)."""
        if self._preallocated or self._closed or self._create_to >= 0 or self.splicer is not None:
            return -1
        return self._size

    def discard_past_end(self) -> None:
        """Cut whatever was written past the end and not appended (a splice the log refused or
        did not take whole); the file ends at its last appended byte again."""
        if self._fd >= 0 and not self._closed and not self._preallocated:
            os.ftruncate(self._fd, self._size)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the number of bytes removed."""
        if size >= self._size and not self._preallocated:
            return 0
        removed = max(self._size - size, 0)
        os.ftruncate(self.fileno(), size)
        self._size = size
        self._preallocated = False
        return removed

    def flush(self) -> None:
        """fsync; a descriptor never opened in this process has nothing to flush."""
        if self._fd >= 0:
            os.fsync(self._fd)

    # ------------------------------------------------------------------ reading

    def pread(self, n: int, position: int) -> bytes:
        return os.pread(self.fileno(), n, position)

    def read_header(self, position: int, end: int | None = None) -> BatchHeader | None:
        """The header of the batch at ``position`` if it frames correctly within ``end``
        (default: the file size), else None. Reads 61 bytes, nothing else."""
        limit = self._size if end is None else end
        if limit - position < BATCH_HEADER_SIZE:
            return None
        buf = os.pread(self.fileno(), BATCH_HEADER_SIZE, position)
        if len(buf) < BATCH_HEADER_SIZE:
            return None
        h = BatchHeader._make(BATCH_HEADER.unpack(buf))
        if h.batch_length < MIN_BATCH_LENGTH or position + h.batch_length + LOG_OVERHEAD > limit:
            return None
        return h

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` from ``start`` until a batch does not frame."""
        limit = self._size if end is None else end
        pos = start
        fd = self.fileno()
        unpack = BATCH_HEADER.unpack
        while limit - pos >= BATCH_HEADER_SIZE:
            buf = os.pread(fd, BATCH_HEADER_SIZE, pos)
            if len(buf) < BATCH_HEADER_SIZE:
                return
            h = BatchHeader._make(unpack(buf))
            size = h.batch_length + LOG_OVERHEAD
            if h.batch_length < MIN_BATCH_LENGTH or pos + size > limit:
                return
            yield pos, h
            pos += size

    def __repr__(self) -> str:
        return f"FileRecords({self.path}, size={self._size})"
