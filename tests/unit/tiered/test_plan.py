"""The pure decisions of the remote log manager (odradek.tiered.plan): which segments the copy task copies
(Kafka's RLMCopyTask.candidateLogSegments), which remote segments retention deletes (RLMExpirationTask) at a
given time, and how a remote read finds its batches."""

from __future__ import annotations

import io
import struct
import uuid

from odradek.protocol.records import build_batch
from odradek.tiered.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from odradek.tiered.plan import copy_candidates, offset_index_position, read_batches, remote_retention

TIP = TopicIdPartition(uuid.UUID(int=7), "t", 0)
S = RemoteLogSegmentState


def test_copy_candidates_never_the_active_segment() -> None:
    # segments at 0, 100, 200 (active); log end 250, last stable offset 250
    assert copy_candidates([0, 100, 200], 250, 250, -1, 0) == [(0, 99), (100, 199)]
    assert copy_candidates([0], 50, 50, -1, 0) == []


def test_copy_candidates_stop_below_the_last_stable_offset() -> None:
    # an open transaction from offset 150: the segment holding it waits, and so does every later one
    assert copy_candidates([0, 100, 200, 300], 350, 150, -1, 0) == [(0, 99)]
    assert copy_candidates([0, 100, 200, 300], 350, 200, -1, 0) == [(0, 99), (100, 199)]


def test_copy_candidates_start_past_the_highest_offset_copied() -> None:
    assert copy_candidates([0, 100, 200, 300], 350, 350, 99, 0) == [(100, 199), (200, 299)]
    assert copy_candidates([0, 100, 200, 300], 350, 350, 299, 0) == []
    # a leader that copied part of a segment (a new leader's segments start elsewhere): copied whole again
    assert copy_candidates([0, 100, 200, 300], 350, 350, 150, 0) == [(100, 199), (200, 299)]
    # nothing below the local log start is copied (deleted locally by DeleteRecords)
    assert copy_candidates([100, 200, 300], 350, 350, -1, 100) == [(100, 199), (200, 299)]


def _remote(start: int, end: int, ts: int, size: int = 100, state: S = S.COPY_SEGMENT_FINISHED) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, end, ts, 0, ts, size,
                                    ((0, start),), None, state)


NOW = 1_700_000_000_000
SEGS = [_remote(0, 99, NOW - 5000), _remote(100, 199, NOW - 3000), _remote(200, 299, NOW - 1000)]


def test_remote_retention_by_time_with_a_fake_clock() -> None:
    def doomed(now: int) -> list[int]:
        return [m.start_offset for m in remote_retention(
            SEGS, now_ms=now, retention_ms=2000, retention_bytes=-1, log_start_offset=0, local_only_bytes=0)]

    assert doomed(NOW - 3001) == []
    assert doomed(NOW - 3000) == [0]  # its largest timestamp NOW-5000 is at now - retention.ms
    assert doomed(NOW - 1001) == [0]
    assert doomed(NOW - 1000) == [0, 100]
    assert doomed(NOW + 1000) == [0, 100, 200]


def test_remote_retention_by_size_over_the_whole_log() -> None:
    def doomed(limit: int, local_only: int) -> list[int]:
        return [m.start_offset for m in remote_retention(
            SEGS, now_ms=NOW, retention_ms=-1, retention_bytes=limit, log_start_offset=0, local_only_bytes=local_only)]

    assert doomed(300, 0) == []
    assert doomed(250, 0) == []  # deleting 100 would leave 200 < 250
    assert doomed(200, 0) == [0]
    assert doomed(200, 100) == [0, 100]  # the local segments not copied yet count too
    assert doomed(0, 0) == [0, 100, 200]


def test_remote_retention_below_the_log_start_and_only_finished_copies() -> None:
    segs = [*SEGS, _remote(300, 399, NOW, state=S.COPY_SEGMENT_STARTED)]
    got = remote_retention(segs, now_ms=NOW, retention_ms=-1, retention_bytes=-1, log_start_offset=150,
                           local_only_bytes=0)
    assert [m.start_offset for m in got] == [0]  # 100-199 still holds 150; a copy in progress is never picked
    got = remote_retention(segs, now_ms=NOW, retention_ms=0, retention_bytes=-1, log_start_offset=0,
                           local_only_bytes=0)
    assert [m.start_offset for m in got] == [0, 100, 200]


def test_offset_index_position() -> None:
    index = b"".join(struct.pack(">ii", rel, pos) for rel, pos in ((10, 4096), (25, 8192), (40, 12288)))
    assert offset_index_position(index, 1000, 1005) == 0
    assert offset_index_position(index, 1000, 1010) == 4096
    assert offset_index_position(index, 1000, 1030) == 8192
    assert offset_index_position(index, 1000, 1999) == 12288
    assert offset_index_position(index + bytes(16), 1000, 1999) == 12288  # preallocated zeros
    assert offset_index_position(b"", 1000, 1999) == 0


def _batches() -> tuple[bytes, list[bytes]]:
    out = []
    for base in range(0, 50, 10):
        out.append(build_batch([(None, b"v" * 100)] * 10, base_offset=base, timestamp=NOW))
    return b"".join(out), out


def test_read_batches_from_the_one_holding_the_offset() -> None:
    data, batches = _batches()
    assert read_batches(io.BytesIO(data).read, 0, 1 << 20, True) == data
    assert read_batches(io.BytesIO(data).read, 25, 1 << 20, True) == b"".join(batches[2:])
    size = len(batches[0])
    assert read_batches(io.BytesIO(data).read, 10, 2 * size + 5, True) == b"".join(batches[1:3])  # whole batches
    assert read_batches(io.BytesIO(data).read, 10, 5, True) == batches[1]  # KIP-74: one batch over the limit
    assert read_batches(io.BytesIO(data).read, 10, 5, False) == b""
    assert read_batches(io.BytesIO(data).read, 60, 1 << 20, True) == b""
    assert read_batches(io.BytesIO(data[:-3]).read, 45, 1 << 20, True) == b""  # a cut batch is not returned
