"""__transaction_state records: Kafka's byte layouts, round trips, strict refusal of malformed bytes."""

from __future__ import annotations

import random
import struct

import pytest

from odradek.coordinator.records import RecordFormatError
from odradek.coordinator.transaction import records as rec
from odradek.coordinator.transaction.records import TransactionLogFormatError, TransactionLogValue

ONGOING = TransactionLogValue(
    producer_id=1234567890123,
    producer_epoch=7,
    transaction_timeout_ms=60000,
    transaction_status=1,
    transaction_partitions=(("orders", (0, 3)), ("é-topic", (2,))),
    last_update_timestamp_ms=1700000000123,
    start_timestamp_ms=1700000000000,
)
EMPTY = TransactionLogValue(5, 0, 30000, 0, None, 42, -1)
KIP890 = TransactionLogValue(9, 2, 1000, 4, (), 10, 5, previous_producer_id=8, next_producer_id=11,
                             client_transaction_version=2)


def test_key_layout_and_round_trip() -> None:
    assert rec.encode_key("tx") == b"\x00\x00\x00\x02tx"
    for tid in ("tx", "", "é", "😀 and more", "a" * 1000):
        assert rec.decode_key(rec.encode_key(tid)) == tid


def test_value_v0_layout() -> None:
    v = TransactionLogValue(1, 2, 3, 1, (("t", (4,)),), 5, 6)
    expected = (struct.pack(">hqhib", 0, 1, 2, 3, 1) + struct.pack(">i", 1) + b"\x00\x01t"
                + struct.pack(">ii", 1, 4) + struct.pack(">qq", 5, 6))
    assert rec.encode_value(v, 0) == expected
    assert rec.decode_value(expected) == v
    # null partitions (Empty)
    null = rec.encode_value(TransactionLogValue(1, 2, 3, 0, None, 5, 6), 0)
    assert null[17:21] == b"\xff\xff\xff\xff"


def test_value_v1_layout_with_tagged_fields() -> None:
    v = TransactionLogValue(1, 2, 3, 1, (("t", (4,)),), 5, 6, previous_producer_id=7, next_producer_id=-1,
                            client_transaction_version=2)
    expected = (struct.pack(">hqhib", 1, 1, 2, 3, 1)
                + b"\x02"  # compact array: 1 entry
                + b"\x02t"  # compact string "t"
                + b"\x02" + struct.pack(">i", 4)  # compact int32 array [4]
                + b"\x00"  # no tagged fields in the entry
                + struct.pack(">qq", 5, 6)
                + b"\x02"  # two tagged fields (next_producer_id is at its default)
                + b"\x00\x08" + struct.pack(">q", 7)
                + b"\x02\x02" + struct.pack(">h", 2))
    assert rec.encode_value(v, 1) == expected
    assert rec.decode_value(expected) == v
    # defaults are not written: no tagged field at all
    plain = rec.encode_value(TransactionLogValue(1, 2, 3, 0, None, 5, 6), 1)
    assert plain == struct.pack(">hqhib", 1, 1, 2, 3, 0) + b"\x00" + struct.pack(">qq", 5, 6) + b"\x00"


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("value", [ONGOING, EMPTY])
def test_round_trip_every_version(version: int, value: TransactionLogValue) -> None:
    assert rec.decode_value(rec.encode_value(value, version)) == value


def test_round_trip_kip890_fields_and_unknown_tags() -> None:
    assert rec.decode_value(rec.encode_value(KIP890, 1)) == KIP890
    with_unknown = TransactionLogValue(1, 2, 3, 1, None, 5, 6, unknown_tagged_fields=((3, b"\x00\x05"), (9, b"")))
    data = rec.encode_value(with_unknown, 1)
    assert rec.decode_value(data) == with_unknown
    assert rec.encode_value(rec.decode_value(data), 1) == data  # type: ignore[arg-type]


def test_v0_cannot_carry_tagged_fields() -> None:
    with pytest.raises(ValueError):
        rec.encode_value(KIP890, 0)


def test_tombstone_and_partitions() -> None:
    assert rec.decode_value(None) is None
    assert ONGOING.partitions() == {("orders", 0), ("orders", 3), ("é-topic", 2)}
    assert EMPTY.partitions() == frozenset()


BAD = [
    (b"", "empty key"),
    (b"\x00\x01\x00\x00", "key version 1"),
    (b"\x00\x00\xff\xff", "null transactional id"),
    (b"\x00\x00\x00\x05abc", "short string"),
    (b"\x00\x00\x00\x01a!", "trailing bytes"),
    (b"\x00\x00\x00\x02\xff\xfe", "invalid UTF-8"),
]


