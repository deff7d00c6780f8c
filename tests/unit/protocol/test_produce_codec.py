"""The hand-written Produce codec against kio's, for every supported version."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol.codec import DecodeError
from odradek.protocol.produce import MAX_VERSION, MIN_VERSION, decode_produce_request, encode_produce_response

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)


def _kio_request(version: int, txn: str | None, records: bytes | None) -> bytes:
    m = load_payload_module(0, version, EntityType.request)
    req = m.ProduceRequest(
        transactional_id=txn,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=(
            m.TopicProduceData(name="tøpic", partition_data=(
                m.PartitionProduceData(index=0, records=records),
                m.PartitionProduceData(index=7, records=None),
            )),
            m.TopicProduceData(name="other", partition_data=()),
        ),
    )
    buf = io.BytesIO()
    entity_writer(type(req))(buf, req)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
def test_request_decodes_like_kio(version: int) -> None:
    body = _kio_request(version, "tx-1" if version % 2 else None, b"\x01\x02\x03" * 100)
    frame = bytearray(b"HEAD" + body)
    req = decode_produce_request(version, memoryview(frame), 4)
    assert req.transactional_id == ("tx-1" if version % 2 else None)
    assert (req.acks, req.timeout_ms) == (-1, 1500)
    assert [t.name for t in req.topic_data] == ["tøpic", "other"]
    p0, p7 = req.topic_data[0].partition_data
    assert p0.index == 0 and p0.records is not None and bytes(p0.records) == b"\x01\x02\x03" * 100
    assert p7.index == 7 and p7.records is None
    assert req.topic_data[1].partition_data == []
    # a view into the frame, writable: offsets are assigned in place
    assert p0.records.obj is frame and not p0.records.readonly


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_or_hostile_requests_raise_decode_error(version: int) -> None:
    body = _kio_request(version, None, b"x" * 50)
    for cut in range(len(body)):
        try:
            decode_produce_request(version, body[:cut], 0)
        except DecodeError:
            continue
        raise AssertionError(f"a body cut at {cut} of {len(body)} bytes decoded")
    huge_array = body[:8] + b"\x7f\xff\xff\xff" if version < 9 else body[:4] + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(DecodeError):
        decode_produce_request(version, huge_array, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_response_decodes_with_kio(version: int) -> None:
    body = encode_produce_response(version, [
        ("tøpic", [(0, 0, 1234, -1, 10, None), (7, 6, -1, -1, -1, "not leader")]),
        ("t2", [(3, 0, 0, 1_700_000_000_123, 0, None)]),
    ], throttle_time_ms=25)
    m = load_payload_module(0, version, EntityType.response)
    resp, size = entity_reader(m.ProduceResponse)(memoryview(body), 0)
    assert size == len(body)
    assert resp.throttle_time == datetime.timedelta(milliseconds=25)
    (t1, t2) = resp.responses
    assert t1.name == "tøpic" and t2.name == "t2"
    a, b = t1.partition_responses
    assert (a.index, a.error_code, a.base_offset, a.log_append_time) == (0, ErrorCode.none, 1234, None)
    assert (b.index, b.error_code, b.base_offset) == (7, ErrorCode.not_leader_or_follower, -1)
    (c,) = t2.partition_responses
    assert c.log_append_time == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.UTC)
    if version >= 5:
        assert a.log_start_offset == 10
    if version >= 8:
        assert b.error_message == "not leader" and a.error_message is None and a.record_errors == ()


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
def test_record_errors_decode_with_kio(version: int) -> None:
    """KIP-467: batch_index and its message per offending record, then the partition's error_message."""
    body = encode_produce_response(version, [
        ("t", [(0, 87, -1, -1, 0, "One or more records have been rejected", ((1, "no key"), (4, None))),
               (1, 0, 7, -1, 0, None, ())]),
    ])
    m = load_payload_module(0, version, EntityType.response)
    resp, size = entity_reader(m.ProduceResponse)(memoryview(body), 0)
    assert size == len(body)
    a, b = resp.responses[0].partition_responses
    assert [(e.batch_index, e.batch_index_error_message) for e in a.record_errors] == [(1, "no key"), (4, None)]
    assert a.error_message == "One or more records have been rejected"
    assert b.record_errors == () and b.base_offset == 7
