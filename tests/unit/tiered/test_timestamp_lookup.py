"""ListOffsets by timestamp over the remote tier, pure (tiered/plan.py): which remote segments Kafka's
RemoteLogManager.findOffsetByTimestamp tries, in its order (by the log's leader epochs from the starting
offset's, the finished segments whose max timestamp and end offset reach the target, within the leader-epoch
lineage: isRemoteSegmentWithinLeaderEpochs and buildFilteredLeaderEpochMap, with the examples of Kafka's own
comments), the time index lookup (Kafka's TimeIndex.lookup) and the scan of a remote segment's batches
(lookupTimestamp). The segment metadata is listed by a fake store: a dict by leader epoch."""

from __future__ import annotations

import io
import struct
import uuid

import pytest

from odradek.protocol.records import COMPRESSION_GZIP, InvalidRecordError, build_batch
from odradek.tiered.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from odradek.tiered.plan import (
    TimestampAndOffset,
    filtered_leader_epochs,
    find_timestamp_in_batches,
    segment_within_leader_epochs,
    time_index_offset,
    timestamp_candidates,
)

S = RemoteLogSegmentState
TIP = TopicIdPartition(uuid.UUID(int=7), "t", 0)
NOW = 1_700_000_000_000


def seg(start: int, end: int, max_ts: int, epochs: tuple[tuple[int, int], ...] = ((0, 0),),
        state: S = S.COPY_SEGMENT_FINISHED) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TIP, uuid.uuid4()), start, end, max_ts, 0, NOW, 1000,
        epochs if epochs != ((0, 0),) else ((0, start),), state=state)


class FakeStore:
    """The remote segments by leader epoch, as RemoteLogMetadataCache.list_remote_log_segments lists them (by
    start offset); it notes the epochs asked."""

    def __init__(self, segments: list[RemoteLogSegmentMetadata]) -> None:
        self.segments = segments
        self.asked: list[int] = []

    def list(self, epoch: int) -> list[RemoteLogSegmentMetadata]:
        self.asked.append(epoch)
        return sorted((m for m in self.segments if epoch in dict(m.segment_leader_epochs)),
                      key=lambda m: m.start_offset)


def test_the_first_finished_segment_reaching_the_timestamp_and_the_starting_offset() -> None:
    a = seg(0, 9, NOW + 9)
    b = seg(10, 19, NOW + 19)
    c = seg(20, 29, NOW + 29)
    store = FakeStore([a, b, c])
    first = next(timestamp_candidates([(0, 0)], store.list, NOW + 12, 0, 100))
    assert first is b  # a's max timestamp is below the target
    assert list(timestamp_candidates([(0, 0)], store.list, NOW + 5, 12, 100)) == [b, c]  # a ends below 12
    assert list(timestamp_candidates([(0, 0)], store.list, NOW + 30, 0, 100)) == []  # no max timestamp reaches it


def test_only_finished_copies_within_the_log_end_are_tried() -> None:
    started = seg(0, 9, NOW + 9, state=S.COPY_SEGMENT_STARTED)
    deleting = seg(10, 19, NOW + 19, state=S.DELETE_SEGMENT_STARTED)
    done = seg(20, 29, NOW + 29)
    beyond = seg(30, 39, NOW + 39)
    store = FakeStore([started, deleting, done, beyond])
    assert list(timestamp_candidates([(0, 0)], store.list, 0, 0, 35)) == [done]  # beyond ends at the log end


def test_the_walk_starts_at_the_starting_offsets_epoch_and_goes_on_with_the_next_ones() -> None:
    old = seg(0, 9, NOW + 50, ((0, 0),))  # written in epoch 0: not walked when the start is in epoch 2
    e2 = seg(10, 19, NOW + 5, ((2, 10),))
    e3 = seg(20, 29, NOW + 60, ((3, 20),))
    e5 = seg(30, 39, NOW + 70, ((5, 30),))
    store = FakeStore([old, e2, e3, e5])
    epochs = [(0, 0), (2, 10), (3, 20), (5, 30)]
    found = list(timestamp_candidates(epochs, store.list, NOW + 40, 10, 100))
    assert found == [e3, e5]
    assert store.asked == [2, 3, 5]  # Kafka's epochForOffset(starting offset), then nextEpoch each time
    # lazy: the caller stops at the first segment it can use
    store.asked.clear()
    next(timestamp_candidates(epochs, store.list, NOW + 40, 10, 100))
    assert store.asked == [2, 3]
    # a starting offset below the first cached epoch: nothing is walked (Kafka's epochForOffset is empty)
    assert list(timestamp_candidates([(2, 10)], store.list, 0, 5, 100)) == []


def test_filtered_leader_epochs_drops_the_epochs_without_records() -> None:
    # Kafka's buildFilteredLeaderEpochMap javadoc: epoch 5 starts where 6 does
    epochs = [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40), (5, 60), (6, 60), (7, 70)]
    assert filtered_leader_epochs(epochs) == [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40), (6, 60), (7, 70)]
    assert filtered_leader_epochs([(0, 0)]) == [(0, 0)]


