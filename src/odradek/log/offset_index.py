"""Sparse offset index of one segment: ``<base offset>.index`` (Kafka's OffsetIndex).

Byte layout: a flat array of 8-byte big-endian entries, sorted by offset::

    offset  size  field
    0       4     relativeOffset   int32   offset - segment base offset
    4       4     position         int32   byte position of the batch in the .log file

An entry ``(o, p)`` says: the batch starting at byte ``p`` has last offset
``base + o``. Entries are added every ``index.interval.bytes`` of appended data,
so a lookup gives a position from which at most that many bytes of batch headers
must be scanned. See :mod:`odradek.log.abstract_index` for preallocation and
trimming.
"""

from __future__ import annotations

import struct
from pathlib import Path

from odradek.log.abstract_index import AbstractIndex, Buffer
from odradek.log.errors import CorruptIndexError

ENTRY = struct.Struct(">ii")  # (relativeOffset, position): the one definition of the layout above
_I32 = struct.Struct(">i")
MAX_RELATIVE_OFFSET = 2**31 - 1


def _position_key(mm: Buffer, slot: int) -> int:
    return int(_I32.unpack_from(mm, (slot << 3) + 4)[0])


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8
    KIND = "offset index"

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True,
                 absent: bool = False) -> None:
        super().__init__(path, base_offset, max_index_size, writable=writable, absent=absent)

    def _slot_key(self, mm: Buffer, slot: int) -> int:
        relative: int = _I32.unpack_from(mm, slot * 8)[0]
        return self.base_offset + relative

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` unless the last entry is monotonic (Kafka's check,
        plus: a zero relative offset can only be the first entry, which catches an
        untrimmed, zero-filled tail)."""
        n = self._entries
        if n == 0 or self._mm is None:
            return
        rel, pos = ENTRY.unpack_from(self._mm, (n - 1) * 8)
        if rel < 0 or pos < 0:
            raise CorruptIndexError(f"corrupt {self.KIND} {self.path}: negative last entry")
        if n > 1:
            prev_rel, prev_pos = ENTRY.unpack_from(self._mm, (n - 2) * 8)
            if rel <= prev_rel or pos <= prev_pos:
                raise CorruptIndexError(
                    f"corrupt {self.KIND} {self.path}: last entry ({rel}, {pos}) "
                    f"not after ({prev_rel}, {prev_pos})"
                )

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        if self._entries == 0 or self._mm is None:
            return self.base_offset
        relative: int = _I32.unpack_from(self._mm, (self._entries - 1) * 8)[0]
        return self.base_offset + relative

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base offset, 0)."""
        if self._entries == 0 or self._mm is None:
            return self.base_offset, 0
        rel, pos = ENTRY.unpack_from(self._mm, (self._entries - 1) * 8)
        return self.base_offset + rel, pos

    def entry(self, n: int) -> tuple[int, int]:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(n)
        rel, pos = ENTRY.unpack_from(self._mm, n * 8)
        return self.base_offset + rel, pos

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset`` as (absolute offset, position);
        (base offset, 0) when there is none. Checks the last entry first: consumers
        tailing the log look up offsets past it."""
        mm = self._mm
        n = self._entries
        base = self.base_offset
        if mm is None or n == 0:
            return base, 0
        rel = offset - base
        unpack = _I32.unpack_from
        last = (n - 1) << 3
        if unpack(mm, last)[0] <= rel:
            slot = n - 1
        elif unpack(mm, 0)[0] > rel:
            return base, 0
        else:
            lo, hi = 0, n - 1  # entry lo <= rel < entry hi
            while hi - lo > 1:
                mid = (lo + hi) >> 1
                if unpack(mm, mid << 3)[0] <= rel:
                    lo = mid
                else:
                    hi = mid
            slot = lo
        r, pos = ENTRY.unpack_from(mm, slot << 3)
        return base + r, pos

    def entries_below(self, offset: int) -> int:
        """How many entries have an offset < ``offset``."""
        return self._largest_lower_bound_slot(offset - 1) + 1

    def position_at_most(self, position: int) -> int:
        """Largest indexed batch position <= ``position`` (positions grow with the entries), or -1."""
        slot = self._largest_lower_bound_slot(position, _position_key)
        return -1 if slot < 0 or self._mm is None else int(_I32.unpack_from(self._mm, (slot << 3) + 4)[0])

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must increase strictly."""
        if self._entries and offset <= self.last_offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to {self.KIND} {self.path} "
                f"whose last offset is {self.last_offset}"
            )
        rel = offset - self.base_offset
        if not 0 <= rel <= MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(f"offset {offset} out of the relative range of {self.path}")
        mm = self._ensure_append()
        ENTRY.pack_into(mm, self._entries * 8, rel, position)
        self._entries += 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset)
        if slot < 0:
            n = 0
        elif self._slot_key(self._mm, slot) == offset:  # type: ignore[arg-type]
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)
