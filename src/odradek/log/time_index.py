"""Sparse time index of one segment: ``<base offset>.timeindex`` (Kafka's TimeIndex).

Byte layout: a flat array of 12-byte big-endian entries::

    offset  size  field
    0       8     timestamp        int64   a max timestamp seen in the segment so far
    8       4     relativeOffset   int32   offset of the batch that carried it - base offset

Timestamps and offsets both increase down the file: an entry is written (at the
same moments as offset index entries, and once more when the segment is rolled
or closed) only if the segment's max timestamp has grown since the last entry.
So the last entry holds the segment's largest timestamp once it is inactive. See
:mod:`odradek.log.abstract_index` for preallocation and trimming.
"""

from __future__ import annotations

import struct
from pathlib import Path

from odradek.log.abstract_index import AbstractIndex, Buffer
from odradek.log.errors import CorruptIndexError

ENTRY = struct.Struct(">qi")  # (timestamp, relativeOffset): the one definition of the layout above
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    KIND = "time index"

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True,
                 absent: bool = False) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable, absent=absent)

    def _slot_key(self, mm: Buffer, slot: int) -> int:
        timestamp: int = _I64.unpack_from(mm, slot * 12)[0]
        return timestamp

    def _slot_offset(self, mm: Buffer, slot: int) -> int:
        relative: int = _I32.unpack_from(mm, slot * 12 + 8)[0]
        return self.base_offset + relative

    def sanity_check(self) -> None:
        n = self._entries
        if n == 0 or self._mm is None:
            return
        ts, rel = ENTRY.unpack_from(self._mm, (n - 1) * 12)
        first_ts = _I64.unpack_from(self._mm, 0)[0]
        if rel < 0 or ts < first_ts:
            raise CorruptIndexError(f"corrupt {self.KIND} {self.path}: last entry ({ts}, {rel})")
        if n > 1:
            prev_ts, prev_rel = ENTRY.unpack_from(self._mm, (n - 2) * 12)
            if ts <= prev_ts or rel < prev_rel:
                raise CorruptIndexError(
                    f"corrupt {self.KIND} {self.path}: last entry ({ts}, {rel}) not after ({prev_ts}, {prev_rel})"
                )

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base offset)."""
        if self._entries == 0 or self._mm is None:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = ENTRY.unpack_from(self._mm, (self._entries - 1) * 12)
        return ts, self.base_offset + rel

    def entry(self, n: int) -> tuple[int, int]:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(n)
        ts, rel = ENTRY.unpack_from(self._mm, n * 12)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= ``timestamp`` as (timestamp, absolute offset);
        (-1, base offset) when there is none."""
        slot = self._largest_lower_bound_slot(timestamp)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        assert self._mm is not None
        ts, rel = ENTRY.unpack_from(self._mm, slot * 12)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's.

        ``skip_full_check`` lets the final entry of a rolled segment use the slot
        Kafka keeps for it: the index reports full one entry early."""
        last_ts, last_off = self.last_entry()
        if self._entries and timestamp <= last_ts:
            return False
        if self._entries and offset < last_off:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to {self.KIND} {self.path} whose last offset is {last_off}"
            )
        if not skip_full_check and self.is_full():
            raise CorruptIndexError(f"attempt to append to a full {self.KIND} {self.path}")
        if not self._writable or self._mm is None or self._entries >= self._max_entries:
            raise CorruptIndexError(f"{self.KIND} {self.path} has no room for an entry")
        ENTRY.pack_into(self._ensure_append(), self._entries * 12, timestamp, offset - self.base_offset)
        self._entries += 1
        return True

    def is_full(self) -> bool:
        # one slot is kept for the final entry written when the segment is rolled
        return self._entries >= self._max_entries - 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        mm = self._mm
        n = self._entries
        if mm is None or n == 0:
            return
        # offsets are non-decreasing: find the first slot with offset >= target
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._slot_offset(mm, mid) < offset:
                lo = mid + 1
            else:
                hi = mid
        self._truncate_to_entries(lo)