def test_a_segment_out_of_the_leader_epoch_lineage_is_not_tried() -> None:
    # Kafka's comment in isRemoteSegmentWithinLeaderEpochs: after segment1 is deleted the cache is
    # {(7, 51), (9, 100)}; segment2 (14-150, epochs {(5, 14), (7, 15), (9, 100)}) is still within it
    segment2 = seg(14, 150, NOW, ((5, 14), (7, 15), (9, 100)))
    assert segment_within_leader_epochs(segment2, 200, [(7, 51), (9, 100)])
    assert not segment_within_leader_epochs(segment2, 150, [(7, 51), (9, 100)])  # ends at the log end
    # a segment of an epoch the lineage does not hold (an unclean leader's copy)
    assert not segment_within_leader_epochs(seg(0, 9, NOW, ((1, 0),)), 100, [(0, 0), (2, 5)])
    # its last epoch past the lineage's last, or before its first
    assert not segment_within_leader_epochs(seg(0, 9, NOW, ((3, 0),)), 100, [(0, 0), (2, 5)])
    assert not segment_within_leader_epochs(seg(0, 9, NOW, ((0, 0),)), 100, [(2, 5), (3, 50)])
    # it runs past the start of the next epoch of the lineage (a diverged copy)
    assert not segment_within_leader_epochs(seg(0, 20, NOW, ((0, 0),)), 100, [(0, 0), (2, 15)])
    assert segment_within_leader_epochs(seg(0, 14, NOW, ((0, 0),)), 100, [(0, 0), (2, 15)])
    # its epochs after the first must start where the lineage's do
    assert not segment_within_leader_epochs(seg(0, 30, NOW, ((0, 0), (2, 12))), 100, [(0, 0), (2, 15)])
    assert segment_within_leader_epochs(seg(0, 30, NOW, ((0, 0), (2, 15))), 100, [(0, 0), (2, 15)])
    # the segment's first epoch in the lineage must not start before the lineage's entry for it
    assert not segment_within_leader_epochs(seg(10, 30, NOW, ((2, 10),)), 100, [(0, 0), (2, 15)])
    store = FakeStore([seg(0, 20, NOW + 20, ((0, 0),)), seg(15, 30, NOW + 30, ((2, 15),))])
    assert [(m.start_offset, m.end_offset) for m in
            timestamp_candidates([(0, 0), (2, 15)], store.list, NOW, 0, 100)] == [(15, 30)]


def time_index(*entries: tuple[int, int], preallocated: int = 0) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries) + b"\0" * 12 * preallocated


def test_time_index_offset_is_kafkas_time_index_lookup() -> None:
    index = time_index((NOW + 10, 0), (NOW + 20, 5), (NOW + 30, 9), preallocated=3)
    assert time_index_offset(index, 100, NOW) == 100  # below the first entry: the base offset
    assert time_index_offset(index, 100, NOW + 10) == 100
    assert time_index_offset(index, 100, NOW + 25) == 105
    assert time_index_offset(index, 100, NOW + 30) == 109
    assert time_index_offset(index, 100, NOW + 99) == 109  # the zeros of a preallocated index end it
    assert time_index_offset(b"", 100, NOW) == 100


def stream(*batches: bytes) -> io.BytesIO:
    return io.BytesIO(b"".join(batches))


def batch(base: int, timestamps: list[int], epoch: int = 3, **kw: object) -> bytes:
    return build_batch([(None, b"x")] * len(timestamps), base_offset=base, timestamps=timestamps,
                       partition_leader_epoch=epoch, **kw)  # type: ignore[arg-type]


def test_the_first_record_at_or_past_the_timestamp_in_the_batches() -> None:
    data = stream(batch(0, [NOW, NOW + 1, NOW + 2]), batch(3, [NOW + 10, NOW + 5, NOW + 20], epoch=4),
                  batch(6, [NOW + 30]))
    assert find_timestamp_in_batches(data.read, NOW + 4, 0, 1 << 20) == TimestampAndOffset(NOW + 10, 3, 4)
    data.seek(0)
    # timestamps need not grow within a batch: the first record reaching the target, by offset
    assert find_timestamp_in_batches(data.read, NOW + 11, 0, 1 << 20) == TimestampAndOffset(NOW + 20, 5, 4)
    data.seek(0)
    # records below the starting offset are skipped, even when their timestamps qualify
    assert find_timestamp_in_batches(data.read, NOW + 4, 4, 1 << 20) == TimestampAndOffset(NOW + 5, 4, 4)
    data.seek(0)
    assert find_timestamp_in_batches(data.read, NOW + 31, 0, 1 << 20) is None
    # a batch without a leader epoch answers none (-1)
    assert find_timestamp_in_batches(stream(batch(0, [NOW], epoch=-1)).read, NOW, 0, 1 << 20) == (NOW, 0, -1)


def test_log_append_time_and_compressed_batches() -> None:
    # LogAppendTime: every record carries the batch's max timestamp (Kafka's rule)
    lat = batch(10, [NOW, NOW, NOW], timestamp_type=1)
    assert find_timestamp_in_batches(stream(lat).read, NOW, 11, 1 << 20) == TimestampAndOffset(NOW, 11, 3)
    gz = batch(0, [NOW, NOW + 7, NOW + 9], compression=COMPRESSION_GZIP)
    assert find_timestamp_in_batches(stream(gz).read, NOW + 6, 0, 1 << 20) == TimestampAndOffset(NOW + 7, 1, 3)
    # a batch inflating past the bound is refused, not read
    big = build_batch([(None, b"\0" * 100_000)], timestamps=[NOW], compression=COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError):
        find_timestamp_in_batches(stream(big).read, NOW, 0, 1000)


def test_a_cut_stream_ends_the_scan() -> None:
    whole = batch(0, [NOW]) + batch(1, [NOW + 5])
    assert find_timestamp_in_batches(io.BytesIO(whole[:-3]).read, NOW + 5, 0, 1 << 20) is None
