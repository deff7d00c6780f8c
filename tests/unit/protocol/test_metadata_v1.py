"""MetadataRequest/Response v1 by hand (``metadata_v1``) against kio's encoding of the same entities."""

from __future__ import annotations

import io
import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.protocol import metadata_v1


def _response_bytes() -> bytes:
    # brokers: 1 -> a:9092 (rack null), 2 -> bb:9093 (rack "r1"); controller 1;
    # topic "t" (0: leader 2, 1: leader -1), internal topic "__x" (0: leader 1)
    out = bytearray(struct.pack(">i", 2))
    out += struct.pack(">ih", 1, 1) + b"a" + struct.pack(">ih", 9092, -1)
    out += struct.pack(">ih", 2, 2) + b"bb" + struct.pack(">ih", 9093, 2) + b"r1"
    out += struct.pack(">i", 1)
    out += struct.pack(">i", 2)
    out += struct.pack(">hh", 0, 1) + b"t" + b"\x00" + struct.pack(">i", 2)
    out += struct.pack(">hii", 0, 0, 2) + struct.pack(">iii", 2, 2, 1) + struct.pack(">ii", 1, 2)
    out += struct.pack(">hii", 5, 1, -1) + struct.pack(">i", 0) + struct.pack(">i", 0)
    out += struct.pack(">hh", 0, 3) + b"__x" + b"\x01" + struct.pack(">i", 1)
    out += struct.pack(">hii", 0, 0, 1) + struct.pack(">ii", 1, 1) + struct.pack(">ii", 1, 1)
    return bytes(out)


def test_request_equals_kio() -> None:
    cls = load_request_schema(3, 1)
    for topics in (["orders", "t\u00e9"], None):
        buf = io.BytesIO()
        from kio.schema.metadata.v1.request import MetadataRequestTopic
        from kio.schema.types import TopicName

        entity = cls(topics=None if topics is None else tuple(MetadataRequestTopic(name=TopicName(t)) for t in topics))
        entity_writer(cls)(buf, entity)
        assert metadata_v1.encode_metadata_request(topics) == buf.getvalue()


def test_response_parses_like_kio() -> None:
    data = _response_bytes()
    ours = metadata_v1.read_metadata_response(b"xx" + data, 2)
    theirs, _ = entity_reader(load_response_schema(3, 1))(data, 0)
    assert ours.brokers == {int(b.node_id): (str(b.host), int(b.port)) for b in theirs.brokers}
    assert ours.controller_id == int(theirs.controller_id) == 1
    assert [(t.name, t.is_internal, t.partitions) for t in ours.topics] == [
        (str(t.name), bool(t.is_internal),
         {int(p.partition_index): (int(p.error_code), int(p.leader_id)) for p in t.partitions})
        for t in theirs.topics]
    assert ours.leader("t", 0) == ("bb", 9093)
    assert ours.leader("t", 1) is None  # no leader
    assert ours.leader("t", 7) is None and ours.leader("nope", 0) is None


@pytest.mark.parametrize("cut", [1, 5, 20, 40, 60])
def test_truncated_response_raises(cut: int) -> None:
    data = _response_bytes()
    with pytest.raises(metadata_v1.MetadataResponseError):
        metadata_v1.read_metadata_response(data[:-cut], 0)


def test_lying_count_raises_before_allocating() -> None:
    with pytest.raises(metadata_v1.MetadataResponseError):
        metadata_v1.read_metadata_response(struct.pack(">i", 2_000_000_000) + b"\x00" * 16, 0)

