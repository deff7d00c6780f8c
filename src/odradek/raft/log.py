"""The replicated log as the Raft core sees it: Kafka's ``ReplicatedLog`` interface, narrowed.

The core (``client.RaftReplica``) reads and changes the log only through :class:`RaftLog`: its end
offset, the epoch of its last entry (Kafka's ``lastFetchedEpoch``), the end offset of an epoch (Kafka's
``endOffsetForEpoch``, from the leader epoch cache), reading entries from an offset, appending entries
(each with its offset and epoch, as the leader assigned them) and truncating. The ``__cluster_metadata``
log of the later slice implements it over record batches; :class:`InMemoryRaftLog` implements it for
the tests and the simulation, and is as durable as the object that holds it.

:func:`validate_offset_and_epoch` and :func:`truncate_to_end_offset` are Kafka's default methods of
``ReplicatedLog`` of the same names, written over the interface: the leader's answer to a Fetch (go on,
truncate to this epoch's end offset, or fetch the latest snapshot when the fetch offset is below the log
start offset), and the follower's truncation on that answer.

Snapshots (KIP-630): a log whose start offset has moved forward keeps a snapshot at that offset (Kafka's
``earliestSnapshotId``) and maybe later ones (``latestSnapshotId``); the leader serves a snapshot's bytes
in chunks (``read_snapshot``, FetchSnapshot) and a follower that fetched all of one installs it
(``install_snapshot``: Kafka's ``createNewSnapshot``, ``freeze`` and ``truncateToLatestSnapshot``: the log
then starts, empty, at the snapshot's end offset).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    """Kafka's LeaderChangeMessage control record (version 0): written by a new leader at the start of
    its epoch so that an entry of its own epoch can commit (and with it all before)."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of the log: its offset, the leader epoch it was written in, and its value
    (application bytes, or the leader's LeaderChangeMessage control record)."""

    offset: int
    epoch: int
    value: bytes | LeaderChangeMessage

    @property
    def is_control(self) -> bool:
        return isinstance(self.value, LeaderChangeMessage)

    def size(self) -> int:
        return len(self.value) if isinstance(self.value, bytes) else 16


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """Kafka's OffsetAndEpoch; ordered by epoch first, then offset (``compareTo``)."""

    epoch: int
    offset: int


class RaftLog(Protocol):
    """What the Raft core needs of its log (Kafka's ReplicatedLog)."""

    def start_offset(self) -> int:
        """The log start offset: 0, or the end offset of the snapshot the log was truncated to."""
        ...

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The oldest snapshot kept (the one at the log start offset once the start moved)."""
        ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        """``(the snapshot's size in bytes, up to max_bytes of it from position)``; None when there is no such
        snapshot."""
        ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep ``data`` as the snapshot ``snapshot_id`` and start the log, empty, at its end offset."""
        ...

    def end_offset(self) -> int:
        """The offset the next entry gets (Kafka's ``endOffset().offset()``)."""
        ...

    def last_fetched_epoch(self) -> int:
        """The epoch of the last entry, 0 for an empty log (Kafka's ``lastFetchedEpoch``)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch in the log not above ``epoch`` and the offset where it ends (the start of
        the next epoch, or the end offset); ``(0, 0)`` when the log has no epoch that small."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        """Entries from ``start_offset`` on, at least one if there is any, at most ``max_bytes`` (a log that keeps
        batches, as ``__cluster_metadata-0`` does, returns whole batches only: the first whatever its size)."""
        ...

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append entries whose offsets continue the log's end offset."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at ``offset`` or above."""
        ...


class InMemoryRaftLog:
    """A :class:`RaftLog` in a list, with Kafka's leader epoch cache as a list of (epoch, start offset)."""

    def __init__(self, entries: Sequence[LogEntry] = ()) -> None:
        self.entries: list[LogEntry] = []
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset), epochs increasing
        self.append(entries)

    def end_offset(self) -> int:
        return len(self.entries)

    def start_offset(self) -> int:
        return 0

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        return None

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        return None

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        raise NotImplementedError("the in-memory log keeps no snapshots")

    def last_fetched_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        for i in range(len(self._epochs) - 1, -1, -1):
            e, _ = self._epochs[i]
            if e <= epoch:
                end = self._epochs[i + 1][1] if i + 1 < len(self._epochs) else len(self.entries)
                return OffsetAndEpoch(e, end)
        return OffsetAndEpoch(0, 0)

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        out: list[LogEntry] = []
        size = 0
        for entry in self.entries[start_offset:]:
            size += entry.size()
            if out and size > max_bytes:
                break
            out.append(entry)
        return tuple(out)

    def append(self, entries: Sequence[LogEntry]) -> None:
        for entry in entries:
            if entry.offset != len(self.entries):
                raise ValueError(f"append at offset {entry.offset}, but the log ends at {len(self.entries)}")
            last = self._epochs[-1][0] if self._epochs else 0
            if entry.epoch < last:
                raise ValueError(f"append of epoch {entry.epoch} after epoch {last}")
            if entry.epoch > last:
                self._epochs.append((entry.epoch, entry.offset))
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def epoch_at(self, offset: int) -> int:
        return self.entries[offset].epoch


@dataclass(frozen=True, slots=True)
class ValidOffsetAndEpoch:
    """Kafka's ValidOffsetAndEpoch: valid; diverging (``valid`` False) with the leader's end of the
    largest epoch not above the fetcher's last fetched epoch, which the fetcher truncates to; or
    ``snapshot`` with the id of the latest snapshot, which the fetcher must fetch."""

    valid: bool
    offset_and_epoch: OffsetAndEpoch
    snapshot: bool = False


def validate_offset_and_epoch(log: RaftLog, offset: int, epoch: int) -> ValidOffsetAndEpoch:
    """Kafka's ReplicatedLog.validateOffsetAndEpoch: is (fetch offset, last fetched epoch) a prefix of
    this log? If not, where the fetcher's log diverges from it, or, when the fetcher is behind the log
    start offset (or its epoch before the oldest snapshot's), the latest snapshot it must fetch."""
    start = log.start_offset()
    if start == 0 and offset == 0:
        return ValidOffsetAndEpoch(True, OffsetAndEpoch(0, 0))
    earliest = log.earliest_snapshot_id()
    if earliest is not None and (offset < start or (offset == start and epoch != earliest.epoch)
                                 or epoch < earliest.epoch):
        latest = log.latest_snapshot_id()
        if latest is None:
            raise ValueError(f"the log starts at {start} but has no snapshot")
        return ValidOffsetAndEpoch(False, latest, snapshot=True)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return ValidOffsetAndEpoch(False, end)
    return ValidOffsetAndEpoch(True, OffsetAndEpoch(epoch, offset))


def truncate_to_end_offset(log: RaftLog, end: OffsetAndEpoch) -> int:
    """Kafka's ReplicatedLog.truncateToEndOffset: truncate to the leader's end of ``end.epoch`` (or the
    end of the local epoch just below it), and return the offset truncated to."""
    if end.epoch == 0:
        offset = min(end.offset, log.end_offset())
    else:
        local = log.end_offset_for_epoch(end.epoch)
        offset = min(local.offset, end.offset) if local.epoch == end.epoch else local.offset
    log.truncate_to(offset)
    return offset
