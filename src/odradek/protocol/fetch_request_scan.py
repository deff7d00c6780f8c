"""How many partitions a FetchRequest body names, counted on the wire before anything is decoded.

kio decodes a whole request at once, building an object per topic and per partition entry: a Fetch
naming a million partitions took seconds of the broker's single event loop to decode before its handler
even started. :func:`count_partitions` reads only the counts (and walks each partition entry of a
flexible version for its tagged fields) and stops as soon as the count passes the caller's limit, so a
refusal costs at most ``limit`` small steps.

Counted: every entry of ``topics[].partitions`` and of ``forgotten_topics_data[].partitions`` (v7+),
duplicates included; the topic entries of both arrays are counted apart, against the same limit (a
million topic entries naming no partition cost kio as much to decode). Body layout (FetchRequest.json, versions 4-18)::

    replica_id              int32             v4-14 (v15+: the tagged replica_state)
    max_wait_ms, min_bytes, max_bytes  int32 each
    isolation_level         int8
    session_id, session_epoch  int32 each    v7+
    topics                  array             (int32 count; v12+ uvarint count+1)
      topic                 string            v4-11 int16 length, v12 compact; v13+ topic_id uuid
      partitions            array
        partition int32, current_leader_epoch int32 (v9+), fetch_offset int64,
        last_fetched_epoch int32 (v12+), log_start_offset int64 (v5+), partition_max_bytes int32,
        tagged fields (v12+)
      tagged fields         v12+
    forgotten_topics_data   array             v7+
      topic / topic_id      as above
      partitions            array of int32
      tagged fields         v12+
    (rack_id and the request's tagged fields follow; nothing there names a partition)

A body that ends early or carries a bad varint is counted as far as it goes: what it is, the length
check and the decoder that follow (``protocol.kio_guard``, ``protocol.codec``) say.
"""

from __future__ import annotations

import struct
from typing import Any

from odradek.protocol.varint import VarintError, read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _partition_size(version: int) -> int:
    """The fixed-size fields of one ``topics[].partitions`` entry."""
    size = 4 + 8 + 4  # partition, fetch_offset, partition_max_bytes
    if version >= 5:
        size += 8  # log_start_offset
    if version >= 9:
        size += 4  # current_leader_epoch
    if version >= 12:
        size += 4  # last_fetched_epoch
    return size


def min_entry_bytes(version: int) -> int:
    """The fewest bytes one counted entry takes: a topic entry with an empty name and no partitions (a
    name length and a count: 6 bytes, 3 in the flexible versions, where a topic id takes 16 from v13),
    or a forgotten partition (4, from v7)."""
    topic = 6 if version < 12 else 3 if version == 12 else 18
    return min(topic, 4) if version >= 7 else topic


class _Over(Exception):
    """The count passed the limit (its value in ``args[0]``)."""


def count_partitions(version: int, buf: Any, offset: int, limit: int) -> int:
    """The partition entries the FetchRequest body at ``offset`` of ``buf`` names, or a number above
    ``limit`` as soon as they or its topic entries pass it (the rest is not read)."""
    try:
        return _walk(version, buf, offset, len(buf), limit)
    except _Over as over:
        return int(over.args[0])


class _Partial(Exception):
    """The body ends inside a count or a topic name."""


def _walk(version: int, buf: Any, pos: int, end: int, limit: int) -> int:
    flexible = version >= 12
    pos += 4 * 3 + 1 + (4 if version <= 14 else 0) + (8 if version >= 7 else 0)
    fixed = _partition_size(version)
    counted = 0

    def count(pos: int) -> tuple[int, int]:
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            return n - 1, pos
        if pos + 4 > end:
            raise _Partial
        (n,) = _I32.unpack_from(buf, pos)
        return int(n), pos + 4

    def topic(pos: int) -> int:
        if version >= 13:
            return pos + 16
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            return pos + max(n - 1, 0)
        if pos + 2 > end:
            raise _Partial
        (length,) = _I16.unpack_from(buf, pos)
        return pos + 2 + max(int(length), 0)

    def tagged(pos: int) -> int:
        if pos < end and buf[pos] == 0:  # no tagged fields, the usual case
            return pos + 1
        n, pos = read_uvarint(buf, pos, end)
        for _ in range(n):
            _tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            pos += size
        return pos

    try:
        topics, pos = count(pos)
        if topics > limit:
            raise _Over(limit + 1)
        for _ in range(max(topics, 0)):
            if pos >= end:
                return counted
            pos = topic(pos)
            n, pos = count(pos)
            if n <= 0:
                pos = tagged(pos) if flexible else pos
                continue
            counted += n
            if counted > limit:
                raise _Over(counted)
            if flexible:
                # the usual case, no entry with tagged fields: each ends with a zero byte at the same
                # stride, all checked at once (no Python step per partition)
                stride = fixed + 1
                stop = pos + n * stride
                if stop <= end and bytes(buf[pos + fixed : stop : stride]).count(0) == n:
                    pos = tagged(stop)
                    continue
                for _ in range(n):
                    pos += fixed
                    if pos >= end:
                        return counted
                    pos = tagged(pos) if buf[pos] else pos + 1
                pos = tagged(pos)
            else:
                pos += n * fixed
        if version < 7:
            return counted
        forgotten, pos = count(pos)
        if max(topics, 0) + forgotten > limit:
            raise _Over(limit + 1)
        for _ in range(max(forgotten, 0)):
            if pos >= end:
                return counted
            pos = topic(pos)
            n, pos = count(pos)
            if n > 0:
                counted += n
                if counted > limit:
                    raise _Over(counted)
                pos += 4 * n
            if flexible:
                pos = tagged(pos)
    except _Partial:
        return counted
    except (VarintError, struct.error, IndexError):
        return counted
    return counted
