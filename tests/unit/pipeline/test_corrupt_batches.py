"""The Spark source's Fetch-reader decoder (``arrow_records.decode``: the C walk and the Python paths for
compressed batches and read_committed) does not trust fetched bytes: a record set with random bytes
changed either raises :class:`MalformedRecords` (a CRC-32C mismatch: :class:`CorruptRecordException`,
naming topic, partition and the batch's offset) or decodes to exactly the rows the mutated bytes stand
for. Every byte from a batch's ``attributes`` to its end is covered by the CRC, and so is the stored CRC
itself: changing any of them must raise. Only ``baseOffset``, ``batchLength`` and
``partitionLeaderEpoch`` lie outside it (as in Kafka); a change there may be legal, and then the rows
must be what an independent reference decoder (``records.decode_records`` batch by batch) reads."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from odradek.pipeline import arrow_records
from odradek.pipeline.arrow_records import AbortFilter, MalformedRecords
from odradek.protocol import records

SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                    ("timestampType", pa.int32())])
TOPIC, PARTITION = "orders", 3
T0 = 1_700_000_000_000
ABORTED_PID, COMMITTED_PID = 7, 8
Row = tuple[bytes | None, bytes | None, int, int, int]


def _control(kind: int, pid: int, base: int) -> bytes:
    return records.build_batch([(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 5))], base_offset=base,
                               timestamp=T0, producer_id=pid, producer_epoch=0, transactional=True, control=True)


def record_set() -> tuple[bytes, list[tuple[int, int]]]:
    """Batches of every kind the decoder has a path for; (start, end) byte range of each."""
    rows = [(None if i % 3 == 0 else b"k%d" % i, None if i % 4 == 1 else b"v" * (i * 7 % 40), [("h", b"x")])
            for i in range(30)]
    batches = [
        records.build_batch(rows[0:5], base_offset=0, timestamps=[T0 + i for i in range(5)]),
        records.build_batch(rows[5:10], base_offset=5, timestamp=T0 + 9, compression=records.COMPRESSION_GZIP),
        records.build_batch(rows[10:13], base_offset=10, timestamp=T0 - 50, timestamp_type=1),
        records.build_batch(rows[13:17], base_offset=13, timestamp=T0, producer_id=ABORTED_PID, producer_epoch=0,
                            transactional=True),
        _control(0, ABORTED_PID, 17),
        records.build_batch(rows[18:21], base_offset=18, timestamp=T0, producer_id=COMMITTED_PID, producer_epoch=0,
                            transactional=True),
        _control(1, COMMITTED_PID, 21),
        records.build_batch(rows[22:27], base_offset=22, timestamps=[T0 + 100 - i for i in range(5)]),
    ]
    spans, pos = [], 0
    for b in batches:
        spans.append((pos, pos + len(b)))
        pos += len(b)
    return b"".join(batches), spans


def _filter(committed: bool) -> AbortFilter | None:
    if not committed:
        return None
    f = AbortFilter()
    f.add([(ABORTED_PID, 13)])
    return f


def rows_of(out: arrow_records.Decoded) -> list[Row]:
    t = pa.Table.from_batches(out.batches, SCHEMA)
    assert set(t.column("topic").to_pylist()) <= {TOPIC} and set(t.column("partition").to_pylist()) <= {PARTITION}
    ts = t.column("timestamp").cast(pa.int64()).to_pylist()
    return list(zip(t.column("key").to_pylist(), t.column("value").to_pylist(), t.column("offset").to_pylist(), ts,
                    t.column("timestampType").to_pylist(), strict=True))


class Refused(Exception):
    pass


def reference(data: bytes, lo: int, hi: int, committed: bool) -> list[Row]:
    """The rows of ``data`` read batch by batch with the records module's own decoder; Refused where a
    consumer that checks CRCs must refuse the bytes."""
    out: list[Row] = []
    filt = _filter(committed)
    pos = 0
    while len(data) - pos >= records.BATCH_HEADER_SIZE:
        h = records.read_header(data, pos)
        if h.batch_length < records.MIN_BATCH_LENGTH:
            raise Refused("batchLength")
        if pos + h.size > len(data):
            break  # a fetch response may end inside a batch
        if h.magic != records.MAGIC_V2 or not records.batch_crc_ok(data, pos, h):
            raise Refused("magic or CRC")
        batch = data[pos : pos + h.size]
        keep = filt.keep(memoryview(data), pos, h) if filt is not None else not h.is_control
        if keep and h.last_offset >= lo and h.base_offset < hi:
            for r in records.decode_records(batch):
                if lo <= r.offset < hi:
                    ts = h.max_timestamp if h.timestamp_type == 1 else r.timestamp
                    out.append((r.key, r.value, r.offset, ts * 1000, h.timestamp_type))
        pos += h.size
    return out


def expected(data: bytes, lo: int, hi: int, committed: bool) -> list[Row] | None:
    """The reference's rows, None where it refuses the bytes."""
    try:
        return reference(data, lo, hi, committed)
    except (Refused, records.InvalidRecordError, ValueError):
        return None


