"""Write the seed inputs of every target into ``corpus/<target>/seed-*`` (run once; the output is kept in
the repository next to what fuzzing runs found):

    python tests/fuzz/make_corpus.py

and those of the C harness of the speedups' decoding core (``speedups_fuzzer.c``) into ``corpus/speedups``.

Seeds are real encodings: batches in every codec built with the codec packages clients use, Produce
requests of each version, one request of every kio-decoded (API, version) drawn from kio's schemas,
inter-broker bodies and consumer-protocol blobs.
"""

from __future__ import annotations

import gzip
import io
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import targets  # noqa: E402

from odradek.protocol import interbroker, records  # noqa: E402

CORPUS = HERE / "corpus"


def _batch(codec: int, n: int = 3, key: bool = True) -> bytes:
    """A v2 batch of ``n`` records compressed with ``codec`` (the clients' codec packages)."""
    body = b"".join(
        records.encode_record(i, i, f"k{i}".encode() if key else None, b"v" * (i + 1), [("h", b"x")])
        for i in range(n)
    )
    if codec == records.COMPRESSION_GZIP:
        body = gzip.compress(body)
    elif codec == records.COMPRESSION_SNAPPY:
        import snappy

        block = snappy.compress(body)
        body = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    elif codec == records.COMPRESSION_LZ4:
        import lz4.frame

        body = lz4.frame.compress(body)
    elif codec == records.COMPRESSION_ZSTD:
        import zstandard

        body = zstandard.ZstdCompressor().compress(body)
    after_crc = struct.pack(">hiqqqhii", codec, n - 1, 1000, 1000 + n, -1, -1, -1, n) + body
    crc = records.crc32c(after_crc)
    return struct.pack(">qiibI", 0, len(after_crc) + 9, 0, 2, crc) + after_crc


def _produce_body(version: int, rs: bytes) -> bytes:
    flex = version >= 9

    def string(s: str) -> bytes:
        b = s.encode()
        return _uvarint(len(b) + 1) + b if flex else struct.pack(">h", len(b)) + b

    def count(n: int) -> bytes:
        return _uvarint(n + 1) if flex else struct.pack(">i", n)

    tags = b"\x00" if flex else b""
    out = (_uvarint(0) if flex else struct.pack(">h", -1)) + struct.pack(">hi", -1, 30000)
    out += count(1) + string("t") + count(1) + struct.pack(">i", 0)
    out += (_uvarint(len(rs) + 1) if flex else struct.pack(">i", len(rs))) + rs + tags + tags + tags
    return out


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _kio_seeds() -> dict[str, bytes]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from kio.index import load_request_schema
    from kio.serial import entity_writer

    seeds: dict[str, bytes] = {}

    def draw(cls: type) -> bytes:
        found: list[bytes] = []

        @settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(st.from_type(cls))
        def one(req: object) -> None:
            buf = io.BytesIO()
            entity_writer(cls)(buf, req)
            found.append(buf.getvalue())

        one()
        return found[0]

    for index, (key, version) in enumerate(targets.KIO_VERSIONS):
        seeds[f"api{key}-v{version}"] = struct.pack(">H", index) + draw(load_request_schema(key, version))
    return seeds


def speedups_seeds() -> dict[str, bytes]:
    """Inputs of ``speedups_fuzzer.c``: 6 control bytes (flags, lo, hi, a byte changed between the passes), then a record set
    of every batch kind the Fetch reader decodes, or one records section."""
    rows = [(None if i % 3 == 0 else f"k{i}".encode(), None if i % 4 == 1 else b"v" * (i * 7 % 40), [("h", b"x")])
            for i in range(12)]
    control = records.build_batch([(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 5))], base_offset=9,
                                  producer_id=7, producer_epoch=0, transactional=True, control=True)
    rs = b"".join([
        records.build_batch(rows[0:4], base_offset=0, timestamps=[1000 + i for i in range(4)]),
        records.build_batch(rows[4:6], base_offset=4, timestamp=77, timestamp_type=1),
        records.build_batch(rows[6:9], base_offset=6, producer_id=7, producer_epoch=0, transactional=True),
        control,
        records.build_batch(rows[10:12], base_offset=10, timestamp=5),
        _batch(records.COMPRESSION_GZIP)[:-7],  # compressed (the walk stops there), cut short
    ])
    one = records.build_batch(rows, base_offset=0)
    section = one[records.BATCH_HEADER_SIZE:]
    # another thread turns record 2's offsetDelta from 2 into 0 between the passes: with [0, 2) asked for,
    # the fill pass meets one record more than the count pass allocated for
    three = records.build_batch([(b"k", b"v")] * 3)
    at = records.BATCH_HEADER_SIZE
    for _ in range(2):
        at += 1 + three[at] // 2  # one-byte record lengths
    at += 3  # length, attributes, timestampDelta
    assert three[at] == 4  # offsetDelta 2, zig-zag
    race = bytes([0x07, 8, 10, at >> 8, at & 0xFF, 4]) + three
    return {
        "batches-crc": bytes([0x01, 255, 255, 0, 0, 0]) + rs,
        "batches-fixed-crc": bytes([0x03, 9, 18, 0, 0, 0]) + rs,
        "batches-no-crc": bytes([0x00, 255, 255, 0, 0, 0]) + rs,
        "batches-changed": bytes([0x07, 10, 14, 0, 70, 0x04]) + rs,
        "one-batch": bytes([0x03, 255, 255, 0, 0, 0]) + one,
        "section": bytes([0x08, 255, 255, 0, 0, 0]) + section,
        "section-log-append": bytes([0x18, 10, 255, 0, 0, 0]) + section,
        "section-changed": bytes([0x0C, 9, 14, 0, 3, 0x81]) + section,
        "scan-offsets": bytes([0x28, 255, 255, 0, 0, 0]) + section,
        "changed-offset-into-range": race,
    }


