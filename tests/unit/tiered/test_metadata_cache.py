"""odradek.tiered.metadata_cache: Kafka's RemoteLogMetadataCache and RemotePartitionMetadataStore, pure."""

from __future__ import annotations

import uuid

import pytest

from odradek.tiered.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    serialize,
)
from odradek.tiered.metadata_cache import (
    RemoteLogMetadataCache,
    RemoteMetadataNotReadyError,
    RemotePartitionMetadataStore,
)
from odradek.tiered.storage import RemoteResourceNotFoundError

S = RemoteLogSegmentState
TP = TopicIdPartition(uuid.UUID(int=1), "orders", 0)
OTHER = TopicIdPartition(uuid.UUID(int=2), "other", 0)


def seg(
    start: int, end: int, epochs: dict[int, int] | None = None, tp: TopicIdPartition = TP, txn_empty: bool = True
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tp), start, end, 0, 1, 0, (end - start + 1) * 10,
        epochs if epochs is not None else {0: start}, txn_idx_empty=txn_empty,
    )


def upd(m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(m.segment_id, 1, None, state, 2)


def copied(cache: RemoteLogMetadataCache, *segments: RemoteLogSegmentMetadata) -> None:
    for m in segments:
        cache.add_copy_in_progress_segment(m)
        cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))


def ids(segments: list[RemoteLogSegmentMetadata]) -> list[uuid.UUID]:
    return [m.segment_id.id for m in segments]


def test_a_segment_is_readable_only_once_copied() -> None:
    cache = RemoteLogMetadataCache()
    m = seg(0, 99)
    cache.add_copy_in_progress_segment(m)
    assert cache.remote_log_segment_metadata(0, 50) is None
    assert cache.highest_offset_for_epoch(0) is None
    assert ids(cache.list_remote_log_segments(0)) == ids(cache.list_all_remote_log_segments()) == [m.segment_id.id]
    cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))
    found = cache.remote_log_segment_metadata(0, 50)
    assert found is not None and found.state is S.COPY_SEGMENT_FINISHED and found.broker_id == 2
    assert cache.remote_log_segment_metadata(0, 0) == cache.remote_log_segment_metadata(0, 99) == found
    assert cache.remote_log_segment_metadata(0, 100) is None
    assert cache.remote_log_segment_metadata(1, 50) is None
    assert cache.highest_offset_for_epoch(0) == 99


def test_lookups_respect_the_epochs_inside_a_segment() -> None:
    cache = RemoteLogMetadataCache()
    a = seg(0, 99, {0: 0, 1: 50})
    b = seg(100, 199, {1: 100, 3: 120})
    copied(cache, a, b)
    assert cache.remote_log_segment_metadata(0, 49) == cache.remote_log_segment_metadata(1, 50)
    assert cache.remote_log_segment_metadata(0, 50) is None  # offset 50 was written in epoch 1
    assert ids([cache.remote_log_segment_metadata(1, 119)]) == [b.segment_id.id]  # type: ignore[list-item]
    assert cache.remote_log_segment_metadata(1, 120) is None
    assert cache.remote_log_segment_metadata(3, 199) is not None
    assert cache.remote_log_segment_metadata(2, 110) is None
    assert [cache.highest_offset_for_epoch(e) for e in range(4)] == [49, 119, None, 199]
    assert ids(cache.list_remote_log_segments(1)) == [a.segment_id.id, b.segment_id.id]


