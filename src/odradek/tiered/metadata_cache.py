"""Kafka's RemoteLogMetadataCache and RemotePartitionMetadataStore: the remote segments of a partition by
leader epoch, kept from the ``__remote_log_metadata`` records. Pure: no I/O, no threads, no clock.

A segment is added when its copy starts (COPY_SEGMENT_STARTED) and changes state with each update record;
which lookups see it depends on its state, as in Kafka:

==============================================  =======  ========  =============  ==============
lookup                                          STARTED  FINISHED  DELETE_START.  DELETE_FINISHED
==============================================  =======  ========  =============  ==============
``remote_log_segment_metadata(epoch, offset)``  no       yes       no             no (forgotten)
``list_remote_log_segments(epoch)``             yes      yes       yes            no
``list_all_remote_log_segments()``              yes      yes       yes            no
==============================================  =======  ========  =============  ==============

Per leader epoch (Kafka's RemoteLogLeaderEpochState) the cache keeps the start offset of the epoch in each
FINISHED segment holding it, mapped to that segment, and a set of "unreferenced" segments (being copied,
being deleted, or replaced): those are listed so that they can be deleted, never read. When a segment
finishes copying, the segments already mapped for the epoch whose start is at or after the new one's are
unreferenced while the epoch's highest copied offset is not past the new segment's end for the epoch — a
new leader that copied a superset of what the old leader had copied replaces it, so that a read of an
offset finds the newest copy (Kafka's case-1 "duplicate" and case-2 "overlapping" segments). One difference:
a FINISHED segment whose epoch start is the same as a mapped one's but that is not replaced by it (the new
copy covers less of the epoch) takes its place in the map as in Kafka, and the one it displaces is kept
among the unreferenced, so that retention still lists it for deletion (Kafka's map drops it from the epoch's
listing; it stays only in ``list_all_remote_log_segments``).

:class:`RemotePartitionMetadataStore` holds one cache per user partition, and what a broker does on
restart, or a follower that becomes leader: load the partitions it needs, replay the records of their
metadata partitions (:meth:`RemotePartitionMetadataStore.replay`), then mark them initialized. Until
then an update for an unknown segment is dropped (its COPY_SEGMENT_STARTED record may have been before the
replay's start); afterwards it is an error (:class:`RemoteResourceNotFoundError`), as in Kafka.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable

from odradek.tiered.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    deserialize,
)
from odradek.tiered.storage import RemoteResourceNotFoundError, RemoteStorageError

log = logging.getLogger(__name__)

S = RemoteLogSegmentState


class RemoteMetadataNotReadyError(RemoteStorageError):
    """The partition's metadata is still being replayed (Kafka answers REPLICA_NOT_AVAILABLE, retriable)."""


