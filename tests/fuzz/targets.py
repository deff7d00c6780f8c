"""Fuzz targets: every decoder a remote peer reaches, each as ``target(data: bytes) -> None``.

A target feeds the bytes to one decoder and lets through only the errors that decoder documents for bad
input (the connection turns those into Kafka's error code or a closed connection). Anything else — another
exception type, an invariant broken — escapes and is a finding: the fuzzer (``run_fuzzer.py``, atheris)
stops and saves the input, and ``test_fuzz.py`` replays every saved input of the corpus.

Targets and what they check:

- ``framing``: the request byte stream, cut at arbitrary read boundaries into frames (``FrameDecoder``),
  and each frame's request header; the frames handed out are exactly the stream's frames.
- ``kio_request``: the body of every (API, version) the broker serves through kio.
- ``produce_request``: the hand-written Produce decoder (v3-v12), then each record set through the
  produce-side batch validation; a record set that validation accepts must decode into exactly the
  records its headers claim (the property Kafka's LogValidator guarantees).
- ``record_batches``: a record set alone, uncompressed or compressed with any codec.
- ``interbroker``: the controller-to-broker requests and the broker's responses to the controller.
- ``consumer_protocol``: the subscription and assignment blobs group members send.
- ``arrow_records``: the Spark source's Fetch-reader decoder (``odradek.pipeline.arrow_records``: the C
  walk of ``_speedups`` and the Python paths for compressed batches and read_committed) on a fetched
  record set: it raises ``MalformedRecords`` (a CRC mismatch: ``CorruptRecordException``) or returns
  Arrow batches that are valid and inside the range asked for.
- ``speedups_module``: every function of the C extension ``odradek._speedups`` called directly, the record
  walks checked against their pure-Python twins (``records._walk_uncompressed``, ``_scan_uncompressed``).

``test_sanitizers.py`` runs ``arrow_records`` and ``speedups_module`` against the extension built with
AddressSanitizer and UBSan.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from odradek import _speedups
from odradek.coordinator.group import consumer_protocol
from odradek.log.config import MAX_LONG
from odradek.log.validator import ValidationPolicy, validate_and_assign_offsets
from odradek.pipeline import arrow_records
from odradek.protocol import codec, framing, interbroker, produce, records
from odradek.server.handlers import registry

MAX_FRAME = 1 << 20  # the decoder's socket.request.max.bytes here: inputs are small

# (api_key, version) of every request version the broker decodes through kio, in a fixed order so that
# a corpus entry keeps meaning the same request
KIO_VERSIONS: list[tuple[int, int]] = sorted(
    (h.api_key, v)
    for h in registry.values()
    if h.decode is None
    for v in range(h.min_version, h.max_version + 1)
)


def framing_target(data: bytes) -> None:
    if not data:
        return
    step = data[0] % 64 + 1  # read size: the stream arrives in pieces of this many bytes
    stream = data[1:]
    dec = framing.FrameDecoder(max_size=MAX_FRAME)
    frames: list[bytes] = []
    pos = 0
    try:
        while pos < len(stream):
            target = dec.recv_target()
            if target is not None:
                n = min(step, len(target), len(stream) - pos)
                target[:n] = stream[pos : pos + n]
                got = dec.advance(n)
            else:
                n = min(step, len(stream) - pos)
                got = dec.feed(stream[pos : pos + n])
            pos += n
            frames += [bytes(f) for f in got]
    except framing.FrameError:
        return
    # the frames are the stream's: size-prefixed, back to back, from the first byte
    expect, at = [], 0
    while at + 4 <= len(stream):
        (size,) = struct.unpack_from(">i", stream, at)
        if at + 4 + size > len(stream):
            break
        expect.append(stream[at + 4 : at + 4 + size])
        at += 4 + size
    assert frames == expect, "FrameDecoder handed out frames that are not the stream's"
    for f in frames:
        for flexible in (None, False, True):
            try:
                h = framing.parse_request_header(f, flexible)
            except framing.FrameError:
                continue
            assert 10 <= h.body_offset <= len(f)


def kio_request_target(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = KIO_VERSIONS[struct.unpack_from(">H", data)[0] % len(KIO_VERSIONS)]
    try:
        codec.decode_request(api_key, version, data, 2)
    except codec.DecodeError:
        return


INFLATE_CAP = 4 << 20  # the reference decoder below refuses to inflate more than this


class _Refused(Exception):
    """The reference decoder cannot read this batch (not a finding by itself)."""


def _inflate(codec_id: int, data: bytes) -> bytes:
    """An independent, bounded decompressor (the test extras' codec packages, not the broker's code)."""
    if codec_id == records.COMPRESSION_NONE:
        return data
    try:
        if codec_id == records.COMPRESSION_GZIP:
            d = zlib.decompressobj(wbits=31)
            out = d.decompress(data, INFLATE_CAP + 1)
        elif codec_id == records.COMPRESSION_ZSTD:
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(data) as r:
                out = r.read(INFLATE_CAP + 1)
        elif codec_id == records.COMPRESSION_LZ4:
            import lz4.frame

            out = lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=INFLATE_CAP + 1)
        elif codec_id == records.COMPRESSION_SNAPPY:
            import snappy

            if data[:8] == b"\x82SNAPPY\x00":  # xerial framing: 16-byte header, then (int32 size, block)*
                chunks, pos = [], 16
                while pos + 4 <= len(data):
                    (n,) = struct.unpack_from(">i", data, pos)
                    block = data[pos + 4 : pos + 4 + n]
                    if n < 0 or len(block) != n or _snappy_len(block) > INFLATE_CAP:
                        raise _Refused()
                    chunks.append(snappy.uncompress(block))
                    pos += 4 + n
                out = b"".join(chunks)
            else:
                if _snappy_len(data) > INFLATE_CAP:
                    raise _Refused()
                out = snappy.uncompress(data)
        else:
            raise _Refused()
    except _Refused:
        raise
    except Exception as e:
        raise _Refused() from e
    if len(out) > INFLATE_CAP:
        raise _Refused()
    return out


def _snappy_len(block: bytes) -> int:
    value = shift = 0
    for b in block[:5]:
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    return 1 << 62


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Refused()
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _strict_records(h: records.BatchHeader, body: bytes) -> list[int]:
    """Offset deltas of the records of a batch, read strictly: every length must add up exactly."""
    data = _inflate(h.compression, body)
    deltas, pos = [], 0
    while pos < len(data):
        length, pos = _varint(data, pos)
        end = pos + length
        if length <= 0 or end > len(data):
            raise _Refused()
        pos += 1  # attributes
        _ts, pos = _varint(data, pos)
        delta, pos = _varint(data, pos)
        for _ in range(2):  # key, value
            n, pos = _varint(data, pos)
            pos += max(n, 0)
        nh, pos = _varint(data, pos)
        for _ in range(max(nh, 0)):
            n, pos = _varint(data, pos)
            if n < 0:
                raise _Refused()
            pos += n
            n, pos = _varint(data, pos)
            pos += max(n, 0)
        if pos != end:
            raise _Refused()
        deltas.append(delta)
    return deltas


_POLICY = ValidationPolicy(max_message_bytes=1 << 20, timestamp_after_max_ms=MAX_LONG)


def _check_record_set(rs: bytes | bytearray | memoryview) -> None:
    """The leader's validation (Kafka's LogValidator, as a produce runs it): whatever it accepts must
    decode into exactly the records its headers claim."""
    try:
        result = validate_and_assign_offsets(
            bytearray(rs), first_offset=0, leader_epoch=0, now_ms=0, policy=_POLICY, partition="fuzz-0"
        )
    except records.InvalidRecordError:
        return
    rs = result.buffer
    pos = 0
    for h in result.headers:
        body = bytes(memoryview(rs)[pos + records.BATCH_HEADER_SIZE : pos + h.size])
        pos += h.size
        if h.is_control:
            continue
        try:
            deltas = _strict_records(h, body)
        except _Refused:
            raise AssertionError("validation accepted a batch whose records do not parse") from None
        assert deltas == list(range(h.record_count)), (
            f"validation accepted a batch whose header claims {h.record_count} records (offset deltas "
            f"0..{h.record_count - 1}); it holds {len(deltas)} with deltas {deltas[:5]}..."
        )


def _fix_crcs(buf: bytearray | memoryview) -> None:
    """Give every batch a correct CRC-32C, so that mutations reach what lies behind the CRC check (the
    fuzzer would otherwise spend its time on inputs the first check refuses)."""
    pos = 0
    while pos + records.BATCH_HEADER_SIZE <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + records.LOG_OVERHEAD + length
        if length < records.MIN_BATCH_LENGTH or end > len(buf):
            return
        struct.pack_into(">I", buf, pos + 17, records.crc32c(memoryview(buf)[pos + records.CRC_START : end]))
        pos = end


def produce_request_target(data: bytes) -> None:
    if not data:
        return
    version = produce.MIN_VERSION + (data[0] >> 1) % (produce.MAX_VERSION - produce.MIN_VERSION + 1)
    try:
        req = produce.decode_produce_request(version, bytearray(data), 1)
    except codec.DecodeError:
        return
    for t in req.topic_data:
        for p in t.partition_data:
            if p.records is not None and len(p.records):
                if data[0] & 1:
                    _fix_crcs(p.records)
                _check_record_set(p.records)


def record_batches_target(data: bytes) -> None:
    """The first byte chooses whether CRCs are made right before validation (odd) or left as they come."""
    if len(data) < 2:
        return
    rs = bytearray(data[1:])
    if data[0] & 1:
        _fix_crcs(rs)
    _check_record_set(rs)


_ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")), ("timestampType", pa.int32()),
])


def arrow_records_target(data: bytes) -> None:
    """First byte: bit 0 make CRCs right first, bit 1 check CRCs, bit 2 read_committed with producer 7's
    transaction aborted from offset 0; its top 5 bits are the lowest offset read."""
    if len(data) < 2:
        return
    flags = data[0]
    rs = bytearray(data[1:])
    if flags & 1:
        _fix_crcs(rs)
    filt = None
    if flags & 4:
        filt = arrow_records.AbortFilter()
        filt.add([(7, 0)])
    lo = flags >> 3
    try:
        out = arrow_records.decode(_ARROW_SCHEMA, "t", 0, rs, lo, 1 << 62, filt, inflate_limit=INFLATE_CAP,
                                   check_crcs=bool(flags & 2))
    except arrow_records.MalformedRecords:
        return
    for b in out.batches:
        b.validate(full=True)
        offsets = b.column("offset").to_pylist()
        assert all(o >= lo for o in offsets), f"an offset below {lo}: {offsets[:10]}"


_SPEEDUPS_ERRORS = (_speedups.CorruptRecordError, _speedups.MalformedRecordError)


def _check_columns(n: int, cols: tuple[Any, ...], lo: int, hi: int) -> None:
    """The Arrow buffers stand for n rows: sizes, monotonic offsets ending at the data's length, offsets in range."""
    kv, ko, kd, vv, vo, vd, offs, ts, tt = cols
    assert n >= 0 and len(ko) == len(vo) == 4 * (n + 1) and len(offs) == len(ts) == 8 * n and len(tt) == 4 * n, n
    for valid, off, data in ((kv, ko, kd), (vv, vo, vd)):
        assert valid is None or len(valid) == (n + 7) // 8
        o = struct.unpack(f"<{n + 1}i", off)
        assert o[0] == 0 and o[-1] == len(data) and all(a <= b for a, b in zip(o, o[1:], strict=False)), o[:10]
    assert all(lo <= o < hi for o in struct.unpack(f"<{n}q", offs))
    assert set(struct.unpack(f"<{n}i", tt)) <= {0, 1}


