import uuid

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from odradek.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from odradek.protocol.records import build_batch


def _flatten(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("version", list(range(4, 17)))
def test_matches_kio_decoder(version: int) -> None:
    batch = build_batch([(b"k", b"v" * 50)], base_offset=3)
    tid = uuid.uuid4()
    topics = [
        TopicResult(
            "orders",
            tid,
            [
                PartitionResult(0, 0, 10, 10, 2, None, -1, [batch[:20], batch[20:]], len(batch)),
                PartitionResult(1, 1, 5, 5, 0, [(7, 100)], -1, [], 0),
            ],
        ),
        TopicResult("empty", uuid.uuid4(), []),
    ]
    parts, size = encode_fetch_response(version, topics, session_id=0)
    data = _flatten(parts)
    assert len(data) == size
    cls = load_response_schema(1, version)
    value, n = entity_reader(cls)(data, 0)
    assert n == len(data)
    t0 = value.responses[0]
    if version >= 13:
        assert t0.topic_id == tid
    else:
        assert t0.topic == "orders"
    p0, p1 = t0.partitions
    assert p0.high_watermark == 10 and p0.records == batch
    if version >= 5:
        assert p0.log_start_offset == 2
    assert p1.error_code == 1 and p1.records in (None, b"")
    assert [(a.producer_id, a.first_offset) for a in p1.aborted_transactions] == [(7, 100)]
