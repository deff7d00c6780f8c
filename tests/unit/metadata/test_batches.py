"""Batches of the metadata log: data batches of metadata records, control batches of KRaft's control records
(kio's schemas), and a segment that is corrupt or cut short refused with where and why."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.leader_change_message.v0.data import Voter as LeaderVoter
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.static.primitive import i16, i64, u16

from odradek.metadata.batches import (
    build_control_batch,
    build_records_batch,
    decode_control,
    encode_control,
    read_batches,
    records_of,
)
from odradek.metadata.records import NoOpRecord, RecordAndVersion, TopicRecord, encode_record
from odradek.metadata.schema import MetadataRecordError
from odradek.protocol.records import build_batch, read_header

from .samples import sample_log

LEADER_CHANGE = LeaderChangeMessage(version=i16(0), leader_id=BrokerId(1), voters=(LeaderVoter(voter_id=BrokerId(1)),),
                                    granting_voters=(LeaderVoter(voter_id=BrokerId(1)),))
VOTERS = VotersRecord(version=i16(0), voters=(Voter(
    voter_id=BrokerId(1), voter_directory_id=uuid.UUID(int=77),
    endpoints=(Endpoint(name="CONTROLLER", host="127.0.0.1", port=u16(19093)),),
    k_raft_version_feature=KRaftVersionFeature(min_supported_version=i16(0), max_supported_version=i16(1))),))


def test_a_log_of_control_and_data_batches_reads_back() -> None:
    log = sample_log()
    data = build_control_batch([LEADER_CHANGE], base_offset=0, leader_epoch=4, timestamp=7)
    data += build_records_batch(log, base_offset=1, leader_epoch=4, timestamp=8)
    data += build_control_batch([KRaftVersionRecord(version=i16(0), k_raft_version=i16(1)), VOTERS],
                                base_offset=1 + len(log), leader_epoch=5, timestamp=9)
    batches = list(read_batches(data))
    assert [(b.base_offset, b.is_control, b.leader_epoch, len(b.entries)) for b in batches] == [
        (0, True, 4, 1), (1, False, 4, len(log)), (1 + len(log), True, 5, 2)]
    assert batches[0].entries[0].control == LEADER_CHANGE
    assert batches[2].entries[1].control == VOTERS
    assert list(records_of(batches)) == log
    assert [e.offset for e in batches[1].entries] == list(range(1, 1 + len(log)))
    h = read_header(data, batches[0].size)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.attributes) == (-1, -1, -1, 0)


def test_a_control_record_is_kafkas_key_and_unprefixed_value() -> None:
    key, value = encode_control(SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(5)))
    assert key == struct.pack(">hh", 0, 3)
    assert value == struct.pack(">hq", 0, 5) + bytes([0])  # Version, LastContainedLogTimestamp, no tags
    assert decode_control(key, value) == SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(5))
    key, value = encode_control(SnapshotFooterRecord(version=i16(0)))
    assert (key, value) == (struct.pack(">hh", 0, 4), bytes([0, 0, 0]))


@pytest.mark.parametrize(("key", "value", "message"), [
    (b"\x00", b"", "at least 4 bytes"),
    (struct.pack(">hh", 1, 2), b"", "key version 1"),
    (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00\x00", "type 1 is not one of the KRaft log"),
    (struct.pack(">hh", 0, 2), None, "has no value"),
    (struct.pack(">hh", 0, 2), b"\x00", "malformed LeaderChangeMessage"),
    (struct.pack(">hh", 0, 4), b"\x00\x00\x00\x00", "1 byte\\(s\\) of garbage after SnapshotFooterRecord"),
    (struct.pack(">hh", 0, 2), b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\x0f", "malformed LeaderChangeMessage"),
])
def test_bad_control_records(key: bytes, value: bytes | None, message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        decode_control(key, value)


def test_a_corrupt_batch_is_refused() -> None:
    data = bytearray(build_records_batch([TopicRecord(name="a", topic_id=uuid.UUID(int=1))], base_offset=3,
                                         leader_epoch=1, timestamp=0))
    data[-3] ^= 0xFF
    with pytest.raises(MetadataRecordError, match="batch at offset 3 fails its CRC-32C"):
        list(read_batches(data))


def test_a_segment_cut_short_is_refused() -> None:
    data = build_records_batch([NoOpRecord()], base_offset=0, leader_epoch=1, timestamp=0)
    with pytest.raises(MetadataRecordError, match="10 byte\\(s\\) after the last whole batch, at position"):
        list(read_batches(data + data[:10]))


def test_an_undecodable_record_names_its_offset() -> None:
    good = encode_record(NoOpRecord())
    data = build_batch([(None, good), (None, bytes([1, 6, 0, 0]))], base_offset=10)
    with pytest.raises(MetadataRecordError, match="record at offset 11: Unknown metadata id 6"):
        list(read_batches(data))
    with pytest.raises(MetadataRecordError, match="record at offset 10: a metadata record has no value"):
        list(read_batches(build_batch([(None, None)], base_offset=10)))


def test_records_keep_their_versions() -> None:
    items = [RecordAndVersion(TopicRecord(name="a", topic_id=uuid.UUID(int=1)), 0)]
    [batch] = read_batches(build_records_batch(items, base_offset=0, leader_epoch=0, timestamp=0))
    assert batch.entries[0].record == items[0]
