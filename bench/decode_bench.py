"""Decode micro-benchmark of the Spark source's Fetch reader (not a test): prints figures.

    python bench/decode_bench.py [--records 200000] [--value-bytes 100] [--batch-records 1000] [--rounds 7]
                                 [--no-check-crcs]

A fetch response's record set of ``--records`` records in uncompressed v2 batches of ``--batch-records``
(16-byte keys, ``--value-bytes`` values) is decoded into Arrow by ``odradek.pipeline.arrow_records.decode``
(the C walk, ``odradek._speedups.batches_to_columns``) ``--rounds`` times; the best round is reported as
rows/s and MB/s of the record set, by wall time and by the thread's CPU time (``time.thread_time``: on a
shared machine the CPU time moves less with the other processes' load). No broker, no Spark: the decoder
alone, so that a change to it can be measured before/after (run each side a few times, alternating;
``PYTHONPATH`` picks the source tree).
"""

from __future__ import annotations

import argparse
import inspect
import time

import pyarrow as pa

from odradek.pipeline import arrow_records
from odradek.protocol import records


def schema() -> pa.Schema:
    return pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                      ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                      ("timestampType", pa.int32())])


def record_set(n: int, value_bytes: int, per_batch: int) -> bytes:
    out = bytearray()
    base = 0
    while base < n:
        k = min(per_batch, n - base)
        out += records.build_batch([(b"key-%012d" % (base + i), b"v" * value_bytes) for i in range(k)],
                                   base_offset=base, timestamp=1_700_000_000_000)
        base += k
    return bytes(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch-records", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-check-crcs", action="store_true")
    a = ap.parse_args()
    data = record_set(a.records, a.value_bytes, a.batch_records)
    s = schema()
    kwargs = {}
    if "check_crcs" in inspect.signature(arrow_records.decode).parameters:
        kwargs["check_crcs"] = not a.no_check_crcs
    best = cpu = float("inf")
    for _ in range(a.rounds):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = arrow_records.decode(s, "t", 0, data, 0, a.records, **kwargs)  # type: ignore[arg-type]
        best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.thread_time() - c0)
        assert sum(b.num_rows for b in out.batches) == a.records
    print(f"decode: {a.records} records, {len(data) / 1e6:.1f} MB, check_crcs={kwargs.get('check_crcs', 'n/a')}: "
          f"wall {best * 1000:.2f} ms = {a.records / best / 1e6:.2f} M rows/s, {len(data) / best / 1e6:.0f} MB/s; "
          f"CPU {cpu * 1000:.2f} ms = {a.records / cpu / 1e6:.2f} M rows/s, {len(data) / cpu / 1e6:.0f} MB/s")


if __name__ == "__main__":
    main()