def mutate(rnd: random.Random, data: bytes) -> tuple[bytes, list[int]]:
    buf = bytearray(data)
    if rnd.random() < 0.25:  # a burst
        start = rnd.randrange(len(buf))
        where = list(range(start, min(len(buf), start + rnd.randint(2, 8))))
    else:
        where = sorted({rnd.randrange(len(buf)) for _ in range(rnd.randint(1, 4))})
    for i in where:
        buf[i] ^= rnd.randint(1, 255)
    return bytes(buf), where


def crc_covered(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Byte ``pos`` is the stored CRC or lies under it (attributes to the batch's end). A change there is
    always refused when no framing byte (``batchLength``) changed with it: then every batch is read."""
    return any(s + 17 <= pos < e for s, e in spans)


def test_clean_record_set_decodes_to_the_reference_rows() -> None:
    data, _spans = record_set()
    for committed, lo, hi in ((False, 0, 1 << 62), (False, 2, 25), (True, 0, 1 << 62)):
        got = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, data, lo, hi, _filter(committed)))
        assert got == reference(data, lo, hi, committed)
    everything = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, data, 0, 1 << 62))
    assert [r[2] for r in everything] == [*range(0, 17), *range(18, 21), *range(22, 27)]
    committed_rows = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, data, 0, 1 << 62, _filter(True)))
    assert [r[2] for r in committed_rows] == [*range(0, 13), *range(18, 21), *range(22, 27)]


@pytest.mark.parametrize("committed,lo,hi,count,seed", [(False, 2, 25, 14_000, 1), (True, 0, 1 << 62, 6_000, 2)])
def test_random_mutations_raise_or_decode_exactly(committed: bool, lo: int, hi: int, count: int, seed: int) -> None:
    data, spans = record_set()
    original = reference(data, lo, hi, committed)
    rnd = random.Random(seed)
    raised = legal = 0
    wrong: list[str] = []
    for _ in range(count):
        bad, where = mutate(rnd, data)
        covered = all(crc_covered(i, spans) for i in where)

        try:
            got = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, bad, lo, hi, _filter(committed)))
        except MalformedRecords as e:
            raised += 1
            if (getattr(e, "topic", None), getattr(e, "partition", None)) != (TOPIC, PARTITION):
                wrong.append(f"bytes {where}: the error does not name {TOPIC}-{PARTITION}: {e}")
            # only bytes under the CRC changed: refused by construction (the reference is slow; skip it)
            if not covered and expected(bad, lo, hi, committed) is not None:
                wrong.append(f"bytes {where}: refused a legal change ({e})")
            continue
        except Exception as e:  # anything but the decoder's documented error
            wrong.append(f"bytes {where}: raised {type(e).__name__}: {e}")
            continue
        expect = expected(bad, lo, hi, committed)
        if expect is None or covered:  # every batch is read when the framing is intact
            wrong.append(f"bytes {where}: accepted a change under the CRC"
                         f" ({'the original rows' if got == original else 'rows changed'})")
        elif got != expect:
            wrong.append(f"bytes {where}: decoded {len(got)} rows, not the {len(expect)} the bytes stand for")
        else:
            legal += 1
    assert not wrong, f"{len(wrong)} of {count} mutations went wrong, e.g.:\n" + "\n".join(wrong[:10])
    assert raised > 0.9 * count and legal > 0, (raised, legal)


def test_corrupt_batch_error_names_topic_partition_and_offset() -> None:
    data, spans = record_set()
    start, end = spans[7]
    bad = bytearray(data)
    bad[end - 1] ^= 0x20  # the last record's last byte (a header's value)
    with pytest.raises(arrow_records.CorruptRecordException) as info:
        arrow_records.decode(SCHEMA, TOPIC, PARTITION, bytes(bad), 0, 1 << 62)
    assert (info.value.topic, info.value.partition, info.value.offset) == (TOPIC, PARTITION, 22)
    assert "orders-3" in str(info.value) and "offset 22" in str(info.value) and "CRC-32C" in str(info.value)
    # a compressed batch's CRC is checked in Python, before inflating it
    start, end = spans[1]
    bad = bytearray(data)
    bad[end - 3] ^= 1
    with pytest.raises(arrow_records.CorruptRecordException, match="offset 5 "):
        arrow_records.decode(SCHEMA, TOPIC, PARTITION, bytes(bad), 0, 1 << 62)


def test_check_crcs_false_skips_the_check() -> None:
    """``kafka.check.crcs=false``: a changed value byte is read as it is (the check costs CPU; Kafka's
    consumer lets it be turned off)."""
    data, spans = record_set()
    _start, end = spans[7]
    bad = bytearray(data)
    bad[data.rindex(b"v", 0, end)] ^= 0x20  # a byte of the last value
    got = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, bytes(bad), 0, 1 << 62, check_crcs=False))
    clean = rows_of(arrow_records.decode(SCHEMA, TOPIC, PARTITION, data, 0, 1 << 62))
    assert len(got) == len(clean) and got != clean
