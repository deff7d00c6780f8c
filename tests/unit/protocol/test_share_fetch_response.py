"""The hand-built ShareFetchResponse is byte for byte what kio encodes for the same response (v1 and v2)."""

from __future__ import annotations

import datetime
import os
import tempfile
import uuid

import pytest

from odradek.protocol import codec
from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.share_fetch_response import (
    SharePartitionData,
    ShareTopicData,
    encode_share_fetch_response,
)


@pytest.mark.parametrize("version", [1, 2])
def test_matches_kio(version: int) -> None:
    m = codec.response_module(78, version)
    records = b"\x00" * 10 + b"batch-bytes" * 3
    t1, t2 = uuid.UUID(int=5), uuid.UUID(int=9)
    entity = codec.make(m.ShareFetchResponse,
        throttle_time=datetime.timedelta(milliseconds=7), error_code=0, error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=30000),
        responses=(
            m.ShareFetchableTopicResponse(topic_id=t1, partitions=(
                codec.make(m.PartitionData, partition_index=0, error_code=0, error_message=None, acknowledge_error_code=121,
                                acknowledge_error_message="not acquired",
                                current_leader=m.LeaderIdAndEpoch(leader_id=3, leader_epoch=4), records=records,
                                acquired_records=(m.AcquiredRecords(first_offset=5, last_offset=9, delivery_count=2),
                                                  m.AcquiredRecords(first_offset=11, last_offset=11,
                                                                    delivery_count=1))),
                codec.make(m.PartitionData, partition_index=2, error_code=6, error_message="gone", acknowledge_error_code=0,
                                acknowledge_error_message=None,
                                current_leader=m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b"",
                                acquired_records=()),
            )),
            m.ShareFetchableTopicResponse(topic_id=t2, partitions=()),
        ),
        node_endpoints=(m.NodeEndpoint(node_id=1, host="h", port=9092, rack=None),),
    )
    expected = codec.encode(entity)
    fd, path = tempfile.mkstemp()
    try:
        os.write(fd, b"xx" + records)
        with open(path, "rb") as f:
            parts, size = encode_share_fetch_response(
                [ShareTopicData(t1, [
                    SharePartitionData(0, 0, None, 121, "not acquired", 3, 4, [FileRegion(f, 2, len(records))],
                                       len(records), [(5, 9, 2), (11, 11, 1)]),
                    SharePartitionData(2, 6, "gone"),
                ]), ShareTopicData(t2)],
                throttle_time_ms=7, acquisition_lock_timeout_ms=30000, node_endpoints=[(1, "h", 9092, None)],
            )
            body = b"".join(p if isinstance(p, bytes) else os.pread(p.file.fileno(), p.length, p.position)
                            for p in parts)
    finally:
        os.close(fd)
        os.unlink(path)
    assert size == len(body)
    assert body == expected
