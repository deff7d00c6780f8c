"""Every function odradek._speedups (src/odradek/_speedups.c) exports, tested like C: hand-made valid inputs
checked against a pure-Python reader, every cut point of a truncated input, lying length fields, and the
largest and smallest value of each integer field (in the bytes and in the arguments). A bad input gives
the function's documented answer (-1 / -2 for the produce-path walks, ``MalformedRecordError`` /
``CorruptRecordError`` / ``ValueError`` / ``OverflowError`` for the others): never a crash, never rows
the bytes do not stand for.

``tests/fuzz/test_sanitizers.py`` runs this file again against the extension built with AddressSanitizer
and UBSan, where a read or write outside a buffer, or an undefined overflow, aborts the run.

The pure-Python reference below reads integers as Kafka's ``ByteUtils`` does (``readVarint``: 5 bytes at
most, the value taken modulo 2**32; ``readVarlong``: 10 bytes at most, modulo 2**64) and records as
``DefaultRecord.readFrom`` does; batches as the Java consumer does (``baseOffset + offsetDelta`` in long
arithmetic; the timestamp ``baseTimestamp + timestampDelta``, or ``maxTimestamp`` for LogAppendTime).
"""

from __future__ import annotations

import struct
import sys
from typing import Any

import crc32c as crc32c_package
import pytest

from odradek import _speedups as c
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    SCAN_MALFORMED,
    SCAN_OFFSET_DELTA,
    _scan_uncompressed,
    _walk_uncompressed,
    encode_record,
)
from odradek.protocol.varint import encode_varint

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
SSIZE_MAX = sys.maxsize
NO_BOUND_LO, NO_BOUND_HI = INT64_MIN, INT64_MAX
Row = tuple[bytes | None, bytes | None, int, int, int]


# ---------------------------------------------------------------------------- a pure-Python reference


class Bad(Exception):
    """The reference refuses the bytes: ``kind`` is "malformed" or "crc"; ``pos`` the byte of the batch or record."""

    def __init__(self, kind: str, pos: int, base_offset: int) -> None:
        super().__init__(kind, pos, base_offset)
        self.kind, self.pos, self.base_offset = kind, pos, base_offset


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _kvarint(buf: bytes, pos: int, lim: int, max_bytes: int) -> tuple[int, int]:
    """Kafka's readVarint (max_bytes 5, modulo 2**32) / readVarlong (10, modulo 2**64) inside [pos, lim)."""
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= lim:
            raise ValueError("truncated")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            raw &= (1 << (32 if max_bytes == 5 else 64)) - 1
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise ValueError("too long")


def ref_records(buf: bytes, start: int, end: int) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """(timestampDelta, offsetDelta, key, value, position) of each record of a records section (DefaultRecord.readFrom,
    every field inside its record and the lengths adding up); Bad("malformed") at the first that does not parse."""
    out = []
    pos = start
    while pos < end:
        at = pos
        try:
            length, pos = _kvarint(buf, pos, end, 5)
            if length <= 0 or length > end - pos:
                raise ValueError("length")
            rec_end = pos + length
            pos += 1
            ts, pos = _kvarint(buf, pos, rec_end, 10)
            delta, pos = _kvarint(buf, pos, rec_end, 5)
            fields: list[bytes | None] = []
            for _ in range(2):
                n, pos = _kvarint(buf, pos, rec_end, 5)
                if n < -1 or n > rec_end - pos:
                    raise ValueError("key/value length")
                fields.append(None if n < 0 else buf[pos : pos + n])
                pos += max(n, 0)
            headers, pos = _kvarint(buf, pos, rec_end, 5)
            if headers < 0:
                raise ValueError("headers")
            for _ in range(headers):
                n, pos = _kvarint(buf, pos, rec_end, 5)
                if n < 0 or n > rec_end - pos:
                    raise ValueError("header key")
                pos += n
                n, pos = _kvarint(buf, pos, rec_end, 5)
                if n < -1 or n > rec_end - pos:
                    raise ValueError("header value")
                pos += max(n, 0)
            if pos != rec_end:
                raise ValueError("record length")
        except ValueError:
            raise Bad("malformed", at, -1) from None
        out.append((ts, delta, fields[0], fields[1], at))
    return out


