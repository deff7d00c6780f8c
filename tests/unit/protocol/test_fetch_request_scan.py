"""Counting a FetchRequest's partition entries on the wire, checked against kio's encoding of every
version (4-18), with tagged fields, empty and null arrays, truncated bodies and the early stop."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

from odradek.protocol.fetch_request_scan import count_partitions, min_entry_bytes

VERSIONS = range(4, 19)


def _make(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _body(version: int, topics: list[list[int]], forgotten: list[list[int]], tagged: bool = False) -> bytes:
    mod = load_payload_module(1, version, EntityType.request)

    def partition(p: int) -> Any:
        extra = {"replica_directory_id": uuid.uuid4()} if tagged else {}
        return _make(mod.FetchPartition, partition=p, fetch_offset=5, partition_max_bytes=1 << 20,
                     current_leader_epoch=3, last_fetched_epoch=2, log_start_offset=0, high_watermark=9, **extra)

    fetch = tuple(_make(mod.FetchTopic, topic=f"tøpic-{i}", topic_id=uuid.uuid4(),
                        partitions=tuple(partition(p) for p in ps)) for i, ps in enumerate(topics))
    gone = tuple(_make(mod.ForgottenTopic, topic=f"gone-{i}", topic_id=uuid.uuid4(), partitions=tuple(ps))
                 for i, ps in enumerate(forgotten)) if version >= 7 else ()
    request = _make(mod.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=fetch,
                    forgotten_topics_data=gone, rack_id="rack-a", cluster_id="c" if tagged else None)
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
def test_counts_every_fetched_and_forgotten_entry(version: int) -> None:
    topics = [[0, 1], [], [4, 4, 4, 7, 9]]  # a duplicate counts
    forgotten = [[3, 2, 1], [], [8]]
    expected = 7 + (4 if version >= 7 else 0)
    for tagged in (False, True):
        body = _body(version, topics, forgotten, tagged=tagged)
        prefixed = b"\x00" * 11 + body
        assert count_partitions(version, prefixed, 11, limit=1000) == expected
        assert count_partitions(version, memoryview(prefixed).toreadonly(), 11, limit=1000) == expected
        assert count_partitions(version, prefixed, 11, limit=expected) == expected
        assert count_partitions(version, prefixed, 11, limit=expected - 1) > expected - 1
        assert count_partitions(version, prefixed, 11, limit=1) > 1


@pytest.mark.parametrize("version", [4, 7, 12, 13, 16])
def test_a_cut_body_is_counted_as_far_as_it_goes(version: int) -> None:
    body = _body(version, [[0, 1, 2], [3]], [[5]])
    full = count_partitions(version, body, 0, limit=100)
    for cut in range(len(body)):
        assert 0 <= count_partitions(version, body[:cut], 0, limit=100) <= full


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_the_count_stops_past_the_limit(version: int) -> None:
    """The walk ends with the first array that takes the count past the limit: the rest is not read."""
    body = _body(version, [[0, 1], [2, 3, 4], [5] * 50], [])
    assert count_partitions(version, body, 0, limit=100) == 55
    assert count_partitions(version, body, 0, limit=3) == 5
    assert count_partitions(version, body, 0, limit=1) == 2


def test_a_lying_count_is_refused_at_once() -> None:
    """v4: one topic whose partitions count says 2^31-1 in a short body."""
    name = b"t"
    body = struct.pack(">iiiibi", -1, 0, 0, 1 << 20, 0, 1) + struct.pack(">h", 1) + name + struct.pack(">i", 2**31 - 1)
    assert count_partitions(4, body, 0, limit=10_000) > 10_000


@pytest.mark.parametrize("version", [4, 7, 12, 13])
def test_topic_entries_count_against_the_limit_too(version: int) -> None:
    """Topic entries naming no partition: none counted as partitions, but past the limit all the same."""
    topics = [[] for _ in range(50)]
    body = _body(version, topics, [])
    assert count_partitions(version, body, 0, limit=50) == 0
    assert count_partitions(version, body, 0, limit=49) > 49
    if version >= 7:
        body = _body(version, [[] for _ in range(30)], [[] for _ in range(20)])
        assert count_partitions(version, body, 0, limit=50) == 0
        assert count_partitions(version, body, 0, limit=49) > 49


def test_min_entry_bytes() -> None:
    """A topic entry with an empty name and no partitions, or a forgotten partition (v7+)."""
    assert min_entry_bytes(4) == 6 and min_entry_bytes(6) == 6  # int16 name length, int32 count
    assert min_entry_bytes(7) == 4 and min_entry_bytes(11) == 4  # a forgotten partition's int32
    assert min_entry_bytes(12) == 3  # compact name length, count, tagged fields
    assert min_entry_bytes(13) == 4  # a topic id takes 16: the forgotten partition's 4 is the least
    for version in VERSIONS:  # a topic entry with no partitions as kio writes it, named "tøpic-0"
        empty = len(_body(version, [[]], [])) - len(_body(version, [], []))
        assert empty == (16 + 2 if version >= 13 else 8 + (3 if version == 12 else 6)), version
        assert empty >= min_entry_bytes(version)