def test_deletion_hides_then_forgets_a_segment() -> None:
    cache = RemoteLogMetadataCache()
    a, b = seg(0, 99), seg(100, 199)
    copied(cache, a, b)
    cache.update_remote_log_segment_metadata(upd(a, S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(0, 50) is None
    assert ids(cache.list_remote_log_segments(0)) == [a.segment_id.id, b.segment_id.id]  # still to delete
    cache.update_remote_log_segment_metadata(upd(a, S.DELETE_SEGMENT_FINISHED))
    assert ids(cache.list_remote_log_segments(0)) == ids(cache.list_all_remote_log_segments()) == [b.segment_id.id]
    assert cache.highest_offset_for_epoch(0) == 199
    cache.mark_initialized()
    with pytest.raises(RemoteResourceNotFoundError):  # its records are done with; an update of it is an error
        cache.update_remote_log_segment_metadata(upd(a, S.DELETE_SEGMENT_FINISHED))


def test_a_segment_whose_copy_failed_is_listed_for_deletion_never_read() -> None:
    cache = RemoteLogMetadataCache()
    failed = seg(0, 99)
    cache.add_copy_in_progress_segment(failed)
    cache.update_remote_log_segment_metadata(upd(failed, S.DELETE_SEGMENT_STARTED))  # STARTED -> DELETE: valid
    assert cache.remote_log_segment_metadata(0, 10) is None
    assert ids(cache.list_remote_log_segments(0)) == [failed.segment_id.id]


def test_invalid_transitions_are_dropped() -> None:
    cache = RemoteLogMetadataCache()
    m = seg(0, 99)
    cache.add_copy_in_progress_segment(m)
    cache.update_remote_log_segment_metadata(upd(m, S.DELETE_SEGMENT_FINISHED))  # STARTED -> DELETE_FINISHED
    assert cache.list_all_remote_log_segments()[0].state is S.COPY_SEGMENT_STARTED
    with pytest.raises(ValueError):  # an update never starts a copy
        cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_STARTED))
    cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))
    cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))  # a retry: a self transition
    cache.add_copy_in_progress_segment(m)  # FINISHED -> STARTED: dropped
    assert cache.remote_log_segment_metadata(0, 5) is not None
    with pytest.raises(ValueError):
        cache.add_copy_in_progress_segment(m.create_with_updates(upd(m, S.COPY_SEGMENT_FINISHED)))


def test_a_new_leaders_larger_copy_replaces_the_old_ones() -> None:
    # Kafka's case-1: L0 copied 0-100 for epoch 0, L1 copies 0-200 for the same epoch
    cache = RemoteLogMetadataCache()
    s0, s1 = seg(0, 100), seg(0, 200)
    copied(cache, s0, s1)
    found = cache.remote_log_segment_metadata(0, 50)
    assert found is not None and found.segment_id == s1.segment_id
    assert sorted(ids(cache.list_remote_log_segments(0))) == sorted([s0.segment_id.id, s1.segment_id.id])
    assert cache.highest_offset_for_epoch(0) == 200


def test_overlapping_copies_are_read_from_the_newest() -> None:
    # Kafka's case-2: L0 copied 10-90, L1 copies 5-100 and 101-200; offset 95 is in L1's first
    cache = RemoteLogMetadataCache()
    s0, s1, s2 = seg(10, 90), seg(5, 100), seg(101, 200)
    copied(cache, s0, s1, s2)
    for offset, want in ((95, s1), (10, s1), (5, s1), (150, s2)):
        found = cache.remote_log_segment_metadata(0, offset)
        assert found is not None and found.segment_id == want.segment_id, offset
    assert [m.start_offset for m in cache.list_remote_log_segments(0)] == [5, 10, 101]


def test_a_smaller_copy_at_the_same_start_keeps_the_displaced_one_listed() -> None:
    cache = RemoteLogMetadataCache()
    big, small = seg(0, 200), seg(0, 100)
    copied(cache, big, small)
    found = cache.remote_log_segment_metadata(0, 50)
    assert found is not None and found.segment_id == small.segment_id  # Kafka's map: the last put wins
    assert sorted(ids(cache.list_remote_log_segments(0))) == sorted([big.segment_id.id, small.segment_id.id])


def test_next_segment_with_txn_index() -> None:
    cache = RemoteLogMetadataCache()
    a, b, c = seg(0, 99), seg(100, 199), seg(200, 299, txn_empty=False)
    copied(cache, a, b, c)
    found = cache.next_segment_with_txn_index(0, 10)
    assert found is not None and found.segment_id == c.segment_id
    assert cache.next_segment_with_txn_index(0, 300) is None
    cache2 = RemoteLogMetadataCache()
    copied(cache2, seg(0, 99), seg(100, 199))
    assert cache2.next_segment_with_txn_index(0, 0) is None


def test_an_update_before_its_segment_is_dropped_while_replaying() -> None:
    cache = RemoteLogMetadataCache()
    m = seg(0, 99)
    cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))  # not initialized: dropped
    assert cache.list_all_remote_log_segments() == []
    cache.mark_initialized()
    with pytest.raises(RemoteResourceNotFoundError):
        cache.update_remote_log_segment_metadata(upd(m, S.COPY_SEGMENT_FINISHED))


