"""Bounded, streaming inflation (records.iter_inflate / inflate) and the field-by-field record walk
(records.scan_records, C and pure Python)."""

from __future__ import annotations

import gzip
import random
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard

from odradek import _speedups
from odradek.protocol.errors import CORRUPT_MESSAGE, MESSAGE_TOO_LARGE
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    SCAN_MALFORMED,
    SCAN_OFFSET_DELTA,
    InvalidRecordError,
    _scan_uncompressed,
    build_batch,
    encode_record,
    encode_varint,
    inflate,
    iter_inflate,
    record_infos,
    record_times,
)

MiB = 1 << 20


def _xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    for i in range(0, len(data), block):
        c = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += len(c).to_bytes(4, "big") + c
    return bytes(out)


COMPRESSORS = {
    "gzip": (COMPRESSION_GZIP, gzip.compress),
    "snappy-raw": (COMPRESSION_SNAPPY, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    "snappy-xerial": (COMPRESSION_SNAPPY, _xerial),
    "lz4": (COMPRESSION_LZ4, lz4.frame.compress),
    "zstd": (COMPRESSION_ZSTD, lambda d: zstandard.ZstdCompressor().compress(d)),
}


def zstd_rle_bomb(inflated: int) -> bytes:
    """zstd frame of RLE blocks (Block_Type 1), 4 bytes per 128 KiB of zeros; no content size."""
    out = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([7 << 3]))
    blocks = inflated // (128 * 1024)
    for i in range(blocks):
        out += (((128 * 1024) << 3) | 2 | (i == blocks - 1)).to_bytes(3, "little") + b"\x00"
    return bytes(out)


@pytest.mark.parametrize("name", COMPRESSORS)
def test_round_trip_under_the_limit(name: str) -> None:
    codec, comp = COMPRESSORS[name]
    data = bytes(random.Random(1).randrange(256) for _ in range(100_000)) + bytes(300_000)
    assert inflate(codec, comp(data), len(data)) == data
    assert b"".join(iter_inflate(codec, comp(data), len(data), chunk=4096)) == data


@pytest.mark.parametrize("name", COMPRESSORS)
def test_one_byte_past_the_limit_is_message_too_large(name: str) -> None:
    codec, comp = COMPRESSORS[name]
    data = bytes(200_000)
    with pytest.raises(InvalidRecordError) as e:
        inflate(codec, comp(data), len(data) - 1)
    assert e.value.error_code == MESSAGE_TOO_LARGE


@pytest.mark.parametrize("name", COMPRESSORS)
def test_a_bomb_stops_at_the_limit_without_inflating_it(name: str) -> None:
    """64 MiB of zeros against a 1 MiB limit: refused, and Python never held much more than the limit."""
    codec, comp = COMPRESSORS[name]
    bomb = comp(bytes(64 * MiB))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError) as e:
            inflate(codec, bomb, MiB)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.error_code == MESSAGE_TOO_LARGE
    assert peak < 4 * MiB, peak


def test_zstd_rle_bomb_of_8_gib_is_refused_at_once() -> None:
    bomb = zstd_rle_bomb(8 << 30)
    assert len(bomb) < 300_000
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError) as e:
            inflate(COMPRESSION_ZSTD, bomb, MiB)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.error_code == MESSAGE_TOO_LARGE
    assert peak < 4 * MiB, peak


def test_snappy_blocks_are_refused_on_their_claimed_length() -> None:
    """A raw snappy block announces its inflated length: refused before anything is inflated."""
    claim = encode_varint(0)[:0] + bytes([0x80, 0x80, 0x80, 0x80, 0x0F])  # uvarint 2^32 - ish
    with pytest.raises(InvalidRecordError) as e:
        inflate(COMPRESSION_SNAPPY, claim + b"\x00" * 10, MiB)
    assert e.value.error_code == MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_garbage_is_corrupt_message(codec: int) -> None:
    with pytest.raises(InvalidRecordError) as e:
        inflate(codec, b"\x1f\x8b\x08 this is not compressed data at all" * 3, MiB)
    assert e.value.error_code in (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE)
    if codec != COMPRESSION_SNAPPY:  # snappy's length prefix of garbage may be a large claim
        assert e.value.error_code == CORRUPT_MESSAGE


def test_truncated_gzip_is_corrupt_message() -> None:
    with pytest.raises(InvalidRecordError) as e:
        inflate(COMPRESSION_GZIP, gzip.compress(bytes(range(256)) * 100)[:-20], MiB)
    assert e.value.error_code == CORRUPT_MESSAGE


