"""Metadata records (KIP-631) in Kafka's framing: every type and version round trips, the bytes are Kafka's
(checked by hand here, by Kafka 4.4's own decoder in tests/judges/test_metadata_records.py), tagged fields are
written only when they differ from their default and unknown ones are kept, and bad input is refused with a
clear error."""

from __future__ import annotations

import uuid

import pytest

from odradek.metadata.records import (
    RECORD_TYPES,
    ClientQuotaRecord,
    ConfigRecord,
    EntityData,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from odradek.metadata.schema import MetadataRecordError

from .samples import sample_log

TID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)


def test_every_kafka_44_record_type_is_declared() -> None:
    # MetadataRecordType of Kafka 4.4: api keys 0-29 but 6, 13 and 16 (removed before KRaft shipped)
    assert sorted(RECORD_TYPES) == [k for k in range(30) if k not in (6, 13, 16)]
    assert {cls.HIGHEST for cls in RECORD_TYPES.values() if cls.HIGHEST} == {2, 3, 4}
    assert (RECORD_TYPES[0].HIGHEST, RECORD_TYPES[3].HIGHEST, RECORD_TYPES[5].HIGHEST, RECORD_TYPES[17].HIGHEST) == (
        4, 2, 2, 3)


@pytest.mark.parametrize("item", sample_log(), ids=lambda r: f"{type(r.record).__name__}-v{r.version}")
def test_every_sample_round_trips(item: RecordAndVersion) -> None:
    raw = encode_record(item.record, item.version)
    assert decode_record(raw) == item
    assert encode_record(*decode_record(raw)) == raw


def test_every_type_and_version_is_in_the_samples() -> None:
    seen = {(type(r.record).API_KEY, r.version) for r in sample_log()}
    wanted = {(k, v) for k, cls in RECORD_TYPES.items() for v in range(cls.LOWEST, cls.HIGHEST + 1)}
    assert wanted == seen


def test_topic_record_bytes() -> None:
    raw = encode_record(TopicRecord(name="foo", topic_id=TID))
    assert raw == bytes([1, 2, 0]) + bytes([4]) + b"foo" + TID.bytes + bytes([0])


def test_a_partition_change_without_changes_has_no_tagged_fields() -> None:
    raw = encode_record(PartitionChangeRecord(partition_id=7, topic_id=TID), 0)
    assert raw == bytes([1, 5, 0]) + (7).to_bytes(4, "big") + TID.bytes + bytes([0])


def test_tagged_fields_are_written_by_ascending_tag() -> None:
    """Directories is declared before the ELR fields but has tag 8: it goes last, as Kafka writes it."""
    d = uuid.UUID(int=9)
    raw = encode_record(PartitionChangeRecord(partition_id=1, topic_id=TID, leader=-1, directories=(d,),
                                              last_known_elr=(3,)), 2)
    body = raw[3 + 4 + 16:]
    assert body == bytes([3,
                          1, 4]) + (-1).to_bytes(4, "big", signed=True) + bytes([
                          7, 5, 2]) + (3).to_bytes(4, "big") + bytes([
                          8, 17, 2]) + d.bytes


def test_the_default_leader_recovery_state_is_not_written() -> None:
    base = PartitionRecord(partition_id=0, topic_id=TID, replicas=(1,), isr=(1,), leader=1, leader_epoch=0,
                           partition_epoch=0)
    assert encode_record(base, 0).endswith(bytes([0]))
    recovering = encode_record(PartitionRecord(**{**base.__dict__, "leader_recovery_state": 1}), 0)
    assert recovering.endswith(bytes([1, 0, 1, 1]))  # one tagged field: tag 0, size 1, value 1


def test_a_quota_record_float_and_null_entity_name() -> None:
    rec = ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name=None),), key="k", value=0.5)
    raw = encode_record(rec)
    assert raw == (bytes([1, 14, 0, 2, 5]) + b"user" + bytes([0, 0]) + bytes([2]) + b"k"
                   + bytes.fromhex("3fe0000000000000") + bytes([0, 0]))
    assert decode_record(raw).record == rec


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    raw = bytearray(encode_record(TopicRecord(name="t", topic_id=TID)))
    raw[-1:] = bytes([1, 40, 2, 0xAB, 0xCD])  # one tagged field, tag 40, 2 bytes: a newer Kafka's
    decoded = decode_record(bytes(raw))
    assert decoded.record.unknown_tags == ((40, b"\xab\xcd"),)
    assert encode_record(*decoded) == bytes(raw)


def test_a_field_the_version_cannot_carry_is_refused() -> None:
    rec = RegisterBrokerRecord(broker_id=1, log_dirs=(TID,))
    with pytest.raises(MetadataRecordError, match="version 2 cannot carry log_dirs"):
        encode_record(rec, 2)
    with pytest.raises(MetadataRecordError, match="versions 0-4, not 5"):
        encode_record(rec, 5)
    with pytest.raises(MetadataRecordError, match="not nullable"):
        encode_record(TopicRecord(name=None, topic_id=TID))  # type: ignore[arg-type]


@pytest.mark.parametrize(("raw", "message"), [
    (bytes([0, 2, 0]), "frame version 0"),
    (bytes([2, 2, 0]), "unknown frame version 2"),
    (bytes([1, 6, 0, 0]), "Unknown metadata id 6"),
    (bytes([1, 99, 0, 0]), "Unknown metadata id 99"),
    (bytes([1, 3, 3]), "PartitionRecord version 3 is not one Kafka 4.4 knows"),
    (bytes([1, 0x80, 0x80, 0x02, 0]), "Value for type was too large"),
    (bytes([1, 20, 0, 0, 0]), "1 byte\\(s\\) of garbage after NoOpRecord"),
    (bytes([1, 2, 0, 4]) + b"fo", "runs past its end"),
    (bytes([1, 2, 0, 0]) + TID.bytes + bytes([0]), "non-nullable field TopicRecord.name was serialized as null"),
    (bytes([1, 2, 0, 2, 0xFF]) + TID.bytes + bytes([0]), "invalid UTF-8"),
    (bytes([1, 3, 0, 0, 0, 0, 0]) + TID.bytes + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07]), "runs past the record's end"),
    (bytes([1, 20, 0]), "truncated varint"),
])
def test_bad_records_are_refused_with_a_reason(raw: bytes, message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        decode_record(raw)


def test_a_tagged_field_whose_size_lies_is_refused() -> None:
    raw = encode_record(PartitionChangeRecord(partition_id=0, topic_id=TID, leader=1), 0)
    bad = raw[:-5] + bytes([5]) + raw[-4:] + bytes([0])  # leader's size says 5, the int32 is 4
    with pytest.raises(MetadataRecordError, match="tagged field of 5 bytes holds 4"):
        decode_record(bad)


def test_null_config_value_deletes_and_round_trips() -> None:
    rec = ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=None)
    assert decode_record(encode_record(rec)).record == rec
    assert encode_record(rec).endswith(bytes([0, 0]))  # null value, no tagged fields


def test_noop_is_four_bytes() -> None:
    assert encode_record(NoOpRecord()) == bytes([1, 20, 0, 0])

