"""odradek.protocol.varint: Kafka's unsigned varints and zig-zag varints / varlongs (ByteUtils)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.protocol.varint import (
    VARINT_MAX_BYTES,
    VARLONG_MAX_BYTES,
    VarintError,
    encode_uvarint,
    encode_varint,
    read_uvarint,
    read_varint,
    unzigzag,
    zigzag,
)

Reader = Callable[..., tuple[int, int]]

# (value, encoding) pairs from Kafka's ByteUtilsTest
UNSIGNED = [
    (0, b"\x00"),
    (1, b"\x01"),
    (0x7F, b"\x7f"),
    (0x80, b"\x80\x01"),
    (300, b"\xac\x02"),
    (0x3FFF, b"\xff\x7f"),
    (0x4000, b"\x80\x80\x01"),
    (0x0FFFFFFF, b"\xff\xff\xff\x7f"),
    (0x10000000, b"\x80\x80\x80\x80\x01"),
    (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
]
SIGNED = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize(("value", "wire"), UNSIGNED)
def test_unsigned_round_trip(value: int, wire: bytes) -> None:
    assert encode_uvarint(value) == wire
    for buf in (wire, bytearray(wire + b"\xaa"), memoryview(b"\xbb" + wire)[1:]):
        assert read_uvarint(buf, 0, len(wire)) == (value, len(wire))


@pytest.mark.parametrize(("value", "wire"), SIGNED)
def test_signed_round_trip(value: int, wire: bytes) -> None:
    assert encode_varint(value) == wire
    assert read_varint(wire, 0, len(wire)) == (value, len(wire))
    assert read_varint(b"\x00\x00" + wire + b"\x00", 2, 2 + len(wire)) == (value, 2 + len(wire))


def test_varlong_extremes() -> None:
    for value in (2**63 - 1, -(2**63), 2**40, -(2**40) - 7):
        wire = encode_varint(value)
        assert len(wire) <= VARLONG_MAX_BYTES
        assert read_varint(wire, 0, len(wire), VARLONG_MAX_BYTES) == (value, len(wire))
    assert len(encode_varint(-(2**63))) == VARLONG_MAX_BYTES


def test_zigzag() -> None:
    assert [zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    for n in (0, 5, -5, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)):
        assert unzigzag(zigzag(n)) == n


@pytest.mark.parametrize("read", [read_uvarint, read_varint])
def test_truncated(read: Reader) -> None:
    with pytest.raises(VarintError, match="truncated"):
        read(b"", 0, 0)
    with pytest.raises(VarintError, match="truncated"):
        read(b"\x80", 0, 1)
    with pytest.raises(VarintError, match="truncated"):
        read(b"\xac\x02", 0, 1)  # the end bound, not the buffer, stops the read
    with pytest.raises(VarintError, match="truncated"):
        read(b"\x80\x80\x80\x01", 0, 3)
    with pytest.raises(VarintError, match="truncated"):
        read(b"\x05", 1, 1)


@pytest.mark.parametrize("read", [read_uvarint, read_varint])
def test_too_long(read: Reader) -> None:
    five = b"\xff\xff\xff\xff\x0f"
    assert read(five, 0, 5)[1] == 5
    six = b"\xff\xff\xff\xff\xff\x01"
    with pytest.raises(VarintError, match=f"longer than {VARINT_MAX_BYTES} bytes"):
        read(six, 0, len(six))
    ten = b"\xff" * 9 + b"\x01"
    assert read(ten, 0, 10, VARLONG_MAX_BYTES)[1] == 10
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read(b"\xff" * 10 + b"\x01", 0, 11, VARLONG_MAX_BYTES)


def test_error_is_a_value_error() -> None:
    assert issubclass(VarintError, ValueError)


def test_high_bits_beyond_the_width_are_dropped_as_kafka_drops_them() -> None:
    """ByteUtils.readVarint builds an int: the 5th byte's bits above bit 31 are lost, so a non-canonical
    encoding reads as the value Kafka reads (not as a larger one that a length check would refuse, or an
    offsetDelta that would name another offset). readVarlong does the same at 64 bits."""
    assert read_varint(b"\x80\x80\x80\x80\x70", 0, 5) == (0, 5)
    assert read_varint(b"\x82\x80\x80\x80\x10", 0, 5) == (1, 5)
    assert read_varint(b"\xff\xff\xff\xff\x7f", 0, 5) == (-(2**31), 5)
    assert read_varint(b"\xff" * 9 + b"\x7f", 0, 10, VARLONG_MAX_BYTES) == (-(2**63), 10)
    assert read_varint(b"\xfe" + b"\xff" * 8 + b"\x03", 0, 10, VARLONG_MAX_BYTES) == (2**63 - 1, 10)
