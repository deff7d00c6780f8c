"""The C record walk (odradek._speedups) agrees with the pure-Python one, malformed input included.
scripts/setup.sh builds it (gcc + Python headers); this test fails if it was not built."""

import random

import pytest

from odradek import _speedups
from odradek.protocol.records import BATCH_HEADER_SIZE, _walk_uncompressed, build_batch, encode_varint


@pytest.mark.parametrize("n,size", [(1, 0), (5, 10), (163, 100), (3, 70000)])
def test_counts_agree_on_real_batches(n: int, size: int) -> None:
    b = build_batch([(b"k", b"x" * size)] * n)
    assert _speedups.count_records(b, BATCH_HEADER_SIZE, len(b)) == n == _walk_uncompressed(b, BATCH_HEADER_SIZE, len(b))
    assert _speedups.count_records(memoryview(b), BATCH_HEADER_SIZE, len(b)) == n


def test_malformed_sections_agree() -> None:
    rnd = random.Random(5)
    cases = [b"", b"\x00", b"\x01", b"\x80", b"\xff\xff\xff\xff\xff\x01", encode_varint(5) + b"abc", encode_varint(-3)]
    cases += [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40))) for _ in range(2000)]
    for c in cases:
        assert _speedups.count_records(c, 0, len(c)) == _walk_uncompressed(c, 0, len(c)), c
    assert _speedups.count_records(b"\x02a", 0, 99) == -1  # end past the buffer


@pytest.mark.parametrize("software", [False, True])
def test_crc32c_agrees_with_the_crc32c_package(software: bool) -> None:
    """The C CRC-32C (the CPU's crc32 instruction in three interleaved streams, or slicing-by-8 tables)
    that the Fetch reader checks batches with, against the crc32c package the broker uses."""
    import crc32c

    rnd = random.Random(7)
    sizes = [*range(0, 80), 255, 256, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 13, 100_003]
    for n in sizes:
        data = bytes(rnd.randrange(256) for _ in range(n + 7))
        for skew in (0, 1, 5):  # unaligned starts
            view = memoryview(data)[skew : skew + n]
            assert _speedups.crc32c(view, software) == crc32c.crc32c(view), (n, skew)


def test_arrow_decoders_raise_instead_of_returning_minus_one() -> None:
    b = build_batch([(b"k", b"v")] * 3)
    with pytest.raises(ValueError, match="outside the buffer"):
        _speedups.batches_to_columns(b, 0, len(b) + 1, 0, 10)
    bad = bytearray(b)
    bad[b.rindex(b"v")] ^= 1  # the last value
    with pytest.raises(_speedups.CorruptRecordError) as info:
        _speedups.batches_to_columns(bytes(bad), 0, len(bad), 0, 10)
    _msg, base_offset, position, stored, computed = info.value.args
    assert (base_offset, position) == (0, 0) and stored != computed
    assert _speedups.batches_to_columns(bytes(bad), 0, len(bad), 0, 10, False)[0] == 3  # check_crcs off
    with pytest.raises(_speedups.MalformedRecordError):
        _speedups.records_to_columns(b"\x09garbage", 0, 8, 0, 0, 0, False, 0, 10)