def ref_section(buf: bytes, start: int, end: int, base_offset: int, base_ts: int, max_ts: int, log_append: bool,
                lo: int, hi: int) -> list[Row]:
    rows: list[Row] = []
    try:
        recs = ref_records(buf, start, end)
    except Bad as e:
        raise Bad("malformed", e.pos, base_offset) from None
    for ts, delta, key, value, at in recs:
        off = _wrap64(base_offset + delta)
        if not lo <= off < hi:
            continue
        ms = max_ts if log_append else _wrap64(base_ts + ts)
        if not INT64_MIN <= ms * 1000 <= INT64_MAX:
            raise Bad("malformed", at, base_offset)
        rows.append((key, value, off, ms * 1000, 1 if log_append else 0))
    return rows


def ref_batches(buf: bytes, start: int, end: int, lo: int, hi: int, check_crcs: bool) -> tuple[list[Row], int, int]:
    """(rows, next_pos, next_offset) as a consumer reads the uncompressed v2 batches of buf[start:end)."""
    rows: list[Row] = []
    pos, next_offset = start, -1
    while end - pos >= BATCH_HEADER_SIZE:
        base_offset, length, _epoch, magic, crc, attributes, last_delta, base_ts, max_ts = struct.unpack_from(
            ">qiibIhiqq", buf, pos)
        if length < BATCH_HEADER_SIZE - 12:
            raise Bad("malformed", pos, base_offset)
        if length > end - pos - 12:
            break
        bend = pos + 12 + length
        if magic != 2:
            raise Bad("malformed", pos, base_offset)
        if attributes & 7:
            break
        if check_crcs and crc != crc32c_package.crc32c(buf[pos + 21 : bend]):
            raise Bad("crc", pos, base_offset)
        if not attributes & 0x20 and _wrap64(base_offset + last_delta) >= lo and base_offset < hi:
            rows += ref_section(buf, pos + BATCH_HEADER_SIZE, bend, base_offset, base_ts, max_ts,
                                bool(attributes & 0x08), lo, hi)
        next_offset = _wrap64(base_offset + last_delta + 1)
        pos = bend
    return rows, pos, next_offset


def rows_of(n: int, cols: tuple[Any, ...]) -> list[Row]:
    """The rows the Arrow buffers stand for, the buffers' own invariants checked on the way."""
    kv, ko, kd, vv, vo, vd, offs, ts, tt = cols
    assert len(ko) == len(vo) == 4 * (n + 1) and len(offs) == len(ts) == 8 * n and len(tt) == 4 * n
    kof, vof = struct.unpack(f"<{n + 1}i", ko), struct.unpack(f"<{n + 1}i", vo)
    assert kof[0] == vof[0] == 0 and kof[-1] == len(kd) and vof[-1] == len(vd)
    for bitmap in (kv, vv):
        assert bitmap is None or len(bitmap) == (n + 7) // 8

    def field(valid: bytes | None, off: tuple[int, ...], data: bytes, i: int) -> bytes | None:
        assert off[i] <= off[i + 1]
        if valid is not None and not valid[i >> 3] >> (i & 7) & 1:
            assert off[i] == off[i + 1]
            return None
        return data[off[i] : off[i + 1]]

    o, t, y = struct.unpack(f"<{n}q", offs), struct.unpack(f"<{n}q", ts), struct.unpack(f"<{n}i", tt)
    return [(field(kv, kof, kd, i), field(vv, vof, vd, i), o[i], t[i], y[i]) for i in range(n)]


def c_batches(buf: bytes | bytearray | memoryview, start: int, end: int, lo: int, hi: int, check_crcs: bool) -> tuple[list[Row], int, int]:
    n, stop, nxt, cols = c.batches_to_columns(buf, start, end, lo, hi, check_crcs)
    return rows_of(n, cols), stop, nxt


def c_or_bad(fn: Any, *args: Any) -> Any:
    """The C function's answer, or its error as the reference's Bad (kind, position, base offset)."""
    try:
        return fn(*args)
    except c.CorruptRecordError as e:
        _msg, base_offset, position, stored, computed = e.args
        assert stored != computed
        return ("crc", position, base_offset)
    except c.MalformedRecordError as e:
        _why, base_offset, position = e.args
        return ("malformed", position, base_offset)