@pytest.mark.parametrize("data,why", BAD)
def test_bad_keys(data: bytes, why: str) -> None:
    with pytest.raises(TransactionLogFormatError):
        rec.decode_key(data)


def _v1(**over: bytes) -> bytes:
    parts = {
        "head": struct.pack(">hqhib", 1, 1, 2, 3, 1),
        "array": b"\x02\x02t\x02" + struct.pack(">i", 4) + b"\x00",
        "times": struct.pack(">qq", 5, 6),
        "tags": b"\x00",
    }
    parts.update(over)
    return b"".join(parts.values())


BAD_VALUES = [
    (b"\x00", "truncated version"),
    (b"\x00\x02" + bytes(40), "unknown version 2"),
    (b"\xff\xff" + bytes(40), "negative version"),
    (struct.pack(">hqhib", 0, 1, 2, 3, 9) + struct.pack(">i", -1) + bytes(16), "unknown state id 9"),
    (struct.pack(">hqhib", 0, 1, 2, 3, 1) + struct.pack(">i", 1000000) + bytes(16), "huge array count"),
    (struct.pack(">hqhib", 0, 1, 2, 3, 1) + struct.pack(">i", -1) + bytes(15), "truncated timestamps"),
    (struct.pack(">hqhib", 0, 1, 2, 3, 1) + struct.pack(">i", -1) + bytes(17), "trailing byte"),
    (_v1(tags=b"\x01\x00\x04" + bytes(4)), "previous producer id of 4 bytes"),
    (_v1(tags=b"\x02\x00\x08" + bytes(8) + b"\x00\x08" + bytes(8)), "duplicate tag"),
    (_v1(tags=b"\x01\x05\xff"), "tagged field past the end"),
    (_v1(tags=b"\xff\xff\xff\xff\xff\x01"), "varint longer than 5 bytes"),
    (_v1(tags=b"\xff\xff\xff\xff\x7f"), "varint beyond 32 bits"),
    (_v1(array=b"\x02\x00\x02" + struct.pack(">i", 4) + b"\x00"), "null topic"),
    (_v1(array=b"\x02\x02t\x00\x00"), "null partition array"),
    (_v1(array=b"\xff\xff\xff\xff\x0f"), "huge compact array"),
    (_v1(array=b"\x02\x02t\x02" + struct.pack(">i", 4) + b"\x01\x00\x00\x00\x00"), "duplicate entry tag"),
]


@pytest.mark.parametrize("data,why", BAD_VALUES)
def test_bad_values(data: bytes, why: str) -> None:
    with pytest.raises(TransactionLogFormatError):
        rec.decode_value(data)


def test_error_is_a_record_format_error() -> None:
    assert issubclass(TransactionLogFormatError, RecordFormatError)
    assert issubclass(TransactionLogFormatError, ValueError)
    with pytest.raises(TransactionLogFormatError):
        rec.decode_value("not bytes")  # type: ignore[arg-type]


def test_random_mutations_only_raise_the_documented_error() -> None:
    rng = random.Random(20261124)
    seeds = [rec.encode_value(v, ver) for v in (ONGOING, EMPTY) for ver in (0, 1)]
    seeds += [rec.encode_value(KIP890, 1), rec.encode_key("transactional-id")]
    decoded = refused = 0
    for _ in range(4000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(4)
            pos = rng.randrange(len(data) + 1)
            if op == 0 and data:
                data[min(pos, len(data) - 1)] = rng.randrange(256)
            elif op == 1:
                del data[pos:]
            elif op == 2:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
            elif data:
                del data[min(pos, len(data) - 1)]
        for decode in (rec.decode_value, rec.decode_key):
            try:
                decode(bytes(data))
                decoded += 1
            except TransactionLogFormatError:
                refused += 1
    assert decoded and refused


@pytest.mark.parametrize(
    "tid,java_hash",
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Utils.abs gives 0
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # hashed over UTF-16 code units (a surrogate pair)
    ],
)
def test_partition_for_matches_java_hash_code(tid: str, java_hash: int) -> None:
    from odradek.coordinator.records import java_string_hash

    assert java_string_hash(tid) == java_hash
    expected_abs = 0 if java_hash == -(2**31) else abs(java_hash)
    for n in (1, 7, 50):
        assert rec.partition_for(tid, n) == expected_abs % n
    assert rec.partition_for("hello", 50) == 22
    assert rec.partition_for("polygenelubricants", 50) == 0
