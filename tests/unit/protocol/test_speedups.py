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
