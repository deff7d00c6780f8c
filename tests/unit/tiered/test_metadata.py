"""odradek.tiered.metadata: the remote log metadata, its state machines, and the records of
__remote_log_metadata byte for byte as Kafka 4.4 writes them.

The hex values below were written by Kafka 4.4's own RemoteLogMetadataSerde (kafka-storage-4.4.0.jar)
from the objects that ``_segment`` and the tests build, and ``PARTITIONER`` holds the answers of its
RemoteLogMetadataTopicPartitioner(50): a Java program over peers/kafka/target/libs constructed the same
metadata (topic id 0123456789abcdef-fedcba9876543210, segment id 1111222233334444-5555666677778888) and
printed ``serialize``'s bytes and ``metadataPartition``'s answers."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.tiered.metadata import (
    RemoteLogMetadataParseError,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    deserialize,
    kafka_uuid_str,
    metadata_partition,
    murmur2,
    serialize,
)

S = RemoteLogSegmentState
P = RemotePartitionDeleteState

TOPIC_ID = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210)
SEG_ID = uuid.UUID(int=(0x1111222233334444 << 64) | 0x5555666677778888)
TP = TopicIdPartition(TOPIC_ID, "orders", 3)
SID = RemoteLogSegmentId(TP, SEG_ID)

KAFKA = {
    "segment_started": (
        "010000076f72646572730123456789abcdeffedcba987654321000000003001111222233334444555566667777888800"
        "000000000000006400000000000000c7000000010000018bcfe5687b0000018bcfe569c8030000000000000000000000"
        "64000000000200000000000000960000100000000000"
    ),
    "segment_finished_txn_empty": (
        "010000076f72646572730123456789abcdeffedcba987654321000000003001111222233334444555566667777888800"
        "000000000000006400000000000000c7000000010000018bcfe5687b0000018bcfe569c8030000000000000000000000"
        "64000000000200000000000000960000100000040102030101000101"
    ),
    "update_finished": (
        "010100076f72646572730123456789abcdeffedcba987654321000000003001111222233334444555566667777888800"
        "000000020000018bcfe56b1502090100"
    ),
    "update_delete_started": (
        "010100076f72646572730123456789abcdeffedcba987654321000000003001111222233334444555566667777888800"
        "000000020000018bcfe56be7000200"
    ),
    "partition_delete_marked": (
        "010200076f72646572730123456789abcdeffedcba98765432100000000300000000000000018bcfe56be80000"
    ),
    "snapshot": (
        "01030011112222333344445555666677778888000000000000006400000000000000c7000000010000018bcfe5687b00"
        "00018bcfe569c803000000000000000000000064000000000200000000000000960000100000040102030101000101"
    ),
    "snapshot_started": (
        "01030011112222333344445555666677778888000000000000006400000000000000c7000000010000018bcfe5687b00"
        "00018bcfe569c803000000000000000000000064000000000200000000000000960000100000000000"
    ),
}
# (topic id msb, lsb, partition) -> RemoteLogMetadataTopicPartitioner(50).metadataPartition
PARTITIONER = {
    (0, 0, 0): 6, (0, 0, 1): 30, (0, 0, 7): 31, (0, 0, 1000): 20,
    (2**64 - 1, 2**64 - 1, 0): 6, (2**64 - 1, 2**64 - 1, 1): 30,
    (2**64 - 1, 2**64 - 1, 7): 31, (2**64 - 1, 2**64 - 1, 1000): 20,
    (0x7FFFFFFFFFFFFFFF, 42, 0): 23, (0x7FFFFFFFFFFFFFFF, 42, 1): 23,
    (0x7FFFFFFFFFFFFFFF, 42, 7): 36, (0x7FFFFFFFFFFFFFFF, 42, 1000): 45,
    (0x0123456789ABCDEF, 0xFEDCBA9876543210, 0): 11, (0x0123456789ABCDEF, 0xFEDCBA9876543210, 1): 2,
    (0x0123456789ABCDEF, 0xFEDCBA9876543210, 3): 12,
    (0x0123456789ABCDEF, 0xFEDCBA9876543210, 7): 26, (0x0123456789ABCDEF, 0xFEDCBA9876543210, 1000): 46,
}


def _segment(**kw: object) -> RemoteLogSegmentMetadata:
    args: dict[str, object] = dict(
        segment_id=SID, start_offset=100, end_offset=199, max_timestamp_ms=1700000000123, broker_id=1,
        event_timestamp_ms=1700000000456, segment_size_in_bytes=1048576,
        segment_leader_epochs={0: 100, 2: 150},
    )
    args.update(kw)
    return RemoteLogSegmentMetadata(**args)  # type: ignore[arg-type]


FINISHED = _segment(custom_metadata=b"\x01\x02\x03", state=S.COPY_SEGMENT_FINISHED, txn_idx_empty=True)
OBJECTS = {
    "segment_started": _segment(),
    "segment_finished_txn_empty": FINISHED,
    "update_finished": RemoteLogSegmentMetadataUpdate(SID, 1700000000789, b"\x09", S.COPY_SEGMENT_FINISHED, 2),
    "update_delete_started": RemoteLogSegmentMetadataUpdate(SID, 1700000000999, None, S.DELETE_SEGMENT_STARTED, 2),
    "partition_delete_marked": RemotePartitionDeleteMetadata(TP, P.DELETE_PARTITION_MARKED, 1700000001000, 0),
    "snapshot": RemoteLogSegmentMetadataSnapshot.create(FINISHED),
    "snapshot_started": RemoteLogSegmentMetadataSnapshot.create(_segment()),
}


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_serialize_writes_kafkas_bytes(name: str) -> None:
    assert serialize(OBJECTS[name]).hex() == KAFKA[name]


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_deserialize_reads_kafkas_bytes(name: str) -> None:
    assert deserialize(bytes.fromhex(KAFKA[name])) == OBJECTS[name]


def test_the_metadata_partition_is_kafkas() -> None:
    for (msb, lsb, partition), expected in PARTITIONER.items():
        tp = TopicIdPartition(uuid.UUID(int=(msb << 64) | lsb), "t", partition)
        assert metadata_partition(tp, 50) == expected, (hex(msb), hex(lsb), partition)
    # the topic name plays no part
    assert metadata_partition(TP, 50) == metadata_partition(TopicIdPartition(TOPIC_ID, "other", 3), 50) == 12


def test_murmur2_matches_kafkas_partitioner_values() -> None:
    # Kafka's DefaultPartitioner tests (Utils.murmur2 of the UTF-8 key; toPositive % numPartitions)
    assert murmur2(b"") == 275646681
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(bytes([ord("a"), ord("b"), ord("c")])) == 479470107


def test_kafka_uuid_string() -> None:
    assert kafka_uuid_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(kafka_uuid_str(TOPIC_ID)) == 22


SEGMENT_TRANSITIONS = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
} | {(s, s) for s in S}


def test_segment_state_transitions_are_kafkas() -> None:
    for src in (None, *S):
        for target in S:
            assert S.is_valid_transition(src, target) == ((src, target) in SEGMENT_TRANSITIONS), (src, target)


def test_partition_delete_state_transitions_are_kafkas() -> None:
    valid = {
        (None, P.DELETE_PARTITION_MARKED),
        (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED),
        (P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED),
    } | {(s, s) for s in P}
    for src in (None, *P):
        for target in P:
            assert P.is_valid_transition(src, target) == ((src, target) in valid), (src, target)


def test_metadata_checks_its_offsets_and_epochs() -> None:
    with pytest.raises(ValueError, match="negative"):
        _segment(start_offset=-1)
    with pytest.raises(ValueError, match="below start offset"):
        _segment(end_offset=99)
    with pytest.raises(ValueError, match="empty"):
        _segment(segment_leader_epochs={})
    assert _segment(segment_leader_epochs=[(5, 150), (2, 100)]).segment_leader_epochs == ((2, 100), (5, 150))


def test_create_with_updates_keeps_the_segment_and_takes_the_update() -> None:
    upd = RemoteLogSegmentMetadataUpdate(SID, 7, b"x", S.COPY_SEGMENT_FINISHED, 9)
    m = _segment(txn_idx_empty=True).create_with_updates(upd)
    assert (m.state, m.broker_id, m.event_timestamp_ms, m.custom_metadata) == (S.COPY_SEGMENT_FINISHED, 9, 7, b"x")
    assert (m.start_offset, m.end_offset, m.segment_size_in_bytes, m.txn_idx_empty) == (100, 199, 1048576, True)
    other = RemoteLogSegmentId(TP, uuid.uuid4())
    with pytest.raises(ValueError):
        m.create_with_updates(RemoteLogSegmentMetadataUpdate(other, 7, None, S.COPY_SEGMENT_FINISHED, 9))


def test_epoch_end_offset() -> None:
    m = _segment()  # epochs 0 from 100, 2 from 150; end 199
    assert m.epoch_end_offset(0) == 149
    assert m.epoch_end_offset(1) == 149
    assert m.epoch_end_offset(2) == 199


@pytest.mark.parametrize(
    ("hexdata", "message"),
    [
        ("00" + KAFKA["segment_started"][2:], "frame version 0"),
        ("02" + KAFKA["segment_started"][2:], "frame version 2"),
        ("0104" + KAFKA["segment_started"][4:], "record type 4"),
        ("010001" + KAFKA["segment_started"][6:], "version 1"),
        (KAFKA["segment_started"] + "00", "garbage"),
        (KAFKA["segment_started"][:-10], "truncated"),
        (KAFKA["update_delete_started"][:-4] + "07" + "00", "unknown remote log segment state 7"),
        (KAFKA["partition_delete_marked"][:-4] + "03" + "00", "unknown remote partition delete state 3"),
        ("010000" + "00" + KAFKA["segment_started"][8:], "serialized as null"),
    ],
)
def test_deserialize_refuses_what_kafka_refuses(hexdata: str, message: str) -> None:
    with pytest.raises(RemoteLogMetadataParseError, match=message):
        deserialize(bytes.fromhex(hexdata))


def test_deserialize_refuses_metadata_kafkas_constructor_refuses() -> None:
    bad = serialize(_segment()).hex().replace("00000000000000c7", "0000000000000063", 1)  # end 99 < start 100
    with pytest.raises(RemoteLogMetadataParseError, match="below start offset"):
        deserialize(bytes.fromhex(bad))


def test_unknown_tagged_fields_are_skipped() -> None:
    data = bytes.fromhex(KAFKA["update_delete_started"])
    with_tag = data[:-1] + bytes.fromhex("01" "05" "02" "abcd")  # one unknown tag 5 of two bytes
    assert deserialize(with_tag) == OBJECTS["update_delete_started"]


def test_serialize_refuses_values_outside_kafkas_types() -> None:
    with pytest.raises(ValueError, match="range"):
        serialize(_segment(segment_size_in_bytes=2**31))


_ids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
_tps = st.builds(
    TopicIdPartition, _ids, st.text(st.sampled_from("abcXYZ09._-"), min_size=1, max_size=249),
    st.integers(0, 2**31 - 1),
)
_i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _segments(draw: st.DrawFn) -> RemoteLogSegmentMetadata:
    start = draw(st.integers(0, 2**62))
    end = draw(st.integers(start, 2**63 - 1))
    epochs = draw(st.dictionaries(st.integers(0, 2**31 - 1), st.integers(start, end), min_size=1, max_size=5))
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(draw(_tps), draw(_ids)), start, end, draw(_i64), draw(st.integers(-1, 2**31 - 1)),
        draw(_i64), draw(st.integers(0, 2**31 - 1)), epochs,
        draw(st.none() | st.binary(max_size=64)), draw(st.sampled_from(S)), draw(st.booleans()),
    )


@given(_segments())
def test_segment_metadata_round_trips(m: RemoteLogSegmentMetadata) -> None:
    assert deserialize(serialize(m)) == m
    snap = RemoteLogSegmentMetadataSnapshot.create(m)
    assert deserialize(serialize(snap)) == snap


@given(_tps, _ids, _i64, st.none() | st.binary(max_size=64), st.sampled_from(S), st.integers(-1, 2**31 - 1))
def test_update_round_trips(
    tp: TopicIdPartition, sid: uuid.UUID, ts: int, custom: bytes | None, state: RemoteLogSegmentState, broker: int
) -> None:
    u = RemoteLogSegmentMetadataUpdate(RemoteLogSegmentId(tp, sid), ts, custom, state, broker)
    assert deserialize(serialize(u)) == u


@given(_tps, st.sampled_from(P), _i64, st.integers(-1, 2**31 - 1))
def test_partition_delete_round_trips(tp: TopicIdPartition, state: RemotePartitionDeleteState, ts: int, broker: int) -> None:
    d = RemotePartitionDeleteMetadata(tp, state, ts, broker)
    assert deserialize(serialize(d)) == d


@given(st.binary(max_size=200))
def test_deserialize_raises_only_parse_errors(data: bytes) -> None:
    with contextlib.suppress(RemoteLogMetadataParseError):
        deserialize(data)
