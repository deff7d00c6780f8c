"""A FetchResponse v12 read without copying record data: what a follower's replica fetcher
receives from its leader (Kafka's ReplicaFetcherThread reads the same response into
MemoryRecords slices of the network buffer). Each partition's records are a ``memoryview``
slice of the response frame, appended to the log from there (one write per partition).

Body layout (after the response header v1), FetchResponse v12 (flexible, KIP-482)::

    throttle_time_ms          int32
    error_code                int16
    session_id                int32
    responses                 compact array (uvarint count+1)
      topic                   compact string (uvarint len+1, UTF-8)
      partitions              compact array
        partition_index       int32
        error_code            int16
        high_watermark        int64
        last_stable_offset    int64
        log_start_offset      int64
        aborted_transactions  compact nullable array of
          producer_id         int64
          first_offset        int64
          tagged fields
        preferred_read_replica int32
        records               compact nullable bytes (uvarint len+1; 0 = null)
        tagged fields         (diverging_epoch = 0, current_leader = 1, snapshot_id = 2: skipped)
      tagged fields
    tagged fields

Anything that runs past the frame, or a count larger than the bytes left could hold, raises
:class:`FetchResponseError` (the caller drops the connection); nothing is allocated from a
count before it is checked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.varint import VarintError, read_uvarint, skip_tagged_fields

VERSION = 12

_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_I32 = struct.Struct(">i")
_ABORTED_MIN = 17  # producer_id, first_offset, empty tagged fields


class FetchResponseError(ValueError):
    """The response does not parse as FetchResponse v12."""


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None  # a slice of the response frame, not a copy
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponseView:
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


def read_fetch_response(frame: bytes | bytearray | memoryview, offset: int) -> FetchResponseView:
    """Parse the body of a FetchResponse v12 that starts at ``offset`` of ``frame``."""
    buf = memoryview(frame)
    end = len(buf)
    try:
        return _read(buf, offset, end)
    except (struct.error, VarintError, UnicodeDecodeError) as e:
        raise FetchResponseError(f"undecodable FetchResponse v{VERSION}: {e}") from None


def _read(buf: memoryview, pos: int, end: int) -> FetchResponseView:
    if pos + _HEAD.size > end:
        raise FetchResponseError("response shorter than its header fields")
    throttle, error_code, session_id = _HEAD.unpack_from(buf, pos)
    pos += _HEAD.size
    n_topics, pos = read_uvarint(buf, pos, end)
    n_topics -= 1
    if n_topics < 0:
        n_topics = 0
    if n_topics > end - pos:
        raise FetchResponseError(f"{n_topics} topics in {end - pos} bytes")
    topics: list[FetchedTopic] = []
    part_size = _PART.size
    for _ in range(n_topics):
        name_len, pos = read_uvarint(buf, pos, end)
        if name_len == 0 or pos + name_len - 1 > end:
            raise FetchResponseError("topic name null or past the response")
        name = str(buf[pos : pos + name_len - 1], "utf-8")
        pos += name_len - 1
        n_parts, pos = read_uvarint(buf, pos, end)
        n_parts -= 1
        if n_parts < 0:
            n_parts = 0
        if n_parts * part_size > end - pos:
            raise FetchResponseError(f"{n_parts} partitions in {end - pos} bytes")
        parts: list[FetchedPartition] = []
        for _ in range(n_parts):
            if pos + part_size > end:
                raise FetchResponseError("partition runs past the response")
            index, code, hw, lso, lstart = _PART.unpack_from(buf, pos)
            pos += part_size
            n_aborted, pos = read_uvarint(buf, pos, end)
            aborted: list[tuple[int, int]] | None = None
            if n_aborted > 0:
                n_aborted -= 1
                if n_aborted * _ABORTED_MIN > end - pos:
                    raise FetchResponseError(f"{n_aborted} aborted transactions in {end - pos} bytes")
                aborted = []
                for _ in range(n_aborted):
                    pid, first = struct.unpack_from(">qq", buf, pos)
                    pos = skip_tagged_fields(buf, pos + 16, end)
                    aborted.append((pid, first))
            if pos + 4 > end:
                raise FetchResponseError("partition runs past the response")
            pos += 4  # preferred_read_replica
            rec_len, pos = read_uvarint(buf, pos, end)
            records: memoryview | None = None
            if rec_len > 0:
                rec_len -= 1
                if pos + rec_len > end:
                    raise FetchResponseError(f"records of {rec_len} bytes run past the response")
                records = buf[pos : pos + rec_len]
                pos += rec_len
            pos = skip_tagged_fields(buf, pos, end)
            parts.append(FetchedPartition(index, code, hw, lso, lstart, records, aborted))
        pos = skip_tagged_fields(buf, pos, end)
        topics.append(FetchedTopic(name, parts))
    pos = skip_tagged_fields(buf, pos, end)
    return FetchResponseView(throttle, error_code, session_id, topics)
