"""The replica fetcher's hand-written FetchRequest v12 and its copy-free FetchResponse v12 reader,
checked against kio's encoder and decoder."""

import datetime
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import EpochEndOffset, FetchableTopicResponse, PartitionData
from kio.serial import entity_reader

from odradek.protocol import codec
from odradek.protocol.fetch_request_writer import encode_fetch_request
from odradek.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from odradek.protocol.fetch_response_reader import (
    FetchResponseError,
    FetchResponseScanner,
    read_fetch_response,
)
from odradek.protocol.records import build_batch


def test_request_decodes_with_kio() -> None:
    body = encode_fetch_request(
        3, 500, 1, 10 << 20,
        [("orders", [(0, 7, 120, -1, 5, 1 << 20), (4, 7, 0, -1, 0, 1 << 20)]), ("päyments", [(1, 2, 9, -1, 0, 99)])],
    )
    value, n = entity_reader(load_request_schema(1, 12))(body, 0)
    assert n == len(body)
    assert value.replica_id == 3 and value.max_wait == datetime.timedelta(milliseconds=500)
    assert value.min_bytes == 1 and value.max_bytes == 10 << 20 and value.session_epoch == -1
    assert [t.topic for t in value.topics] == ["orders", "päyments"]
    p = value.topics[0].partitions[0]
    assert (p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset,
            p.partition_max_bytes) == (0, 7, 120, -1, 5, 1 << 20)
    assert value.topics[1].partitions[0].partition_max_bytes == 99
    assert value.forgotten_topics_data == () and value.rack_id == ""


def _broker_response() -> tuple[bytes, bytes]:
    batch = build_batch([(b"k", b"v" * 300)] * 3, base_offset=40)
    topics = [
        TopicResult("orders", uuid.uuid4(), [
            PartitionResult(0, 0, 43, 43, 2, None, -1, [batch[:100], batch[100:]], len(batch)),
            PartitionResult(1, 6, 5, 5, 0, [(7, 100), (8, 101)], -1, [], 0),
        ]),
        TopicResult("empty", uuid.uuid4(), []),
    ]
    parts, _ = encode_fetch_response(12, topics, session_id=0)
    return b"".join(bytes(p) for p in parts), batch


def test_response_matches_kio_and_slices_the_frame() -> None:
    data, batch = _broker_response()
    frame = b"\x00" * 9 + data  # the body at an offset, as after a response header
    view = read_fetch_response(frame, 9)
    kio_value, _ = entity_reader(load_response_schema(1, 12))(data, 0)
    assert view.error_code == kio_value.error_code == 0
    assert [t.topic for t in view.responses] == ["orders", "empty"]
    p0, p1 = view.responses[0].partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark, p0.log_start_offset) == (0, 0, 43, 2)
    assert p0.records is not None and bytes(p0.records) == batch == kio_value.responses[0].partitions[0].records
    assert p0.records.obj is frame  # a view of the frame, not a copy
    assert p1.error_code == 6 and not p1.records and p1.aborted_transactions == [(7, 100), (8, 101)]


def test_tagged_fields_are_skipped() -> None:
    part = PartitionData(
        partition_index=2, error_code=ErrorCode.none, high_watermark=10, last_stable_offset=10, log_start_offset=0,
        diverging_epoch=EpochEndOffset(epoch=3, end_offset=8), aborted_transactions=None,
        preferred_read_replica=-1, records=b"abc",
    )
    resp = load_response_schema(1, 12)(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
        responses=(FetchableTopicResponse(topic="t", partitions=(part,)),),
    )
    data = codec.encode(resp)
    view = read_fetch_response(data, 0)
    (p,) = view.responses[0].partitions
    assert p.partition_index == 2 and p.records is not None and bytes(p.records) == b"abc"


def test_every_truncation_is_refused_cleanly() -> None:
    data, _ = _broker_response()
    for cut in range(len(data)):  # every prefix ends inside some field: refused, never an IndexError
        with pytest.raises(FetchResponseError):
            read_fetch_response(data[:cut], 0)


@pytest.mark.parametrize("junk", [b"\xff" * 40, b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x0f"])
def test_hostile_counts(junk: bytes) -> None:
    with pytest.raises(FetchResponseError):
        read_fetch_response(junk, 0)


def _scan_in_pieces(data: bytes, step: int) -> list[tuple[str, int, int, bytes | None]]:
    """Drive the scanner as the follower's streaming reader does: with only the bytes that have
    arrived (``step`` more each time it asks), records taken whole when it hands a partition over."""
    scanner = FetchResponseScanner(len(data))
    buf = memoryview(data)
    pos, avail, topic = 0, 0, ""
    out: list[tuple[str, int, int, bytes | None]] = []
    while not scanner.done:
        new_pos, part = scanner.scan(buf, pos, avail)
        assert new_pos >= pos
        pos = new_pos
        if scanner.topic_started:
            topic = scanner.topic
        elif part is not None:
            n = scanner.records_length
            out.append((topic, part.partition_index, part.error_code, bytes(buf[pos : pos + n]) if n >= 0 else None))
            pos += max(n, 0)
            avail = max(avail, pos)
            scanner.records_consumed()
        elif not scanner.done:
            assert scanner.need > avail - pos  # it asks for more than it has
            avail = min(len(data), avail + step)
    assert pos == len(data) and scanner.left == 0
    return out


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, 100_000])
def test_scanner_reads_the_same_from_any_split(step: int) -> None:
    data, batch = _broker_response()
    got = _scan_in_pieces(data, step)
    assert got == [("orders", 0, 0, batch), ("orders", 1, 6, b"")]


def test_scanner_refuses_a_count_the_rest_of_the_frame_cannot_hold() -> None:
    # 2**20 topics announced in a 20-byte frame: refused at once, even with only the header at hand
    data = b"\x00" * 10 + b"\x81\x80\x40" + b"\x00" * 7
    scanner = FetchResponseScanner(len(data))
    with pytest.raises(FetchResponseError):
        scanner.scan(memoryview(data), 0, 13)
