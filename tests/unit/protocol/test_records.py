import struct

import pytest

from odradek.protocol import records as r


def test_build_validate_decode_roundtrip() -> None:
    recs = [(b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(10)]
    b = r.build_batch(recs, base_offset=5, timestamps=[1000 + i for i in range(10)])
    (h,) = r.validate_batches(b)
    assert h.record_count == 10 and h.last_offset_delta == 9 and h.max_timestamp == 1009
    out = r.decode_records(b)
    assert [x.offset for x in out] == list(range(5, 15))
    assert out[3].key == b"k3" and out[3].headers == (("h", b"x"),) and out[3].timestamp == 1003


def test_gzip_batch() -> None:
    b = r.build_batch([(None, b"x" * 1000)] * 5, compression=r.COMPRESSION_GZIP)
    (h,) = r.validate_batches(b)
    assert h.compression == r.COMPRESSION_GZIP
    assert len(r.decode_records(b)) == 5


def test_bad_crc() -> None:
    b = bytearray(r.build_batch([(b"a", b"b")]))
    b[-1] ^= 0xFF
    with pytest.raises(r.InvalidRecordError) as e:
        r.validate_batches(bytes(b))
    assert e.value.error_code == r.CORRUPT_MESSAGE


def _recrc(b: bytearray) -> bytes:
    struct.pack_into(">I", b, 17, r.crc32c(bytes(b[21:])))
    return bytes(b)


def test_record_count_lies() -> None:
    b = bytearray(r.build_batch([(b"a", b"b"), (b"c", b"d")]))
    struct.pack_into(">i", b, 57, 3)  # recordCount 3, lastOffsetDelta 1
    with pytest.raises(r.InvalidRecordError) as e:
        r.validate_batches(_recrc(b))
    assert e.value.error_code == r.INVALID_RECORD
    struct.pack_into(">i", b, 23, 2)  # consistent header, but only 2 records inside
    with pytest.raises(r.InvalidRecordError) as e:
        r.validate_batches(_recrc(b))
    assert e.value.error_code == r.INVALID_RECORD


def test_truncated_and_bad_magic() -> None:
    b = r.build_batch([(b"a", b"b")])
    with pytest.raises(r.InvalidRecordError):
        r.validate_batches(b[:-3])
    with pytest.raises(r.InvalidRecordError):
        r.validate_batches(b[:30])
    bad = bytearray(b)
    bad[16] = 1
    with pytest.raises(r.InvalidRecordError):
        r.validate_batches(bytes(bad))


def test_too_large() -> None:
    b = r.build_batch([(None, b"x" * 2000)])
    with pytest.raises(r.InvalidRecordError) as e:
        r.validate_batches(b, max_batch_bytes=1000)
    assert e.value.error_code == r.MESSAGE_TOO_LARGE


def test_iter_batches_stops_at_torn_tail() -> None:
    b1 = r.build_batch([(b"a", b"b")], base_offset=0)
    b2 = r.build_batch([(b"c", b"d")], base_offset=1)
    data = b1 + b2[:-5]
    assert [h.base_offset for _, h in r.iter_batches(data)] == [0]
