"""The decisions of Kafka's RemoteLogManager tasks, pure: which local segments to copy (RLMCopyTask), which
remote segments retention deletes (RLMExpirationTask), and how a read of a remote segment finds its bytes
(RemoteLogManager.read). No I/O, no threads, no clock: the caller passes the time and the bytes.

- :func:`copy_candidates`: Kafka's ``RLMCopyTask.candidateLogSegments``. From
  ``max(highest offset copied + 1, local log start offset)``, each segment but the active one whose next
  segment starts at or below the last stable offset (so its records are all below it, committed or
  aborted): the active segment is never copied, nor a segment holding an open transaction.
- :func:`remote_retention`: Kafka's ``RLMExpirationTask.cleanupExpiredRemoteLogSegments``. The remote
  segments (COPY_SEGMENT_FINISHED, oldest first) deleted for ``retention.ms`` (the segment's largest
  timestamp at or before now - retention.ms), ``retention.bytes`` (over the whole log: the remote segments
  plus the local ones not copied yet, deleting the oldest while what remains is still at least
  retention.bytes) or lying wholly below the log start offset (after DeleteRecords). Each rule stops at
  the first segment it keeps, as Kafka's does.
- :func:`offset_index_position` and :func:`read_batches`: the position of the batch holding an offset in a
  remote segment, from its offset index (8-byte entries: relative offset, position; Kafka's OffsetIndex),
  and the whole batches from there up to ``max_bytes`` (the first one whole even when larger, with
  ``min_one_message``: KIP-74), read from a stream of the segment's ``.log`` from that position.
- :func:`timestamp_candidates`, :func:`time_index_offset` and :func:`find_timestamp_in_batches`: ListOffsets
  by timestamp over the remote tier (Kafka's RemoteLogManager.findOffsetByTimestamp and lookupTimestamp):
  the finished remote segments, walked by the partition's leader epochs from the epoch of the starting offset
  on, whose max timestamp reaches the target and whose offsets reach the starting offset, within the
  partition's leader-epoch lineage (:func:`segment_within_leader_epochs`, Kafka's
  isRemoteSegmentWithinLeaderEpochs); in the first of them, the time index gives the offset to start from
  (Kafka's TimeIndex.lookup), the offset index its position, and the batches from there the first record with
  a timestamp at or past the target (Kafka's RemoteIndexCache.lookupTimestamp, then the segment's batches).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from odradek.protocol.records import read_header, record_times
from odradek.tiered.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState

_HEADER = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # base offset 8, length 4, partition leader epoch 4, magic 1, crc 4, attributes 2
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset (Kafka's TimeIndex)


class TimestampAndOffset(NamedTuple):
    """Kafka's FileRecords.TimestampAndOffset: what ListOffsets answers (leader_epoch -1: none)."""

    timestamp: int
    offset: int
    leader_epoch: int


def copy_candidates(
    bases: Sequence[int], log_end_offset: int, last_stable_offset: int, highest_copied: int, local_start: int
) -> list[tuple[int, int]]:
    """(base offset, end offset inclusive) of the segments to copy, oldest first. ``bases``: the base
    offsets of the local segments, ascending, the active one last."""
    from_offset = max(highest_copied + 1, local_start)
    out: list[tuple[int, int]] = []
    for i in range(len(bases) - 1):  # the last is the active segment: never copied
        base, nxt = bases[i], bases[i + 1]
        if nxt - 1 < from_offset:  # wholly copied (or below the local start) already
            continue
        if nxt > last_stable_offset or nxt > log_end_offset:
            break
        out.append((base, nxt - 1))
    return out