def _history() -> tuple[list[RemoteLogMetadata], dict[str, RemoteLogSegmentMetadata]]:
    a = seg(0, 99, {0: 0})
    b = seg(100, 249, {0: 100, 1: 200})
    failed = seg(250, 399, {1: 250})
    c = seg(250, 399, {1: 250}, txn_empty=False)
    o = seg(0, 9, tp=OTHER)
    records: list[RemoteLogMetadata] = [
        a, upd(a, S.COPY_SEGMENT_FINISHED),
        o, upd(o, S.COPY_SEGMENT_FINISHED),
        b, upd(b, S.COPY_SEGMENT_FINISHED),
        failed,  # the leader died mid-copy; the next one copied the segment again, then cleaned up
        c, upd(c, S.COPY_SEGMENT_FINISHED),
        upd(failed, S.DELETE_SEGMENT_STARTED), upd(failed, S.DELETE_SEGMENT_FINISHED),
        upd(a, S.DELETE_SEGMENT_STARTED), upd(a, S.DELETE_SEGMENT_FINISHED),  # retention
    ]
    return records, {"a": a, "b": b, "c": c, "failed": failed, "o": o}


def test_replaying_the_records_rebuilds_what_the_leader_has() -> None:
    records, segs = _history()
    live = RemotePartitionMetadataStore()
    live.maybe_load_partition(TP)
    live.maybe_load_partition(OTHER)
    for r in records:
        live.handle(r)
    live.mark_initialized(TP)

    follower = RemotePartitionMetadataStore()
    applied = follower.replay([serialize(r) for r in records], [TP])  # only the partition it needs
    assert applied == len(records) - 2
    assert follower.partitions() == [TP]
    for store in (live, follower):
        assert ids(store.list_remote_log_segments(TP)) == [segs["b"].segment_id.id, segs["c"].segment_id.id]
        assert store.remote_log_segment_metadata(TP, 0, 50) is None  # deleted by retention
        found = store.remote_log_segment_metadata(TP, 1, 300)
        assert found is not None and found.segment_id == segs["c"].segment_id
        assert store.highest_offset_for_epoch(TP, 1) == 399
        assert store.highest_offset_for_epoch(TP, 0) == 199
        assert store.remote_log_size(TP, 1) == segs["b"].segment_size_in_bytes + segs["c"].segment_size_in_bytes
        nxt = store.next_segment_with_txn_index(TP, 0, 100)
        assert nxt is None  # epoch 0 ends in b, whose txn index is empty
    with pytest.raises(RemoteResourceNotFoundError):
        follower.list_remote_log_segments(OTHER)


def test_a_replay_from_the_middle_drops_updates_of_segments_it_never_saw() -> None:
    records, segs = _history()
    store = RemotePartitionMetadataStore()
    store.replay([serialize(r) for r in records[4:]], [TP])  # a's records are before the replay's start
    assert ids(store.list_remote_log_segments(TP)) == [segs["b"].segment_id.id, segs["c"].segment_id.id]


def test_reads_wait_for_the_replay() -> None:
    store = RemotePartitionMetadataStore()
    store.maybe_load_partition(TP)
    with pytest.raises(RemoteMetadataNotReadyError):
        store.remote_log_segment_metadata(TP, 0, 0)
    store.mark_initialized(TP)
    assert store.remote_log_segment_metadata(TP, 0, 0) is None
    with pytest.raises(KeyError):
        store.handle(seg(0, 9, tp=OTHER))


def test_a_finished_partition_deletion_forgets_the_partition() -> None:
    store = RemotePartitionMetadataStore()
    a = seg(0, 99)
    marked = RemotePartitionDeleteMetadata(TP, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 5, 0)
    finished = RemotePartitionDeleteMetadata(TP, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, 6, 0)
    store.replay([serialize(x) for x in (a, upd(a, S.COPY_SEGMENT_FINISHED), marked)], [TP])
    assert store.delete_state(TP) == marked
    assert len(store.list_remote_log_segments(TP)) == 1
    store.handle(finished)
    assert store.delete_state(TP) is None
    assert not store.is_initialized(TP)
    with pytest.raises(RemoteResourceNotFoundError):
        store.list_remote_log_segments(TP)
