"""Transaction index of one segment (Kafka's TransactionIndex, KIP-98).

``<base offset>.txnindex`` beside the segment's ``.log`` lists the transactions
*aborted* by an ABORT marker written in that segment, in the order of their
markers. A ``read_committed`` fetch reads the entries overlapping the fetched range
and returns them as the response's ``aborted_transactions``, so the consumer can
drop the aborted batches (see :meth:`odradek.log.log.Log.collect_aborted_transactions`).

Byte layout: a sequence of 34-byte entries, big-endian, no header::

    offset  size  field
    0       2     version            int16   0
    2       8     producerId         int64
    10      8     firstOffset        int64   first offset of the transaction
    18      8     lastOffset         int64   offset of its ABORT marker
    26      8     lastStableOffset   int64   the partition's first unstable offset once
                                             this transaction completed (the first offset
                                             of the earliest other ongoing transaction, or
                                             lastOffset + 1 when there was none)

Entries are appended with increasing ``lastOffset``. The file is created on the
first append (a segment without aborted transactions has none, or an empty one).

A file whose size is not a multiple of 34 has a torn tail (a crash during an
append): the partial entry is cut when the file is loaded. After an unclean
shutdown the indexes of the recovered segments are reset and refilled from the
batches by the log (:meth:`odradek.log.log.Log.open`), as Kafka's
LogSegment.recover does.

Entries are kept in memory once loaded (they are few: one per aborted transaction).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from odradek.log.errors import CorruptIndexError

log = logging.getLogger("odradek.log")

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(TXN_INDEX_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(f"unknown transaction index entry version {version}")
        return cls(pid, first, last, lso)


class TxnIndexSearchResult(NamedTuple):
    """Kafka's TxnIndexSearchResult: the entries overlapping the range, and whether the
    search can stop (an entry's lastStableOffset reached the upper bound: no later
    segment can hold a transaction that started below it)."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, path: Path, start_offset: int, *, absent: bool = False) -> None:
        """``absent``: the caller listed the directory and the file is not there (a segment that
        never held an aborted transaction): nothing to read, nothing to empty on reset."""
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = [] if absent else None  # None: not read yet
        self._absent = absent
        self._fd = -1
        self._dirty = False

    # ------------------------------------------------------------------ loading

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (Kafka's allAbortedTxns)."""
        e = self._entries
        if e is None:
            e = self._entries = self._load()
        return e

    def _load(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        torn = len(data) % ENTRY_SIZE
        if torn:
            log.warning("Truncating the torn tail (%d bytes) of transaction index %s", torn, self.path)
            os.truncate(self.path, len(data) - torn)
            data = data[: len(data) - torn]
        out: list[AbortedTxn] = []
        for pos in range(0, len(data), ENTRY_SIZE):
            try:
                out.append(AbortedTxn.decode(data, pos))
            except CorruptIndexError as exc:
                log.warning("Truncating transaction index %s at entry %d: %s", self.path, pos // ENTRY_SIZE, exc)
                os.truncate(self.path, pos)
                break
        return out

    def sanity_check(self) -> None:
        """Kafka's TransactionIndex.sanityCheck: every entry's lastOffset is at or above
        the segment's base offset, and lastOffsets increase."""
        prev = -1
        for e in self.entries:
            if e.last_offset < self.start_offset or e.last_offset <= prev or e.first_offset > e.last_offset:
                raise CorruptIndexError(f"transaction index {self.path} has an invalid entry {e}")
            prev = e.last_offset

    # ------------------------------------------------------------------ writing

    @property
    def last_offset(self) -> int:
        """lastOffset of the newest entry, -1 if none."""
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its lastOffset must exceed the last one's (Kafka throws too)."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"transaction index {self.path}: entry ending at {txn.last_offset} is not after "
                f"{entries[-1].last_offset}"
            )
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._absent = False
        os.write(self._fd, txn.encode())
        entries.append(txn)
        self._dirty = True

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
        self._dirty = False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose lastOffset is >= ``offset`` (log truncation)."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, keep * ENTRY_SIZE)
        self._dirty = True

    def reset(self) -> None:
        """Drop every entry (the file is kept, emptied)."""
        self._entries = []
        if not self._absent:  # a recovery resets every recovered segment's: no failed truncate per partition
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
        self._dirty = True

    # ------------------------------------------------------------------ reading

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries of transactions overlapping [fetch_offset, upper_bound_offset): lastOffset
        >= fetch_offset and firstOffset < upper_bound_offset (Kafka's collectAbortedTxns)."""
        out: list[AbortedTxn] = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                out.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.flush()
        self.close_handler()

    def close_handler(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close_handler()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._entries = []

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={len(self.entries)})"


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(e.encode() for e in entries)
