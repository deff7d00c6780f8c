"""Leader epoch cache of one partition (KIP-101/KIP-279) and its checkpoint file.

Each entry says "epoch E started at offset O": the first offset the leader of epoch E
appended. A replica asks the leader for the end offset of its latest epoch
(OffsetForLeaderEpoch) and truncates its log there, so a divergent tail written under a
stale leader is cut off instead of kept.

File ``leader-epoch-checkpoint`` in the partition directory (Kafka's checkpoint format)::

    0            <- version
    N            <- number of entries
    E O          <- epoch and start offset, one entry per line, ascending

Durability (as Kafka 3.7 after KAFKA-15046, which took the fsync off ``assign``): a new
epoch (``assign``) is only recorded in memory, so becoming leader of many partitions
touches no file; the log's flush writes the file with fsync (``sync``) before it moves the
recovery point, and after a crash the log's recovery re-assigns the epochs of the batches
it recovered (those past the recovery point). An epoch that never got a batch before a
crash is simply forgotten: nothing was written under it. Truncations rewrite the file at
once, fsynced but without the fsync of the directory that would make the rename durable (Kafka
writes them in full, but on its scheduler, off the request path): a crash may then leave the file
from before the truncation. An unreadable file is reported and ignored.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path
from typing import NamedTuple

from odradek.fsutil import write_atomic

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

log = logging.getLogger("odradek.log")


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, directory: Path | None) -> None:
        self.path = directory / FILE_NAME if directory is not None else None
        self.entries: list[EpochEntry] = []
        self._unsynced = False
        if self.path is not None and self.path.exists():
            try:
                self.entries = read_checkpoint(self.path)
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                log.warning("Ignoring unreadable leader epoch checkpoint %s: %s", self.path, e)

    # -- queries
    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        idx = bisect.bisect_right([e.start_offset for e in self.entries], offset) - 1
        return self.entries[idx].epoch if idx >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers: for the latest epoch, the log
        end offset; otherwise the start offset of the first epoch after the largest epoch
        ≤ ``requested_epoch`` (and that epoch). Unknown: (-1, -1)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self.entries]
        idx = bisect.bisect_right(epochs, requested_epoch)  # first epoch > requested
        if idx == 0:
            # the requested epoch is older than anything we know
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if idx == len(self.entries):
            return self.latest_epoch, log_end_offset
        return self.entries[idx - 1].epoch, self.entries[idx].start_offset

    # -- updates
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (no-op for a known or older epoch).
        Entries with a start offset ≥ the new one are dropped, as Kafka does."""
        if epoch < 0:
            return False
        if self.entries and epoch <= self.latest_epoch:
            return False
        self.entries = [e for e in self.entries if e.start_offset < start_offset]
        self.entries.append(EpochEntry(epoch, start_offset))
        self._unsynced = True  # written by the log's next flush (sync)
        return True

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """The log was truncated to ``end_offset``: drop epochs starting at or after it.
        ``write=False`` (loading a log): the next flush writes the file; a crash before then
        repeats the truncation on the next load."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            if write:
                self.flush()
            else:
                self._unsynced = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch covering it now starts there."""
        idx = bisect.bisect_right([e.start_offset for e in self.entries], start_offset) - 1
        if idx < 0 or (idx == 0 and self.entries[0].start_offset == start_offset):
            return  # nothing starts before the new log start
        covering = self.entries[idx]
        self.entries = [EpochEntry(covering.epoch, start_offset), *self.entries[idx + 1 :]]
        self.flush()

    def clear(self) -> None:
        self.entries = []
        self.flush()

    def flush(self) -> None:
        if self.path is not None:
            write_checkpoint(self.path, self.entries, sync_dir=False)
            self._unsynced = False

    def sync(self, *, fsync: bool = True) -> None:
        """Write (with fsync unless the caller syncs the file system itself) what ``assign``
        only recorded in memory."""
        if self._unsynced and self.path is not None:
            write_checkpoint(self.path, self.entries, fsync=fsync)
        self._unsynced = False


def write_checkpoint(path: Path, entries: list[EpochEntry], *, fsync: bool = True, sync_dir: bool = True) -> None:
    """Replace the file (:func:`odradek.fsutil.write_atomic`; ``fsync=False``: the caller syncs the file system)."""
    text = "0\n" + f"{len(entries)}\n" + "".join(f"{e.epoch} {e.start_offset}\n" for e in entries)
    write_atomic(path, text.encode("ascii"), sync=fsync, sync_dir=sync_dir)


def read_checkpoint(path: Path) -> list[EpochEntry]:
    lines = path.read_text(encoding="ascii").split("\n")
    if not lines or lines[0].strip() != "0":
        raise ValueError(f"{path}: unknown leader epoch checkpoint version")
    n = int(lines[1])
    out = []
    for line in lines[2 : 2 + n]:
        epoch, offset = line.split()
        out.append(EpochEntry(int(epoch), int(offset)))
    if len(out) != n:
        raise ValueError(f"{path}: expected {n} entries, found {len(out)}")
    return out
