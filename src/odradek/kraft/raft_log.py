"""``__cluster_metadata-0`` as the Raft core's log: :class:`~odradek.raft.log.RaftLog` over
:class:`~odradek.metadata.log_store.MetadataLog` (Kafka's KafkaMetadataLog implementing ReplicatedLog).

Entries are stored as v2 batches, as Kafka's raft layer writes them: the entries of one ``append`` with the
same epoch and kind make one batch whose ``partitionLeaderEpoch`` is that epoch; an application entry is a
record with a null key and the entry's bytes as its value (a metadata record, :mod:`odradek.metadata.records`);
the leader's LeaderChangeMessage is a control batch (:mod:`odradek.metadata.batches`). The epoch of each
offset comes from the log's leader epoch cache (``leader-epoch-checkpoint``), which the batches' epochs fill.

``read`` finds the batch holding the offset through the segment's offset index (odradek.log's ``Log.read``)
and decodes the batches from there: whole batches only, the first one whatever its size and the next ones
while they fit in ``max_bytes`` (Kafka's log read with minOneMessage, whose readers drop a partial trailing
batch). A batch is one write of the controller (a topic's TopicRecord and PartitionRecords, a deletion's
RemoveTopicRecords): a fetcher never gets part of it, so a Kafka broker never applies part of it.

Snapshots are the ``.checkpoint`` files of :class:`~odradek.metadata.log_store.MetadataLog`; the raft core sees
their ids (its ``OffsetAndEpoch``), reads them in byte chunks for FetchSnapshot and installs a fetched one
(``MetadataLog.install_snapshot``). The bootstrap snapshot (``0-0``) is one of them, at the log start 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage as KioLeaderChange
from kio.schema.leader_change_message.v0.data import Voter
from kio.schema.types import BrokerId
from kio.static.primitive import i16

from odradek.metadata.batches import decode_control, encode_control
from odradek.metadata.log_store import MetadataLog, SnapshotId
from odradek.protocol.records import build_batch, decode_records, iter_batches
from odradek.raft.log import LeaderChangeMessage, LogEntry, OffsetAndEpoch


def to_kio_leader_change(m: LeaderChangeMessage) -> KioLeaderChange:
    return KioLeaderChange(
        version=i16(0),
        leader_id=BrokerId(m.leader_id),
        voters=tuple(Voter(voter_id=BrokerId(v)) for v in m.voters),
        granting_voters=tuple(Voter(voter_id=BrokerId(v)) for v in m.granting_voters),
    )


def from_kio_leader_change(m: KioLeaderChange) -> LeaderChangeMessage:
    return LeaderChangeMessage(int(m.leader_id), tuple(int(v.voter_id) for v in m.voters),
                               tuple(int(v.voter_id) for v in m.granting_voters))


def entries_to_batches(entries: Sequence[LogEntry], now_ms: int) -> bytes:
    """The v2 batches of ``entries``: one per run of entries of one epoch and one kind."""
    out = bytearray()
    i = 0
    while i < len(entries):
        j = i
        while j < len(entries) and entries[j].epoch == entries[i].epoch and entries[j].is_control == entries[i].is_control:
            j += 1
        run = entries[i:j]
        if run[0].is_control:
            records = [encode_control(to_kio_leader_change(e.value)) for e in run
                       if isinstance(e.value, LeaderChangeMessage)]
            out += build_batch(records, base_offset=run[0].offset, timestamp=now_ms,
                               partition_leader_epoch=run[0].epoch, control=True)
        else:
            out += build_batch([(None, e.value) for e in run], base_offset=run[0].offset, timestamp=now_ms,
                               partition_leader_epoch=run[0].epoch)
        i = j
    return bytes(out)


def batches_to_entries(data: bytes | bytearray | memoryview, start_offset: int = 0) -> list[LogEntry]:
    """The entries of v2 batches at or after ``start_offset`` (control records other than LeaderChangeMessage
    are left out)."""
    view = memoryview(data)
    out: list[LogEntry] = []
    for pos, h in iter_batches(view):
        if h.last_offset < start_offset:
            continue
        for r in decode_records(view[pos : pos + h.size]):
            if r.offset < start_offset:
                continue
            if h.is_control:
                message = decode_control(r.key, r.value)
                if isinstance(message, KioLeaderChange):
                    out.append(LogEntry(r.offset, h.partition_leader_epoch, from_kio_leader_change(message)))
            else:
                out.append(LogEntry(r.offset, h.partition_leader_epoch, r.value or b""))
    return out


class MetadataRaftLog:
    """A :class:`~odradek.raft.log.RaftLog` over ``__cluster_metadata-0``; ``clock`` gives the append time."""

    def __init__(self, mlog: MetadataLog, clock: Callable[[], int]) -> None:
        self.mlog = mlog
        self.clock = clock

    def end_offset(self) -> int:
        return self.mlog.log_end_offset

    def last_fetched_epoch(self) -> int:
        return max(self.mlog.last_epoch(), 0)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found, end = self.mlog.log.leader_epoch_cache.end_offset_for(epoch, self.mlog.log_end_offset)
        if found < 0:
            # no epoch of the log as old: the snapshot the log starts at ends the epochs before (Kafka's
            # KafkaMetadataLog.endOffsetForEpoch answers with the earliest snapshot's id)
            earliest = self.earliest_snapshot_id()
            if earliest is not None and earliest.offset == self.start_offset() and earliest.epoch <= epoch:
                return earliest
            return OffsetAndEpoch(0, 0)
        return OffsetAndEpoch(found, end)

    def start_offset(self) -> int:
        return self.mlog.log_start_offset

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        snapshots = self.mlog.snapshots()
        return OffsetAndEpoch(snapshots[0].epoch, snapshots[0].end_offset) if snapshots else None

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        latest = self.mlog.latest_snapshot()
        return OffsetAndEpoch(latest.epoch, latest.end_offset) if latest is not None else None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        sid = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        if sid not in self.mlog.snapshots():
            return None
        try:
            with open(self.mlog.snapshot_path(sid), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                return size, os.pread(f.fileno(), max(0, min(max_bytes, size - position)), position)
        except FileNotFoundError:  # deleted by retention meanwhile
            return None

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.mlog.install_snapshot(SnapshotId(snapshot_id.offset, snapshot_id.epoch), data, self.clock())

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        if start_offset >= self.mlog.log_end_offset:
            return ()
        # the batches from the one holding start_offset, found through the offset index (Log.read)
        data = self.mlog.log.read(start_offset, max_bytes, self.mlog.log_end_offset, True)
        raw = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in data.regions)
        out: list[LogEntry] = []
        size = 0
        view = memoryview(raw)
        for pos, h in iter_batches(view):
            if h.last_offset < start_offset:
                continue
            entries = batches_to_entries(view[pos : pos + h.size], start_offset)
            batch_size = sum(e.size() for e in entries)
            if out and size + batch_size > max_bytes:
                break
            out += entries
            size += batch_size
        return tuple(out)

    def append(self, entries: Sequence[LogEntry]) -> None:
        if entries:
            self.mlog.append(entries_to_batches(entries, self.clock()), self.clock())
            self.mlog.flush()

    def truncate_to(self, offset: int) -> None:
        self.mlog.truncate_to(offset, self.clock())