def speedups_module_target(data: bytes) -> None:
    """Every function ``odradek._speedups`` exports, on the bytes after the first (bit 0: make batch CRCs right
    first, bit 1: check CRCs, bit 2: LogAppendTime, top 5 bits: the lowest offset kept), read as a records
    section and as a record set: ``count_records`` and ``scan_records`` return what the pure-Python walks
    return; ``records_to_columns`` accepts exactly the sections ``scan_records`` accepts (a timestamp out of
    range aside); the column functions return buffers that stand for their rows, or raise their documented
    errors at a byte inside the input; both CRC-32C paths agree with the crc32c package."""
    if not data:
        return
    flags = data[0]
    buf = bytearray(data[1:])
    if flags & 1:
        _fix_crcs(buf)
    rs = bytes(buf)
    n = len(rs)
    count = _speedups.count_records(rs, 0, n)
    assert count == records._walk_uncompressed(rs, 0, n), count
    scans = [_speedups.scan_records(rs, 0, n, check) for check in (True, False)]
    assert scans == [records._scan_uncompressed(rs, 0, n, check) for check in (True, False)], scans
    if isinstance(scans[1], tuple):
        assert count == scans[1][0]
    assert _speedups.crc32c(rs) == _speedups.crc32c(rs, True) == records.crc32c(rs)
    assert len(_speedups.uninitialized_bytearray(n)) == n
    lo, hi = flags >> 3, 1 << 62
    try:
        rows, cols = _speedups.records_to_columns(rs, 0, n, 0, 1_700_000_000_000, 1_700_000_000_500, bool(flags & 4),
                                                  lo, hi)
    except _SPEEDUPS_ERRORS as e:
        assert 0 <= e.args[2] <= n, e.args
        assert scans[1] == records.SCAN_MALFORMED or "timestamp" in e.args[0], (e.args, scans)
    else:
        _check_columns(rows, cols, lo, hi)
        assert isinstance(scans[1], tuple) and rows <= scans[1][0], (rows, scans)
    try:
        rows, stop, _nxt, cols = _speedups.batches_to_columns(rs, 0, n, lo, hi, bool(flags & 2))
    except _SPEEDUPS_ERRORS as e:
        assert 0 <= e.args[2] <= n, e.args
    else:
        _check_columns(rows, cols, lo, hi)
        assert 0 <= stop <= n and (stop == n or n - stop < records.BATCH_HEADER_SIZE
                                   or struct.unpack_from(">i", rs, stop + 8)[0] > n - stop - records.LOG_OVERHEAD
                                   or rs[stop + 22] & records.COMPRESSION_MASK), stop


_IB_APIS = (interbroker.LEADER_AND_ISR, interbroker.STOP_REPLICA, interbroker.UPDATE_METADATA,
            interbroker.CONTROLLED_SHUTDOWN)


def interbroker_target(data: bytes) -> None:
    if not data:
        return
    api = _IB_APIS[data[0] % len(_IB_APIS)]
    with contextlib.suppress(interbroker.InterBrokerDecodeError):
        interbroker.decode(api, interbroker.VERSION, data[1:])
    with contextlib.suppress(interbroker.InterBrokerDecodeError):
        interbroker.decode_response(data[1:])


def consumer_protocol_target(data: bytes) -> None:
    for fn in (consumer_protocol.subscription_topics, consumer_protocol.assignment_partitions):
        with contextlib.suppress(ValueError):  # the codec's documented error (UnicodeDecodeError is one)
            fn(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "framing": framing_target,
    "kio_request": kio_request_target,
    "produce_request": produce_request_target,
    "record_batches": record_batches_target,
    "interbroker": interbroker_target,
    "consumer_protocol": consumer_protocol_target,
    "arrow_records": arrow_records_target,
    "speedups_module": speedups_module_target,
}