def _arrow_records_seeds() -> dict[str, bytes]:
    """Inputs of the ``arrow_records`` target: a flags byte (see ``targets.arrow_records_target``), then a
    fetched record set."""
    c = speedups_seeds()
    rs, one = c["batches-crc"][6:], c["one-batch"][6:]
    return {"crc": bytes([0x02]) + rs, "fixed": bytes([0x03]) + rs, "committed": bytes([0x06]) + rs,
            "lo-from-3": bytes([0x02 | (3 << 3)]) + rs, "one": bytes([0x02]) + one,
            "gzip": bytes([0x02]) + _batch(records.COMPRESSION_GZIP),
            "zstd": bytes([0x03]) + _batch(records.COMPRESSION_ZSTD)}


def _speedups_module_seeds() -> dict[str, bytes]:
    """Inputs of the ``speedups_module`` target: a flags byte (see ``targets.speedups_module_target``), then
    a record set or a records section, with records at the integer fields' extremes."""
    c = speedups_seeds()
    rs, one, section = c["batches-crc"][6:], c["one-batch"][6:], c["section"][6:]
    extremes = b"".join([
        records.encode_record(0, -(2**63), b"k", b"v"), records.encode_record(1, 2**63 - 1, None, None),
        records.encode_record(2**31 - 1, 0, b"", b"", [("h", None)]),
        b"\x1e\x00\x00\x82\x80\x80\x80\x10\x82\x80\x80\x80\x10k\x00\x00",  # 5-byte varints, high bits set
    ])
    return {"record-set": bytes([0x02]) + rs, "record-set-fixed": bytes([0x03 | (3 << 3)]) + rs,
            "one-batch": bytes([0x06]) + one, "section": bytes([0x00]) + section,
            "section-log-append": bytes([0x04]) + section, "extremes": bytes([0x00]) + extremes}


def main() -> None:
    batches = {f"codec{c}": _batch(c) for c in range(5)}
    batches["keyless"] = _batch(0, key=False)
    batches["two"] = _batch(0) + _batch(records.COMPRESSION_GZIP)
    seeds: dict[str, dict[str, bytes]] = {
        "record_batches": {name: b"\x00" + b for name, b in batches.items()},
        "produce_request": {
            f"v{v}-codec{c}": bytes([(v - 3) << 1]) + _produce_body(v, _batch(c)) for v in (3, 8, 9, 12) for c in (0, 1, 4)
        },
        "framing": {
            "three": b"\x07" + b"".join(struct.pack(">i", len(f)) + f for f in (
                struct.pack(">hhih", 18, 3, 1, 4) + b"rdkf" + b"\x00",
                struct.pack(">hhih", 3, 12, 2, -1) + b"\x02\x00\x00abc",
                struct.pack(">hhih", 0, 9, 3, 1) + b"c" + b"\x01\x01\x01x" + b"\x00" * 20,
            )),
        },
        "interbroker": {
            "controlled-shutdown": bytes([3]) + b'{"broker_id": 1, "broker_epoch": 2}',
            "stop-replica": bytes([1]) + interbroker.encode(interbroker.STOP_REPLICA, {
                "controller_id": 1, "controller_epoch": 2, "broker_epoch": 3,
                "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 4, "delete": True}],
            }),
            "response": b"\x00" + b'{"error_code": 0, "partitions": []}',
        },
        "consumer_protocol": {
            "subscription": struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 2) + b"bc",
            "assignment": struct.pack(">hi", 1, 1) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1),
        },
        "kio_request": _kio_seeds(),
        "arrow_records": _arrow_records_seeds(),
        "speedups_module": _speedups_module_seeds(),
    }
    assert set(seeds) == set(targets.TARGETS), set(targets.TARGETS) ^ set(seeds)
    for target, items in seeds.items():
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in items.items():
            (d / f"seed-{name}").write_bytes(data)
        print(f"{target}: {len(items)} seeds")
    c_seeds = speedups_seeds()
    d = CORPUS / "speedups"
    d.mkdir(parents=True, exist_ok=True)
    for name, data in c_seeds.items():
        (d / f"seed-{name}").write_bytes(data)
    print(f"speedups (C harness): {len(c_seeds)} seeds")


if __name__ == "__main__":
    main()