def ref_or_bad(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Bad as e:
        return (e.kind, e.pos, e.base_offset)


def agree_batches(buf: bytes, lo: int = NO_BOUND_LO, hi: int = NO_BOUND_HI, start: int = 0,
                  end: int | None = None) -> Any:
    end = len(buf) if end is None else end
    for check in (True, False):
        got = c_or_bad(c_batches, buf, start, end, lo, hi, check)
        want = ref_or_bad(ref_batches, buf, start, end, lo, hi, check)
        assert got == want, (check, buf.hex())
    return got


def c_section(buf: bytes, start: int, end: int, base_offset: int, base_ts: int, max_ts: int, log_append: bool,
              lo: int, hi: int) -> list[Row]:
    n, cols = c.records_to_columns(buf, start, end, base_offset, base_ts, max_ts, log_append, lo, hi)
    return rows_of(n, cols)


def agree_section(sec: bytes, base_offset: int = 100, base_ts: int = 1_700_000_000_000, max_ts: int = 1_700_000_000_500,
                  lo: int = NO_BOUND_LO, hi: int = NO_BOUND_HI) -> Any:
    for log_append in (False, True):
        args = (sec, 0, len(sec), base_offset, base_ts, max_ts, log_append, lo, hi)
        got, want = c_or_bad(c_section, *args), ref_or_bad(ref_section, *args)
        assert got == want, (log_append, sec.hex())
    return got


def agree_walks(sec: bytes, start: int = 0, end: int | None = None) -> Any:
    """count_records and scan_records against the pure-Python walks and the reference reader."""
    end = len(sec) if end is None else end
    count = c.count_records(sec, start, end)
    assert count == _walk_uncompressed(sec, start, end), sec.hex()
    results = []
    for check in (True, False):
        scan = c.scan_records(sec, start, end, check)
        assert scan == _scan_uncompressed(sec, start, end, check), (check, sec.hex())
        results.append(scan)
    try:
        recs = ref_records(sec, start, end)
    except Bad:
        assert results[1] == SCAN_MALFORMED
    else:
        assert count == len(recs)
        ts = [r[0] for r in recs]
        keyless = next((i for i, r in enumerate(recs) if r[2] is None), -1)
        summary = (len(recs), min(ts, default=0), max(ts, default=0), keyless)
        assert results[1] == summary
        assert results[0] == (summary if [r[1] for r in recs] == list(range(len(recs))) else SCAN_OFFSET_DELTA)
    return results


# ---------------------------------------------------------------------------- hand-made inputs


def raw_record(attributes: int, ts: bytes, delta: bytes, key: bytes, value: bytes, headers: bytes,
               length: int | None = None, length_bytes: bytes | None = None) -> bytes:
    """A record from its fields' encodings, the length field given (a lie) or computed."""
    body = bytes([attributes]) + ts + delta + key + value + headers
    if length_bytes is None:
        length_bytes = encode_varint(len(body) if length is None else length)
    return length_bytes + body


def batch(section: bytes, *, base_offset: int = 0, last_delta: int | None = None, count: int = 1,
          base_ts: int = 1_700_000_000_000, max_ts: int | None = None, attributes: int = 0, magic: int = 2,
          length: int | None = None, crc: int | None = None, epoch: int = 0) -> bytes:
    """A v2 batch with every header field settable, its CRC-32C right unless one is given."""
    after = struct.pack(">hiqqqhii", attributes, count - 1 if last_delta is None else last_delta, base_ts,
                        base_ts if max_ts is None else max_ts, -1, -1, -1, count) + section
    crc = crc32c_package.crc32c(after) if crc is None else crc
    return struct.pack(">qiibI", base_offset, len(after) + 9 if length is None else length, epoch, magic, crc) + after


def records(n: int, keyless: tuple[int, ...] = (), nullvalue: tuple[int, ...] = ()) -> bytes:
    return b"".join(
        encode_record(i, i * 3 - 2, None if i in keyless else b"k%d" % i, None if i in nullvalue else b"v" * i,
                      [("h", b"x"), ("n", None)][: i % 3])
        for i in range(n))


VALID_SECTIONS = [
    b"",
    encode_record(0, 0, None, None),
    encode_record(0, 0, b"", b""),
    records(7, keyless=(2, 5), nullvalue=(3,)),
    encode_record(0, 5, b"k" * 300, b"v" * 70_000, [("h" * 200, b"x" * 129)]),  # multi-byte lengths
]


# ---------------------------------------------------------------------------- count_records / scan_records


@pytest.mark.parametrize("sec", VALID_SECTIONS, ids=range(len(VALID_SECTIONS)))
def test_walks_on_valid_sections(sec: bytes) -> None:
    results = agree_walks(sec)
    assert isinstance(results[0], tuple)
    prefix = b"\xff" * 9
    agree_walks(prefix + sec + b"\xff" * 3, len(prefix), len(prefix) + len(sec))  # a section inside a buffer


@pytest.mark.parametrize("sec", VALID_SECTIONS[1:4], ids=range(1, 4))
def test_walks_at_every_cut_point(sec: bytes) -> None:
    bounds = {0}
    for r in ref_records(sec, 0, len(sec)):
        bounds.add(r[4])
    bounds.add(len(sec))
    for cut in range(len(sec) + 1):
        count, scan = c.count_records(sec, 0, cut), c.scan_records(sec, 0, cut, False)
        agree_walks(sec[:cut])
        agree_walks(sec, 0, cut)  # the same bytes, the section's end inside the buffer
        if cut in bounds:
            assert count == sorted(bounds).index(cut), cut
        else:
            assert count == -1 and scan == SCAN_MALFORMED, cut


def test_walks_on_lying_record_lengths() -> None:
    good = encode_record(0, 0, b"key", b"value", [("h", b"x")])
    body_len = len(good) - 1
    for lie in [INT32_MIN, -2, -1, 0, 1, body_len - 1, body_len + 1, body_len + 100, INT32_MAX]:
        bad = encode_varint(lie) + good[1:]
        assert c.count_records(bad, 0, len(bad)) == -1, lie
        assert c.scan_records(bad, 0, len(bad)) == SCAN_MALFORMED, lie
        agree_walks(bad)
        agree_walks(good + bad)  # the second record lies
        agree_walks(bad + good)


def test_walks_on_lying_field_lengths() -> None:
    """Every length inside a record at every value around the truth, and at the int32 extremes."""
    key, value = b"kk", b"vvv"
    for field in ("key", "value", "hkey", "hvalue", "headers"):
        for lie in [INT32_MIN, -3, -2, -1, 0, 1, 2, 3, 4, 5, 50, INT32_MAX]:
            enc = {"key": encode_varint(2) + key, "value": encode_varint(3) + value,
                   "headers": encode_varint(1), "hkey": encode_varint(1) + b"h", "hvalue": encode_varint(1) + b"x"}
            content = {"key": key, "value": value, "headers": b"", "hkey": b"h", "hvalue": b"x"}
            enc[field] = encode_varint(lie) + content[field]
            rec = raw_record(0, encode_varint(0), encode_varint(0), enc["key"], enc["value"],
                             enc["headers"] + enc["hkey"] + enc["hvalue"])
            agree_walks(rec)
            agree_walks(rec + encode_record(1, 0, b"k", b"v"))
            agree_section(rec)


def test_walks_on_integer_extremes() -> None:
    """timestampDelta at the int64 extremes, offsetDelta at the int32 ones, lengths and counts past them."""
    for ts in (INT64_MIN, INT64_MIN + 1, -1, 0, INT64_MAX - 1, INT64_MAX):
        sec = encode_record(0, ts, b"k", b"v") + encode_record(1, -ts - 1 if ts < 0 else 0, None, b"v")
        assert agree_walks(sec)[0] == (2, min(ts, -ts - 1 if ts < 0 else 0), max(ts, -ts - 1 if ts < 0 else 0), 1)
    for delta in (INT32_MIN, -1, 1, INT32_MAX):
        sec = encode_record(delta, 0, b"k", b"v")
        assert agree_walks(sec) == [SCAN_OFFSET_DELTA, (1, 0, 0, -1)]
    # a header count of INT32_MAX in a short record: refused, not looped over
    rec = raw_record(0, b"\x00", b"\x00", encode_varint(-1), encode_varint(-1), encode_varint(INT32_MAX))
    assert agree_walks(rec)[1] == SCAN_MALFORMED
    # start and end at the extremes of Py_ssize_t: refused; past them: OverflowError from the argument parser
    sec = encode_record(0, 0, b"k", b"v")
    for start, end in [(-1, len(sec)), (0, len(sec) + 1), (0, SSIZE_MAX), (-SSIZE_MAX - 1, 0), (SSIZE_MAX, SSIZE_MAX),
                       (2, 1), (len(sec), len(sec))]:
        want_count = 0 if start == end == len(sec) else -1
        assert c.count_records(sec, start, end) == want_count, (start, end)
        assert c.scan_records(sec, start, end) == ((0, 0, 0, -1) if want_count == 0 else SCAN_MALFORMED)
    for fn in (c.count_records, c.scan_records):
        with pytest.raises(OverflowError):
            fn(sec, 0, SSIZE_MAX + 1)
        with pytest.raises(OverflowError):
            fn(sec, -SSIZE_MAX - 2, 0)
        with pytest.raises(TypeError):
            fn("not bytes", 0, 1)
        with pytest.raises(TypeError):
            fn(sec, 0)


def test_varints_of_five_and_ten_bytes_read_as_kafka_reads_them() -> None:
    """Kafka's readVarint takes at most 5 bytes and keeps 32 bits of them (the 5th byte's high bits are lost in
    the int), readVarlong at most 10 and 64 bits; a longer one is refused. Non-canonical encodings of small
    values must be read as the values Kafka reads, not refused or read as other values."""
    zero5 = b"\x80\x80\x80\x80\x70"  # raw 0x7 << 32: Kafka reads 0
    one5 = b"\x82\x80\x80\x80\x10"  # raw 2 | 1 << 32: Kafka reads 1
    rec = raw_record(0, b"\x00", zero5, one5 + b"k", b"\x02v", b"\x00")  # offsetDelta 0, key length 1
    assert agree_walks(rec) == [(1, 0, 0, -1)] * 2
    assert agree_section(rec, max_ts=1_700_000_000_000) == [(b"k", b"v", 100, 1_700_000_000_000_000, 1)]
    ts10 = b"\xff" * 9 + b"\x7f"  # raw 2**64 - 1 (the 10th byte's high bits lost): -2**63
    rec = raw_record(0, ts10, b"\x00", b"\x02k", b"\x02v", b"\x00")
    assert agree_walks(rec) == [(1, INT64_MIN, INT64_MIN, -1)] * 2
    too_long = [raw_record(0, b"\x00", b"\x80" * 5 + b"\x00", b"\x02k", b"\x02v", b"\x00"),
                raw_record(0, b"\x80" * 10 + b"\x00", b"\x00", b"\x02k", b"\x02v", b"\x00"),
                b"\x80\x80\x80\x80\x80\x00" + encode_record(0, 0, b"k", b"v")[1:]]
    for sec in too_long:
        assert agree_walks(sec) == [SCAN_MALFORMED] * 2
    assert [c.count_records(sec, 0, len(sec)) for sec in too_long] == [1, 1, -1]  # count reads the lengths alone


# ---------------------------------------------------------------------------- crc32c / uninitialized_bytearray


def test_crc32c_on_edge_inputs() -> None:
    for data in (b"", b"\x00", b"123456789", bytearray(b"\xff" * 4096), memoryview(b"abc" * 1000)[7:2900]):
        for software in (False, True):
            assert c.crc32c(data, software) == crc32c_package.crc32c(bytes(data))
    assert c.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    with pytest.raises(TypeError):
        c.crc32c("text")
    with pytest.raises((BufferError, TypeError, ValueError)):
        c.crc32c(memoryview(b"abcdef")[::2])  # not contiguous


def test_uninitialized_bytearray_sizes() -> None:
    for n in (0, 1, 4096):
        b = c.uninitialized_bytearray(n)
        assert isinstance(b, bytearray) and len(b) == n
        b[:] = b"x" * n
    with pytest.raises(ValueError):
        c.uninitialized_bytearray(-1)
    with pytest.raises(ValueError):
        c.uninitialized_bytearray(-SSIZE_MAX - 1)
    with pytest.raises(MemoryError):
        c.uninitialized_bytearray(SSIZE_MAX)
    with pytest.raises(MemoryError):
        c.uninitialized_bytearray(SSIZE_MAX // 2)
    with pytest.raises(OverflowError):
        c.uninitialized_bytearray(SSIZE_MAX + 1)
    with pytest.raises(TypeError):
        c.uninitialized_bytearray(1.5)


# ---------------------------------------------------------------------------- records_to_columns


@pytest.mark.parametrize("sec", VALID_SECTIONS, ids=range(len(VALID_SECTIONS)))
def test_records_to_columns_on_valid_sections(sec: bytes) -> None:
    rows = agree_section(sec)
    assert len(rows) == len(ref_records(sec, 0, len(sec)))
    assert agree_section(sec, lo=101, hi=104) == [r for r in rows if 101 <= r[2] < 104]


def test_records_to_columns_at_every_cut_point() -> None:
    sec = records(6, keyless=(1,), nullvalue=(4,))
    for cut in range(len(sec) + 1):
        got = agree_section(sec[:cut])
        assert isinstance(got, list) or got[0] == "malformed"


def test_records_to_columns_on_lying_lengths() -> None:
    good = encode_record(0, 0, b"key", b"value", [("h", b"x")])
    for lie in [INT32_MIN, -1, 0, 1, len(good) - 2, len(good), INT32_MAX]:
        bad = encode_varint(lie) + good[1:]
        for sec in (bad, good + bad, bad + good):
            got = agree_section(sec)
            assert got[0] == "malformed" and got[1] == (0 if sec[0] != good[0] else len(good)), (lie, got)


def test_records_to_columns_on_integer_extremes() -> None:
    sec = encode_record(0, 0, b"k", b"v") + encode_record(1, 7, None, b"v") + encode_record(INT32_MAX, -7, b"k", None)
    for base_offset in (INT64_MIN, -1, 0, INT64_MAX - INT32_MAX, INT64_MAX):
        rows = agree_section(sec, base_offset=base_offset)
        want = [_wrap64(base_offset + d) for d in (0, 1, INT32_MAX)]
        assert [r[2] for r in rows] == [o for o in want if o != INT64_MAX]  # hi is exclusive
    # timestamps in microseconds: ms * 1000 must fit an int64, else the record is refused (not wrapped)
    limit = INT64_MAX // 1000
    for base_ts, max_ts in [(limit - 7, limit), (limit, limit), (-limit + 7, -limit), (INT64_MAX, INT64_MAX),
                            (INT64_MIN, INT64_MIN), (0, INT64_MAX), (INT64_MAX, 0)]:
        agree_section(sec, base_ts=base_ts, max_ts=max_ts)
    # CreateTime: record 1's limit + 7 overflows, at its byte; LogAppendTime reads maxTimestamp alone
    args: tuple[Any, ...] = (sec, 0, len(sec), 100, limit, limit, False, NO_BOUND_LO, NO_BOUND_HI)
    assert c_or_bad(c_section, *args) == ("malformed", len(encode_record(0, 0, b"k", b"v")), 100)
    assert len(c_section(sec, 0, len(sec), 100, limit, limit, True, NO_BOUND_LO, NO_BOUND_HI)) == 3
    # lo/hi at the extremes, empty and inverted ranges
    for lo, hi in [(INT64_MIN, INT64_MIN), (INT64_MAX, INT64_MAX), (INT64_MAX, INT64_MIN), (101, 101), (101, 102)]:
        agree_section(sec, lo=lo, hi=hi)
    with pytest.raises(OverflowError):
        c.records_to_columns(sec, 0, len(sec), INT64_MAX + 1, 0, 0, False, 0, 10)
    with pytest.raises(OverflowError):
        c.records_to_columns(sec, 0, len(sec), 0, 0, 0, False, INT64_MIN - 1, 10)
    for start, end in [(-1, len(sec)), (0, len(sec) + 1), (0, SSIZE_MAX), (-SSIZE_MAX - 1, 0), (3, 2)]:
        with pytest.raises(ValueError, match="outside the buffer"):
            c.records_to_columns(sec, start, end, 0, 0, 0, False, 0, 10)


# ---------------------------------------------------------------------------- batches_to_columns


def record_set() -> bytes:
    return b"".join([
        batch(records(4, keyless=(0,)), base_offset=0, count=4),
        batch(records(2), base_offset=4, count=2, attributes=0x08, max_ts=1_700_000_009_000),  # LogAppendTime
        batch(records(1), base_offset=6, attributes=0x30),  # transactional control batch: skipped
        batch(records(3, nullvalue=(1,)), base_offset=7, count=3, attributes=0x10),
    ])


def test_batches_to_columns_on_valid_record_sets() -> None:
    rs = record_set()
    n, stop, nxt, _cols = c.batches_to_columns(rs, 0, len(rs), NO_BOUND_LO, NO_BOUND_HI)
    assert (n, stop, nxt) == (9, len(rs), 10)
    rows = agree_batches(rs)[0]
    assert [r[2] for r in rows] == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert [r[4] for r in rows] == [0, 0, 0, 0, 1, 1, 0, 0, 0]
    assert agree_batches(rs, 2, 8)[0] == [r for r in rows if 2 <= r[2] < 8]
    assert agree_batches(b"") == ([], 0, -1)
    gz = batch(b"\x1f\x8b", attributes=1)  # compressed: the walk stops there
    assert agree_batches(rs + gz + rs)[1:] == (len(rs), 10)


def test_batches_to_columns_at_every_cut_point() -> None:
    """A fetch response may end inside a batch: the walk stops before it, at every cut."""
    rs = record_set()
    ends = []
    pos = 0
    while pos < len(rs):
        pos += 12 + struct.unpack_from(">i", rs, pos + 8)[0]
        ends.append(pos)
    for cut in range(len(rs) + 1):
        rows, stop, _nxt = agree_batches(rs[:cut])
        assert stop == max([0, *(e for e in ends if e <= cut)]), cut
        rows2, stop2, _ = agree_batches(rs, end=cut)
        assert (rows2, stop2) == (rows, stop)
        agree_batches(rs, start=cut)  # from every position: garbage, refused or read as it stands


def test_batches_to_columns_on_lying_batch_lengths() -> None:
    one = batch(records(3), count=3)
    true_length = len(one) - 12
    for lie in [INT32_MIN, -1, 0, 48, 49, 50, true_length - 1, true_length + 1, true_length + 100, INT32_MAX]:
        for check in (True, False):
            bad = batch(records(3), count=3, length=lie)
            got = c_or_bad(c_batches, bad, 0, len(bad), NO_BOUND_LO, NO_BOUND_HI, check)
            assert got == ref_or_bad(ref_batches, bad, 0, len(bad), NO_BOUND_LO, NO_BOUND_HI, check)
            if lie < 49:
                assert got[0] == "malformed", (lie, got)
            elif lie > true_length:
                assert got == ([], 0, -1), lie  # incomplete
            elif check:
                assert got[0] == "crc", (lie, got)  # the CRC covers a different byte range
            agree_batches(bad + one)
            agree_batches(one + bad)


def test_batches_to_columns_on_lying_record_fields() -> None:
    """A records section that lies under a right CRC (a buggy producer): MalformedRecordError at the record."""
    good = encode_record(0, 0, b"key", b"value")
    for lie in [INT32_MIN, -2, -1, 0, 1, len(good) - 2, len(good), INT32_MAX]:
        bad = batch(encode_varint(lie) + good[1:], base_offset=5)
        assert agree_batches(bad) == ("malformed", BATCH_HEADER_SIZE, 5), lie
        assert agree_batches(batch(good) + bad)[0] == "malformed"
    for delta in (INT32_MIN, INT32_MAX):  # an offsetDelta that does not match the header's is read as it is
        rows = agree_batches(batch(encode_record(delta, 0, b"k", b"v"), base_offset=10))[0]
        assert [r[2] for r in rows] == [10 + delta]


def test_batches_to_columns_on_integer_extremes() -> None:
    sec = records(3)
    for base_offset in (INT64_MIN, -1, 0, INT64_MAX - 2, INT64_MAX):
        for last_delta in (INT32_MIN, -1, 0, 2, INT32_MAX):
            rs = batch(sec, base_offset=base_offset, last_delta=last_delta, count=3)
            agree_batches(rs)
            agree_batches(rs, 0, 1 << 62)
    for base_ts in (INT64_MIN, INT64_MIN + 2, -1, INT64_MAX // 1000, INT64_MAX):
        for attributes in (0, 0x08):
            for max_ts in (INT64_MIN, 0, INT64_MAX // 1000 + 1, INT64_MAX):
                agree_batches(batch(sec, count=3, base_ts=base_ts, max_ts=max_ts, attributes=attributes))
    for attributes in (-1, -8, 0x7FFF, 0x7FF8, 0x7FD8, 0x40, -0x8000):  # int16 extremes: compressed, control, others
        rows = agree_batches(batch(sec, count=3, attributes=attributes))[0]
        assert len(rows) == (3 if attributes in (0x7FD8, 0x40, -0x8000) else 0), attributes
    for count in (INT32_MIN, -1, 0, INT32_MAX):  # recordCount is not read: the records section is
        assert len(agree_batches(batch(sec, count=count, last_delta=2))[0]) == 3
    for magic in (0, 1, 3, -1):
        assert agree_batches(batch(sec, count=3, magic=magic))[0] == "malformed"
    for crc in (0, 0xFFFFFFFF):
        rs = batch(sec, count=3, crc=crc)
        assert c_or_bad(c_batches, rs, 0, len(rs), 0, 10, True)[0] == "crc"
        assert len(c_batches(rs, 0, len(rs), 0, 10, False)[0]) == 3
    for epoch in (INT32_MIN, INT32_MAX):  # partitionLeaderEpoch lies outside the CRC and is not read
        assert len(agree_batches(batch(sec, count=3, epoch=epoch))[0]) == 3
    rs = record_set()
    for lo, hi in [(INT64_MIN, INT64_MIN), (INT64_MAX, INT64_MAX), (INT64_MAX, INT64_MIN), (5, 5), (9, INT64_MAX)]:
        agree_batches(rs, lo, hi)
    for start, end in [(-1, len(rs)), (0, len(rs) + 1), (0, SSIZE_MAX), (-SSIZE_MAX - 1, 0), (3, 2)]:
        with pytest.raises(ValueError, match="outside the buffer"):
            c.batches_to_columns(rs, start, end, 0, 10)
    with pytest.raises(OverflowError):
        c.batches_to_columns(rs, 0, len(rs), INT64_MIN - 1, 10)
    with pytest.raises(OverflowError):
        c.batches_to_columns(rs, 0, SSIZE_MAX + 1, 0, 10)
    with pytest.raises(TypeError):
        c.batches_to_columns(rs, 0, len(rs), 0)


def test_buffer_kinds() -> None:
    """bytes, bytearray and memoryview (offset into a larger buffer) read alike; a non-buffer is a TypeError."""
    rs = record_set()
    want = c_batches(rs, 0, len(rs), 0, 100, True)
    big = b"\x00" * 13 + rs + b"\x00" * 5
    assert c_batches(bytearray(rs), 0, len(rs), 0, 100, True) == want
    assert c_batches(memoryview(big)[13 : 13 + len(rs)], 0, len(rs), 0, 100, True) == want
    rows, stop, nxt = c_batches(big, 13, 13 + len(rs), 0, 100, True)
    assert (rows, stop - 13, nxt) == want
    for fn, args in [(c.batches_to_columns, (0, 1, 0, 10)), (c.records_to_columns, (0, 1, 0, 0, 0, False, 0, 10)),
                     (c.count_records, (0, 1)), (c.scan_records, (0, 1)), (c.crc32c, ())]:
        with pytest.raises(TypeError):
            fn(12345, *args)