def test_gzip_members_back_to_back() -> None:
    assert inflate(COMPRESSION_GZIP, gzip.compress(b"ab") + gzip.compress(b"cd"), 10) == b"abcd"


def test_uncompressed_is_bounded_too() -> None:
    assert inflate(COMPRESSION_NONE, b"abc", 3) == b"abc"
    with pytest.raises(InvalidRecordError):
        inflate(COMPRESSION_NONE, b"abcd", 3)


# ---------------------------------------------------------------------------- the record walk


def _section(*recs: bytes) -> bytes:
    return b"".join(recs)


def test_scan_summarises_a_batch() -> None:
    sec = _section(encode_record(0, 5, b"k", b"v"), encode_record(1, -3, None, b"v", [("h", b"x")]),
                   encode_record(2, 900, b"k2", None))
    for scan in (_speedups.scan_records, _scan_uncompressed):
        assert scan(sec, 0, len(sec)) == (3, -3, 900, 1)
        assert scan(b"", 0, 0) == (0, 0, 0, -1)
    assert [(r.batch_index, r.timestamp_delta, r.offset_delta, r.null_key) for r in record_infos(sec)] == [
        (0, 5, 0, False), (1, -3, 1, True), (2, 900, 2, False)]


def test_scan_checks_offset_deltas_unless_told_not_to() -> None:
    sec = _section(encode_record(0, 0, b"a", b"v"), encode_record(2, 0, b"b", b"v"))
    for scan in (_speedups.scan_records, _scan_uncompressed):
        assert scan(sec, 0, len(sec)) == SCAN_OFFSET_DELTA
        assert scan(sec, 0, len(sec), False) == (2, 0, 0, -1)


@pytest.mark.parametrize("bad", [
    encode_varint(3) + b"\x00\x00\x00",  # record ends before its key length
    encode_varint(6) + b"\x00\x00\x00" + encode_varint(5) + b"ab",  # key past the record
    encode_varint(5) + b"\x00\x00\x00\x02\x02",  # value length past the record
    encode_varint(6) + b"\x00\x00\x00\x00\x00" + encode_varint(-1),  # negative header count
    encode_varint(8) + b"\x00\x00\x00\x00\x00\x02" + encode_varint(-1) + b"\x00",  # null header key
    encode_varint(7) + b"\x00\x00\x00\x00\x00\x00\x00",  # a byte past the fields
    encode_varint(-1),  # negative record length
    b"\xff\xff\xff\xff\xff\x01",  # varint too long
])
def test_scan_refuses_malformed_records(bad: bytes) -> None:
    good = encode_record(0, 0, b"k", b"v")
    for scan in (_speedups.scan_records, _scan_uncompressed):
        assert scan(bad, 0, len(bad)) == SCAN_MALFORMED, bad
        assert scan(good + bad, 0, len(good + bad), False) == SCAN_MALFORMED, bad


def test_c_and_python_scans_agree_on_random_and_mutated_input() -> None:
    rnd = random.Random(7)
    real = _section(*(encode_record(i, rnd.randrange(-5, 5000), None if i % 7 == 3 else b"k%d" % i,
                                    b"v" * rnd.randrange(0, 300), [("h", b"x")] * (i % 3)) for i in range(40)))
    cases = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 60))) for _ in range(3000)]
    for _ in range(3000):
        m = bytearray(real)
        for _ in range(rnd.randrange(1, 4)):
            m[rnd.randrange(len(m))] = rnd.randrange(256)
        cases.append(bytes(m[: rnd.randrange(1, len(m) + 1)]))
    cases.append(real)
    for c in cases:
        for check in (True, False):
            assert _speedups.scan_records(c, 0, len(c), check) == _scan_uncompressed(c, 0, len(c), check), c


def test_scan_of_a_built_batch_and_bounds() -> None:
    b = build_batch([(b"k", b"x" * 70000)] * 3, timestamps=[10, 30, 20])
    assert _speedups.scan_records(b, BATCH_HEADER_SIZE, len(b)) == (3, 0, 20, -1)
    assert _speedups.scan_records(b, BATCH_HEADER_SIZE, len(b) + 1) == SCAN_MALFORMED  # end past the buffer


def test_record_times_of_a_compressed_batch() -> None:
    b = build_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], base_offset=40, timestamps=[100, 90, 130],
                    compression=COMPRESSION_GZIP)
    assert record_times(b) == [(40, 100), (41, 90), (42, 130)]
    with pytest.raises(InvalidRecordError) as e:
        record_times(b, limit=5)
    assert e.value.error_code == MESSAGE_TOO_LARGE
