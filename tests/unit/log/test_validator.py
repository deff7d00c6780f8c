"""log.validator (Kafka's LogValidator): what a leader accepts, how it assigns offsets, and the error
(code, record errors) it refuses with."""

from __future__ import annotations

import gzip
import struct

import crc32c
import pytest

from odradek.log.config import LogConfig
from odradek.log.validator import AppendOrigin, ValidationPolicy, validate_and_assign_offsets
from odradek.protocol.errors import CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE
from odradek.protocol.records import (
    COMPRESSION_GZIP,
    InvalidRecordError,
    build_batch,
    decode_records,
    encode_record,
    read_header,
)

NOW = 1_700_000_000_000
HOUR = 3_600_000


def raw_batch(section: bytes, count: int, *, codec: int = 0, base_ts: int = NOW, max_ts: int | None = None,
              last_offset_delta: int | None = None, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    after = struct.pack(">hiqqqhii", codec, count - 1 if last_offset_delta is None else last_offset_delta,
                        base_ts, base_ts if max_ts is None else max_ts, producer_id, 0, base_sequence,
                        count) + section
    return struct.pack(">qiibI", 0, len(after) + 9, -1, 2, crc32c.crc32c(after)) + after


def section(n: int, keys: list[bytes | None] | None = None, ts_deltas: list[int] | None = None,
            offset_deltas: list[int] | None = None, value: bytes = b"v") -> bytes:
    ks = keys if keys is not None else [b"k%d" % i for i in range(n)]
    return b"".join(encode_record((offset_deltas or list(range(n)))[i], (ts_deltas or [0] * n)[i], ks[i], value)
                    for i in range(n))


def run(records: bytes, policy: ValidationPolicy | None = None, first_offset: int = 0, **kw: object):  # type: ignore[no-untyped-def]
    return validate_and_assign_offsets(
        bytearray(records), first_offset=first_offset, leader_epoch=3, now_ms=NOW,
        policy=policy or ValidationPolicy(), partition="t-0", **kw,  # type: ignore[arg-type]
    )


def refused(records: bytes, policy: ValidationPolicy | None = None, **kw: object) -> InvalidRecordError:
    with pytest.raises(InvalidRecordError) as e:
        run(records, policy, **kw)
    return e.value


def test_offsets_and_leader_epoch_are_assigned_in_place() -> None:
    data = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=NOW) + build_batch([(b"c", b"3")], timestamp=NOW)
    res = run(data, first_offset=10)
    assert [h.base_offset for h in res.headers] == [10, 12]
    assert res.last_offset == 12 and res.record_count == 3 and res.max_timestamp == NOW
    first = read_header(res.buffer)
    assert (first.base_offset, first.partition_leader_epoch) == (10, 3)
    assert [r.offset for r in decode_records(bytes(res.buffer[: first.size]))] == [10, 11]


def test_policy_follows_the_log_config_and_kip_937_defaults() -> None:
    p = ValidationPolicy.of(LogConfig())
    assert p.timestamp_after_max_ms == HOUR and p.timestamp_before_max_ms == 2**63 - 1
    assert ValidationPolicy.of(LogConfig(cleanup_policy="compact")).compacted


@pytest.mark.parametrize("codec", [0, COMPRESSION_GZIP])
@pytest.mark.parametrize("sec,count,code", [
    (section(3), 1, INVALID_RECORD),  # more records than the header says
    (section(2), 3, INVALID_RECORD),  # fewer
    (section(3, offset_deltas=[0, 0, 1]), 3, INVALID_RECORD),
    (section(3)[:-2], 3, CORRUPT_MESSAGE),
])
def test_records_must_match_the_header(codec: int, sec: bytes, count: int, code: int) -> None:
    payload = gzip.compress(sec) if codec else sec
    assert refused(raw_batch(payload, count, codec=codec)).error_code == code


def test_header_checks() -> None:
    assert refused(raw_batch(section(2), 2, last_offset_delta=5)).error_code == INVALID_RECORD
    assert refused(raw_batch(section(1), 1, producer_id=7, base_sequence=-1)).error_code == INVALID_RECORD
    control = bytearray(build_batch([(b"k", b"v")], timestamp=NOW, control=True))
    assert refused(bytes(control)).error_code == INVALID_RECORD
    assert run(bytes(control), origin=AppendOrigin.COORDINATOR).record_count == 1
    big = build_batch([(b"k", b"x" * 2000)], timestamp=NOW)
    assert refused(big, ValidationPolicy(max_message_bytes=1000)).error_code == MESSAGE_TOO_LARGE


def test_inflated_size_is_bounded_by_max_message_bytes() -> None:
    sec = section(10, value=bytes(20_000))
    batch = raw_batch(gzip.compress(sec), 10, codec=COMPRESSION_GZIP)
    assert len(batch) < 2000
    e = refused(batch, ValidationPolicy(max_message_bytes=100_000))
    assert e.error_code == MESSAGE_TOO_LARGE and "max.message.bytes 100000" in e.message
    assert run(batch, ValidationPolicy(max_message_bytes=len(sec))).record_count == 10


def test_keyless_records_on_a_compacted_topic_are_named() -> None:
    compacted = ValidationPolicy(compacted=True)
    for codec in (0, COMPRESSION_GZIP):
        sec = section(5, keys=[b"a", None, b"c", b"d", None])
        e = refused(raw_batch(gzip.compress(sec) if codec else sec, 5, codec=codec), compacted)
        assert e.error_code == INVALID_RECORD
        assert [i for i, _m in e.record_errors] == [1, 4]
        assert e.record_errors[0][1] == "Compacted topic cannot accept message without key in topic partition t-0."
        assert e.message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert run(raw_batch(section(2, keys=[None, None]), 2)).record_count == 2  # fine when not compacted


def test_each_record_timestamp_is_checked() -> None:
    sec = section(4, ts_deltas=[0, 10, 2 * HOUR, 5])
    e = refused(raw_batch(sec, 4, max_ts=NOW + 10))  # the header lies about the max
    assert e.error_code == INVALID_TIMESTAMP
    assert [i for i, _m in e.record_errors] == [2]
    assert e.record_errors[0][1] == (
        f"Timestamp {NOW + 2 * HOUR} of message with offset 2 is out of range. "
        f"The timestamp should be within [{NOW - (2**63 - 1)}, {NOW + HOUR}]"
    )
    before = ValidationPolicy(timestamp_before_max_ms=HOUR)
    e = refused(raw_batch(section(3, ts_deltas=[0, -2 * HOUR, 1]), 3), before)
    assert [i for i, _m in e.record_errors] == [1]
    # records without a timestamp (-1) are not checked; nor are LogAppendTime topics
    assert run(raw_batch(section(2), 2, base_ts=-1), before).record_count == 2
    res = run(raw_batch(sec, 4), ValidationPolicy(log_append_time=True))
    assert res.max_timestamp == NOW


def test_a_lying_max_timestamp_is_corrected_with_its_crc() -> None:
    res = run(raw_batch(section(3, ts_deltas=[0, 50, 20]), 3, max_ts=NOW))
    h = read_header(res.buffer)
    assert h.max_timestamp == NOW + 50 == res.max_timestamp
    assert crc32c.crc32c(bytes(res.buffer[21 : h.size])) == h.crc


def test_unwalked_uncompressed_records_fall_back_to_header_timestamps() -> None:
    policy = ValidationPolicy(check_records=False)
    assert run(raw_batch(section(3), 1), policy).record_count == 1  # not walked: the header is believed
    assert refused(raw_batch(section(1), 1, base_ts=NOW + 2 * HOUR), policy).error_code == INVALID_TIMESTAMP
