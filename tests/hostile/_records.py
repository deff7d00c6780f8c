"""Hand-built record batches (honest, lying, or bombs) and the raw Produce v8 / ListOffsets v1 calls the
record-validation tests send them with. Bombs are written without ever being inflated here."""

from __future__ import annotations

import gzip
import struct
import time

import crc32c
from integration import wire
from integration.wire import Conn, Reader, Writer

from odradek.protocol.records import encode_record

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ZSTD_BLOCK = 128 * 1024  # largest block a zstd frame may hold


def now_ms() -> int:
    return int(time.time() * 1000)


def records_section(n: int, *, keys: list[bytes | None] | None = None, offset_deltas: list[int] | None = None,
                    ts_deltas: list[int] | None = None, value: bytes = b"v" * 20) -> bytes:
    """``n`` uncompressed records (key b"k<i>" unless ``keys`` says otherwise)."""
    ks = keys if keys is not None else [b"k%d" % i for i in range(n)]
    ods = offset_deltas if offset_deltas is not None else list(range(n))
    tds = ts_deltas if ts_deltas is not None else [0] * n
    return b"".join(encode_record(ods[i], tds[i], ks[i], value) for i in range(n))


def compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":
        import cramjam

        return bytes(cramjam.snappy.compress_raw(data))  # librdkafka's framing: one raw block
    if codec == "lz4":
        import lz4.frame

        return bytes(lz4.frame.compress(data))
    if codec == "zstd":
        import zstandard

        return bytes(zstandard.ZstdCompressor().compress(data))
    raise ValueError(codec)


def batch(section: bytes, *, codec: str = "none", count: int, last_offset_delta: int | None = None,
          base_ts: int | None = None, max_ts: int | None = None) -> bytes:
    """A v2 batch around an already encoded (and compressed) records section; the header says
    whatever it is told, the CRC is right."""
    base = now_ms() if base_ts is None else base_ts
    after_crc = struct.pack(
        ">hiqqqhii", CODEC_IDS[codec], count - 1 if last_offset_delta is None else last_offset_delta,
        base, base if max_ts is None else max_ts, -1, -1, -1, count,
    ) + section
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", 0, len(after_crc) + 9, -1, 2, crc) + after_crc


def zstd_rle_bomb(inflated: int) -> bytes:
    """A zstd frame of RLE blocks (Block_Type 1: one byte repeated Block_Size times) that inflates to
    ``inflated`` zero bytes: 4 bytes per 128 KiB, so 8 GiB take 256 KiB."""
    out = bytearray(b"\x28\xb5\x2f\xfd")  # magic
    out += b"\x00"  # frame header descriptor: no content size, no checksum, no dictionary
    out += bytes([(17 - 10) << 3])  # window descriptor: 2^17 bytes
    blocks = inflated // ZSTD_BLOCK
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        out += ((ZSTD_BLOCK << 3) | (1 << 1) | last).to_bytes(3, "little") + b"\x00"
    return bytes(out)


# ---------------------------------------------------------------------------- Produce v8


def produce_v8(conn: Conn, topic: str, partition: int, records: bytes, acks: int = -1
               ) -> tuple[int, int, list[tuple[int, str | None]], str | None]:
    """-> (error_code, base_offset, record_errors [(batch_index, message)], error_message)"""
    r = conn.request(wire.PRODUCE, 8, wire.produce_body({(topic, partition): records}, acks=acks))
    out: dict[int, tuple[int, int, list[tuple[int, str | None]], str | None]] = {}

    def part(rr: Reader) -> None:
        idx = rr.int32()
        err = rr.int16()
        base = rr.int64()
        rr.int64()  # log_append_time_ms
        rr.int64()  # log_start_offset
        rec_errors = rr.array(lambda r3: (r3.int32(), r3.string()))
        out[idx] = (err, base, rec_errors, rr.string())

    def top(rr: Reader) -> None:
        rr.string()
        rr.array(part)

    r.array(top)
    r.int32()  # throttle_time_ms
    return out[partition]


# ---------------------------------------------------------------------------- ListOffsets v1


def list_offsets(conn: Conn, topic: str, partition: int, timestamp: int) -> tuple[int, int, int]:
    """ListOffsets v1 for one partition -> (error_code, timestamp, offset)."""
    body = (Writer().int32(-1).array([topic], lambda w, t: w.string(t).array(
        [partition], lambda w2, p: w2.int32(p).int64(timestamp))).done())
    r = conn.request(wire.LIST_OFFSETS, 1, body)
    out: list[tuple[int, int, int]] = []

    def part(rr: Reader) -> None:
        rr.int32()
        out.append((rr.int16(), rr.int64(), rr.int64()))

    def top(rr: Reader) -> None:
        rr.string()
        rr.array(part)

    r.array(top)
    return out[0]