def remote_retention(
    segments: Sequence[RemoteLogSegmentMetadata],
    *,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
    log_start_offset: int,
    local_only_bytes: int,
) -> list[RemoteLogSegmentMetadata]:
    """The remote segments to delete, oldest first (see the module docstring). ``segments``: the partition's
    remote segments in any state; only COPY_SEGMENT_FINISHED ones are considered. ``local_only_bytes``: the
    size of the local segments not copied yet (Kafka's onlyLocalLogSegmentsSize)."""
    done = sorted(
        (m for m in segments if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
        key=lambda m: m.start_offset,
    )
    doomed: dict[int, RemoteLogSegmentMetadata] = {}  # by position in ``done``
    if retention_ms >= 0:
        until = now_ms - retention_ms
        for i, m in enumerate(done):
            if m.max_timestamp_ms > until:
                break
            doomed[i] = m
    if retention_bytes >= 0:
        breached = local_only_bytes + sum(m.segment_size_in_bytes for m in done) - retention_bytes
        for i, m in enumerate(done):
            if breached - m.segment_size_in_bytes < 0:
                break
            breached -= m.segment_size_in_bytes
            doomed[i] = m
    for i, m in enumerate(done):
        if m.end_offset >= log_start_offset:
            break
        doomed[i] = m
    return [doomed[i] for i in sorted(doomed)]


def offset_index_position(index: bytes | bytearray | memoryview, base_offset: int, offset: int) -> int:
    """The position in the segment of the last offset index entry at or below ``offset`` (0 if none):
    where a scan for the batch holding ``offset`` starts. A trailing partial or zero entry (a
    preallocated index) ends the index."""
    lo, hi = 0, len(index) // _INDEX_ENTRY.size
    while hi > 0:  # entries past the last written one are zeros: cut them off
        rel, pos = _INDEX_ENTRY.unpack_from(index, (hi - 1) * _INDEX_ENTRY.size)
        if rel != 0 or pos != 0 or hi == 1:
            break
        hi -= 1
    found = 0
    while lo < hi:
        mid = (lo + hi) // 2
        rel, pos = _INDEX_ENTRY.unpack_from(index, mid * _INDEX_ENTRY.size)
        if base_offset + rel <= offset:
            found = pos
            lo = mid + 1
        else:
            hi = mid
    return found


def _read_exact(read: Callable[[int], bytes], n: int) -> bytes:
    parts = []
    while n > 0:
        chunk = read(n)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def read_batches(read: Callable[[int], bytes], offset: int, max_bytes: int, min_one_message: bool) -> bytes:
    """The whole batches from the first one whose last offset is at or past ``offset`` on, at most
    ``max_bytes`` of them (the first one whole even when larger, with ``min_one_message``), read with
    ``read(n)`` from a batch boundary. A batch cut short by the end of the stream ends the read."""
    out: list[bytes] = []
    size = 0
    while True:
        head = _read_exact(read, _HEADER.size)
        if len(head) < _HEADER.size:
            break
        base, length = _HEADER.unpack(head)
        if length < _LAST_OFFSET_DELTA_AT + 4 - _HEADER.size:
            raise ValueError(f"a batch at offset {base} of length {length} is too short to be a batch")
        body = _read_exact(read, length)
        if len(body) < length:
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(body, _LAST_OFFSET_DELTA_AT - _HEADER.size)
        if base + delta < offset:
            continue
        batch = head + body
        if size + len(batch) > max_bytes and (size or not min_one_message):
            break
        out.append(batch)
        size += len(batch)
        if size >= max_bytes:
            break
    return b"".join(out)


# ---------------------------------------------------------------- ListOffsets by timestamp (remote tier)


def filtered_leader_epochs(entries: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(epoch, start offset) without the epochs that hold no records: an epoch whose next one starts at the same
    offset (Kafka's RemoteLogManager.buildFilteredLeaderEpochMap). ``entries`` ascending."""
    out = list(entries)
    return [e for i, e in enumerate(out) if i + 1 >= len(out) or out[i + 1][1] != e[1]]


def segment_within_leader_epochs(
    m: RemoteLogSegmentMetadata, log_end_offset: int, leader_epochs: Sequence[tuple[int, int]]
) -> bool:
    """Kafka's RemoteLogManager.isRemoteSegmentWithinLeaderEpochs: whether the remote segment ``m`` belongs to
    the partition's leader-epoch lineage ``leader_epochs`` ((epoch, start offset), ascending, filtered with
    :func:`filtered_leader_epochs`, not empty) and ends below ``log_end_offset``."""
    seg = filtered_leader_epochs(m.segment_leader_epochs)
    lineage = dict(leader_epochs)
    keys = [e for e, _ in leader_epochs]
    seg_keys = [e for e, _ in seg]
    seg_last = seg_keys[-1]
    if seg_last < keys[0] or seg_last > keys[-1]:
        return False
    i = bisect.bisect_left(seg_keys, keys[0])  # the segment's first epoch at or past the lineage's first
    if i == len(seg_keys):
        return False
    seg_first = seg_keys[i]
    for j, (epoch, offset) in enumerate(seg):
        if epoch < seg_first:
            continue
        if epoch not in lineage:
            return False
        k = keys.index(epoch)
        if epoch == seg_first and k > 0 and offset < lineage[epoch]:
            return False
        if epoch == seg_last:
            if k + 1 < len(keys) and m.end_offset > leader_epochs[k + 1][1] - 1:
                return False
        elif (k + 1 >= len(keys)) or tuple(leader_epochs[k + 1]) != tuple(seg[j + 1]):
            return False  # the next epoch of both must be the same entry
    return m.end_offset < log_end_offset


def _epoch_for_offset(entries: Sequence[tuple[int, int]], offset: int) -> int | None:
    """Kafka's LeaderEpochFileCache.epochForOffset: the epoch of the last entry starting at or below
    ``offset`` (None: below the first entry, or no entries)."""
    found = None
    for epoch, start in entries:
        if start > offset:
            break
        found = epoch
    return found


def timestamp_candidates(
    leader_epochs: Sequence[tuple[int, int]],
    list_segments: Callable[[int], Sequence[RemoteLogSegmentMetadata]],
    timestamp: int,
    starting_offset: int,
    log_end_offset: int,
) -> Iterator[RemoteLogSegmentMetadata]:
    """The remote segments a timestamp lookup tries, in Kafka's order (RemoteLogManager.findOffsetByTimestamp):
    for the epoch of ``starting_offset`` in the partition's leader epochs ((epoch, start offset), ascending, as
    the leader-epoch cache holds them), then each later epoch, the segments ``list_segments(epoch)`` lists whose
    max timestamp is at or past ``timestamp``, whose end offset is at or past ``starting_offset``, that lie
    within the leader-epoch lineage and whose copy finished. Lazy: the caller stops at the first it can use."""
    entries = sorted(leader_epochs)
    lineage = filtered_leader_epochs(entries)
    epoch = _epoch_for_offset(entries, starting_offset)
    while epoch is not None:
        for m in list_segments(epoch):
            if (
                m.max_timestamp_ms >= timestamp
                and m.end_offset >= starting_offset
                and segment_within_leader_epochs(m, log_end_offset, lineage)
                and m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ):
                yield m
        later = [e for e, _ in entries if e > epoch]  # Kafka's LeaderEpochFileCache.nextEpoch
        epoch = later[0] if later else None


def time_index_offset(index: bytes | bytearray | memoryview, base_offset: int, timestamp: int) -> int:
    """Kafka's TimeIndex.lookup: the offset of the last time index entry whose timestamp is at or below
    ``timestamp`` (the base offset if none). Entries past the last written one (zeros, a preallocated index)
    end the index."""
    n = len(index) // _TIME_INDEX_ENTRY.size
    while n > 1:
        ts, rel = _TIME_INDEX_ENTRY.unpack_from(index, (n - 1) * _TIME_INDEX_ENTRY.size)
        if ts != 0 or rel != 0:
            break
        n -= 1
    lo, hi, found = 0, n, base_offset
    while lo < hi:
        mid = (lo + hi) // 2
        ts, rel = _TIME_INDEX_ENTRY.unpack_from(index, mid * _TIME_INDEX_ENTRY.size)
        if ts <= timestamp:
            found = base_offset + rel
            lo = mid + 1
        else:
            hi = mid
    return found


def find_timestamp_in_batches(
    read: Callable[[int], bytes], timestamp: int, starting_offset: int, inflate_limit: int
) -> TimestampAndOffset | None:
    """From a batch boundary, the first record whose timestamp is at or past ``timestamp`` and whose offset is
    at or past ``starting_offset``, in the first batch whose max timestamp and last offset reach them (Kafka's
    RemoteLogManager.lookupTimestamp); a record of a LogAppendTime batch carries the batch's max timestamp. The
    leader epoch is the batch's (-1 if it has none). None when the stream ends first. A batch's records are
    inflated to at most ``inflate_limit`` bytes (InvalidRecordError past it, or when they do not decode)."""
    while True:
        head = _read_exact(read, _HEADER.size)
        if len(head) < _HEADER.size:
            return None
        base, length = _HEADER.unpack(head)
        if length < _LAST_OFFSET_DELTA_AT + 4 - _HEADER.size:
            raise ValueError(f"a batch at offset {base} of length {length} is too short to be a batch")
        body = _read_exact(read, length)
        if len(body) < length:
            return None
        batch = head + body
        h = read_header(batch)
        if h.max_timestamp < timestamp or h.last_offset < starting_offset:
            continue
        epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
        if h.timestamp_type == 1:  # LogAppendTime: every record carries the batch's max timestamp
            return TimestampAndOffset(h.max_timestamp, max(h.base_offset, starting_offset), epoch)
        for offset, ts in record_times(batch, inflate_limit):
            if ts >= timestamp and offset >= starting_offset:
                return TimestampAndOffset(ts, offset, epoch)