class _EpochState:
    """Kafka's RemoteLogLeaderEpochState: one leader epoch's segments."""

    __slots__ = ("_offsets", "_ids", "unreferenced", "highest_offset")

    def __init__(self) -> None:
        self._offsets: list[int] = []  # ascending start offsets of the epoch in FINISHED segments
        self._ids: dict[int, RemoteLogSegmentId] = {}
        self.unreferenced: dict[RemoteLogSegmentId, None] = {}  # a set that keeps insertion order
        self.highest_offset: int | None = None  # of the segments that reached COPY_SEGMENT_FINISHED

    def floor(self, offset: int) -> RemoteLogSegmentId | None:
        i = bisect.bisect_right(self._offsets, offset)
        return self._ids[self._offsets[i - 1]] if i else None

    def referenced(self) -> list[RemoteLogSegmentId]:
        return [self._ids[o] for o in self._offsets]

    def copy_started(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced[sid] = None

    def copy_finished(self, start: int, sid: RemoteLogSegmentId, epoch_end: int) -> None:
        while (
            self._offsets
            and self._offsets[-1] >= start
            and self.highest_offset is not None
            and self.highest_offset <= epoch_end
        ):
            replaced = self._ids.pop(self._offsets.pop())
            self.unreferenced[replaced] = None
        i = bisect.bisect_left(self._offsets, start)
        if i == len(self._offsets) or self._offsets[i] != start:
            self._offsets.insert(i, start)
        else:  # the same start offset mapped to an older copy that was not replaced above: Kafka's put
            self.unreferenced[self._ids[start]] = None
        self._ids[start] = sid
        self.unreferenced.pop(sid, None)
        if self.highest_offset is None or epoch_end > self.highest_offset:
            self.highest_offset = epoch_end

    def delete_started(self, start: int, sid: RemoteLogSegmentId) -> None:
        if self._ids.get(start) == sid:
            del self._ids[start]
            self._offsets.pop(bisect.bisect_left(self._offsets, start))
        self.unreferenced[sid] = None

    def delete_finished(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced.pop(sid, None)


class RemoteLogMetadataCache:
    """Kafka's RemoteLogMetadataCache for one user partition: see the module docstring."""

    def __init__(self) -> None:
        self._segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._epochs: dict[int, _EpochState] = {}
        self._initialized = False

    def mark_initialized(self) -> None:
        self._initialized = True

    @property
    def initialized(self) -> bool:
        return self._initialized

    # --- lookups ---

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written in ``leader_epoch``, if any."""
        state = self._epochs.get(leader_epoch)
        sid = state.floor(offset) if state is not None else None
        if sid is None:
            return None
        m = self._segments[sid]
        return m if offset <= m.epoch_end_offset(leader_epoch) else None

    def next_segment_with_txn_index(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """From the segment holding ``offset`` of ``leader_epoch`` on, the first whose transaction index
        is not empty (Kafka 4.4's nextSegmentWithTxnIndex: the aborted transactions of a remote read)."""
        m = self.remote_log_segment_metadata(leader_epoch, offset)
        while m is not None and m.txn_idx_empty:
            m = self.remote_log_segment_metadata(leader_epoch, m.end_offset + 1)
        return m

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` in a segment that reached COPY_SEGMENT_FINISHED (it stays
        when the segment is deleted later, as in Kafka)."""
        state = self._epochs.get(leader_epoch)
        return state.highest_offset if state is not None else None

    def list_remote_log_segments(self, leader_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """The segments holding records of ``leader_epoch`` in any state but DELETE_SEGMENT_FINISHED, by
        start offset: what retention walks."""
        state = self._epochs.get(leader_epoch)
        if state is None:
            return []
        out = [self._segment(sid) for sid in state.referenced()]
        if state.unreferenced:
            out += [self._segment(sid) for sid in state.unreferenced]
            out.sort(key=lambda m: m.start_offset)
        return out

    def list_all_remote_log_segments(self) -> list[RemoteLogSegmentMetadata]:
        """Every segment not DELETE_SEGMENT_FINISHED, in the order their copies started."""
        return list(self._segments.values())

    def _segment(self, sid: RemoteLogSegmentId) -> RemoteLogSegmentMetadata:
        m = self._segments.get(sid)
        if m is None:
            raise RemoteResourceNotFoundError(f"no remote log segment metadata for {sid}")
        return m

    # --- changes ---

    def add_copy_in_progress_segment(self, m: RemoteLogSegmentMetadata) -> None:
        """A COPY_SEGMENT_STARTED record: the segment is listed (for deletion) but not readable yet."""
        if m.state is not S.COPY_SEGMENT_STARTED:
            raise ValueError(f"{m.segment_id} added in state {m.state.name}, not COPY_SEGMENT_STARTED")
        existing = self._segments.get(m.segment_id)
        if not self._valid(existing.state if existing else None, m.state, m.segment_id):
            return
        for epoch, _ in m.segment_leader_epochs:
            self._epochs.setdefault(epoch, _EpochState()).copy_started(m.segment_id)
        self._segments[m.segment_id] = m

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """An update record: the segment moves to ``update.state`` (an invalid transition is logged and
        dropped, as Kafka does)."""
        existing = self._segments.get(update.segment_id)
        if existing is None:
            if not self._initialized:
                log.debug("dropping %s: its segment's metadata was not replayed", update)
                return
            raise RemoteResourceNotFoundError(f"no remote log segment metadata for {update.segment_id}")
        if not self._valid(existing.state, update.state, update.segment_id):
            return
        if update.state is S.COPY_SEGMENT_STARTED:
            raise ValueError(f"{update.segment_id}: an update cannot move a segment to COPY_SEGMENT_STARTED")
        m = existing.create_with_updates(update)
        for epoch, start in m.segment_leader_epochs:
            state = self._epochs.setdefault(epoch, _EpochState())
            if update.state is S.COPY_SEGMENT_FINISHED:
                state.copy_finished(start, m.segment_id, m.epoch_end_offset(epoch))
            elif update.state is S.DELETE_SEGMENT_STARTED:
                state.delete_started(start, m.segment_id)
            else:
                state.delete_finished(m.segment_id)
        if update.state is S.DELETE_SEGMENT_FINISHED:
            del self._segments[m.segment_id]
        else:
            self._segments[m.segment_id] = m

    @staticmethod
    def _valid(src: RemoteLogSegmentState | None, target: RemoteLogSegmentState, sid: RemoteLogSegmentId) -> bool:
        if S.is_valid_transition(src, target):
            return True
        log.error(
            "remote log segment %s cannot move from %s to %s: dropping the event",
            sid, src.name if src is not None else None, target.name,
        )
        return False


class RemotePartitionMetadataStore:
    """Kafka's RemotePartitionMetadataStore: the caches of the user partitions this broker follows or leads,
    fed with every ``__remote_log_metadata`` record of their metadata partitions."""

    def __init__(self) -> None:
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self._deletes: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = {}

    def maybe_load_partition(self, tp: TopicIdPartition) -> None:
        self._caches.setdefault(tp, RemoteLogMetadataCache())

    def mark_initialized(self, tp: TopicIdPartition) -> None:
        self._caches[tp].mark_initialized()

    def is_initialized(self, tp: TopicIdPartition) -> bool:
        cache = self._caches.get(tp)
        return cache is not None and cache.initialized

    def clear_topic_partition(self, tp: TopicIdPartition) -> None:
        self._caches.pop(tp, None)

    def partitions(self) -> list[TopicIdPartition]:
        return list(self._caches)

    def delete_state(self, tp: TopicIdPartition) -> RemotePartitionDeleteMetadata | None:
        return self._deletes.get(tp)

    def handle(self, m: RemoteLogMetadata) -> None:
        """One record (Kafka's RemotePartitionMetadataEventHandler.handleRemoteLogMetadata). Its partition
        must be loaded (KeyError otherwise; the replay filters by partition)."""
        if isinstance(m, RemoteLogSegmentMetadata):
            self._loaded(m.topic_id_partition).add_copy_in_progress_segment(m)
        elif isinstance(m, RemoteLogSegmentMetadataUpdate):
            try:
                self._loaded(m.topic_id_partition).update_remote_log_segment_metadata(m)
            except RemoteResourceNotFoundError as e:
                log.warning("updating a remote log segment: %s", e)
        elif isinstance(m, RemotePartitionDeleteMetadata):
            self._deletes[m.topic_id_partition] = m
            if m.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._caches.pop(m.topic_id_partition, None)
                self._deletes.pop(m.topic_id_partition, None)
        else:
            raise ValueError(f"{type(m).__name__} is not an event of __remote_log_metadata")

    def _loaded(self, tp: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self._caches.get(tp)
        if cache is None:
            raise KeyError(f"no partition metadata loaded for {tp}")
        return cache

    def replay(self, values: Iterable[bytes | bytearray | memoryview], partitions: Iterable[TopicIdPartition]) -> int:
        """Rebuild ``partitions``' caches from the record values of their metadata partitions, in offset
        order (what a restarted broker or a new follower does, Kafka's ConsumerTask), then mark them
        initialized; records of other partitions are skipped. Returns the records applied."""
        wanted = set(partitions)
        for tp in wanted:
            self.maybe_load_partition(tp)
        applied = 0
        for value in values:
            m = deserialize(value)
            of = partition_of(m)
            if of is None or of not in wanted:
                continue
            if of not in self._caches:  # its DELETE_PARTITION_FINISHED came earlier in the replay
                self.maybe_load_partition(of)
            self.handle(m)
            applied += 1
        for tp in wanted:
            if tp in self._caches:
                self.mark_initialized(tp)
        return applied

    # --- Kafka's RemoteLogMetadataManager reads ---

    def _ready(self, tp: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self._caches.get(tp)
        if cache is None:
            raise RemoteResourceNotFoundError(f"no remote log metadata for partition {tp}")
        if not cache.initialized:
            raise RemoteMetadataNotReadyError(f"remote log metadata of {tp} is not initialized yet")
        return cache

    def remote_log_segment_metadata(
        self, tp: TopicIdPartition, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        return self._ready(tp).remote_log_segment_metadata(leader_epoch, offset)

    def next_segment_with_txn_index(
        self, tp: TopicIdPartition, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        return self._ready(tp).next_segment_with_txn_index(leader_epoch, offset)

    def highest_offset_for_epoch(self, tp: TopicIdPartition, leader_epoch: int) -> int | None:
        return self._ready(tp).highest_offset_for_epoch(leader_epoch)

    def list_remote_log_segments(
        self, tp: TopicIdPartition, leader_epoch: int | None = None
    ) -> list[RemoteLogSegmentMetadata]:
        cache = self._ready(tp)
        if leader_epoch is None:
            return cache.list_all_remote_log_segments()
        return cache.list_remote_log_segments(leader_epoch)

    def remote_log_size(self, tp: TopicIdPartition, leader_epoch: int) -> int:
        """Kafka's RemoteLogMetadataManager.remoteLogSize: the bytes of the epoch's listed segments."""
        return sum(m.segment_size_in_bytes for m in self.list_remote_log_segments(tp, leader_epoch))


def partition_of(m: RemoteLogMetadata) -> TopicIdPartition | None:
    if isinstance(m, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
        return m.topic_id_partition
    if isinstance(m, RemotePartitionDeleteMetadata):
        return m.topic_id_partition
    return None  # a snapshot record names no partition

