"""Storage-layer micro-benchmark (not a test): prints figures.

    python bench/log_bench.py [--mb 512] [--partitions 1000] [--partition-mb 1]

1. append throughput: 16 KB batches of 1 KB records through Log.append_as_leader
2. read-region computations per second: Log.read at random offsets (no payload I/O)
3. startup after a clean stop of N partitions (LogManager.startup)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from odradek.log import Log, LogConfig, LogManager
from odradek.protocol.records import build_batch, validate_batches

NOW = 1_700_000_000_000


def make_batch(records: int = 16, value_size: int = 1000) -> bytes:
    value = os.urandom(value_size)
    return build_batch([(None, value)] * records, timestamp=NOW)


def bench_append(root: Path, total_mb: int) -> Log:
    log = Log.create(root, "bench", 0, LogConfig(), time_ms=NOW)
    batch = make_batch()
    headers = validate_batches(batch)
    n = total_mb * 1024 * 1024 // len(batch)
    t0 = time.perf_counter()
    for _ in range(n):
        buf = bytearray(batch)  # the server hands over a fresh buffer per request
        log.append_as_leader(buf, headers, 0, NOW)
    dt = time.perf_counter() - t0
    log.update_high_watermark(log.log_end_offset)
    mb = n * len(batch) / 1e6
    print(f"append: {n} batches of {len(batch)} B, {mb:.0f} MB in {dt:.2f} s = {mb / dt:.0f} MB/s "
          f"({n / dt:.0f} batches/s, {dt / n * 1e6:.1f} us/batch)")
    return log


def bench_read(log: Log, iterations: int = 200_000) -> None:
    rnd = random.Random(1)
    leo = log.log_end_offset
    offsets = [rnd.randrange(0, leo) for _ in range(iterations)]
    hw = log.high_watermark
    t0 = time.perf_counter()
    for off in offsets:
        log.read(off, 1048576, hw, True)
    dt = time.perf_counter() - t0
    print(f"read, random offsets: {iterations / dt:.0f} region computations/s "
          f"({dt / iterations * 1e6:.1f} us each, 1 MB max)")
    tail = [leo - 1 - rnd.randrange(0, 64) for _ in range(iterations)]
    t0 = time.perf_counter()
    for off in tail:
        log.read(off, 1048576, hw, True)
    dt = time.perf_counter() - t0
    print(f"read, tailing consumer: {iterations / dt:.0f} region computations/s ({dt / iterations * 1e6:.1f} us each)")


def bench_startup(root: Path, partitions: int, partition_mb: float) -> None:
    cfg = LogConfig()
    mgr = LogManager([root], lambda t: cfg)
    mgr.startup()
    batch = make_batch()
    headers = validate_batches(batch)
    per = max(1, int(partition_mb * 1024 * 1024 // len(batch)))
    t0 = time.perf_counter()
    for p in range(partitions):
        lg = mgr.get_or_create_log("startup-topic", p)
        for _ in range(per):
            lg.append_as_leader(bytearray(batch), headers, 0, NOW)
        lg.update_high_watermark(lg.log_end_offset)
    fill = time.perf_counter() - t0
    mgr.shutdown()
    total_gb = partitions * per * len(batch) / 1e9
    t0 = time.perf_counter()
    mgr2 = LogManager([root], lambda t: cfg)
    mgr2.startup()
    dt = time.perf_counter() - t0
    print(f"startup after clean stop: {partitions} partitions, {total_gb:.2f} GB in {dt * 1000:.0f} ms "
          f"(fill took {fill:.1f} s)")
    t0 = time.perf_counter()
    mgr2.shutdown()
    print(f"clean shutdown of {partitions} partitions: {(time.perf_counter() - t0) * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512, help="MB appended in the append benchmark")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--partition-mb", type=float, default=1.0, help="MB per partition for the startup benchmark")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    try:
        log = bench_append(root / "append", args.mb)
        bench_read(log)
        log.close()
        bench_startup(root / "startup", args.partitions, args.partition_mb)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
