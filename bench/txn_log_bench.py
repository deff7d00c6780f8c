"""Recovery of a segment of transactions vs the same records without transactions (not a test):
prints figures.

    python bench/txn_log_bench.py [--txns 200] [--records 1000] [--batch 100] [--value 100] [--repeat 3]

One segment of ``--txns`` transactions of ``--records`` records each (batches of ``--batch``
records, two producers interleaved, every third transaction aborted), written through
Log.append_as_leader and Log.append_txn_marker; then the same records in the same batches
without producer ids (no markers). Each directory is copied while its log is still open (a
"kill -9": no clean shutdown, no producer snapshot at the end) and opened with
``clean=False, recovery_point=0``: every batch CRC-checked, indexes rebuilt, producer state and
the transaction index rebuilt by replaying the batches. Best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from odradek.log import Log, LogConfig
from odradek.log.txn_marker import ControlRecordType
from odradek.protocol.records import build_batch, validate_batches

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1 << 30, flush_messages=1 << 62, flush_ms=1 << 62)


def _write(root: Path, txns: int, records: int, batch: int, value: bytes, transactional: bool) -> Log:
    log = Log.create(root, "bench", 0, CONFIG, time_ms=NOW)
    seqs = {1: 0, 2: 0}
    per_txn = max(records // batch, 1)
    for t in range(txns):
        pid = 1 + t % 2
        for _ in range(per_txn):
            if transactional:
                data = bytearray(build_batch([(None, value)] * batch, timestamp=NOW, producer_id=pid, producer_epoch=0,
                                             base_sequence=seqs[pid], transactional=True))
                seqs[pid] += batch
            else:
                data = bytearray(build_batch([(None, value)] * batch, timestamp=NOW))
            log.append_as_leader(data, validate_batches(data), 0, NOW)
        if transactional:
            result = ControlRecordType.ABORT if t % 3 == 2 else ControlRecordType.COMMIT
            log.append_txn_marker(pid, 0, 0, result, 0, NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def _recover(src: Path, scratch: Path, repeat: int) -> tuple[float, Log]:
    best = float("inf")
    lg: Log | None = None
    for i in range(repeat):
        copy = scratch / f"run{i}" / src.name
        shutil.copytree(src, copy)
        os.sync()
        t0 = time.perf_counter()
        lg = Log.open(copy, CONFIG, clean=False, recovery_point=0, time_ms=NOW)
        lg.update_high_watermark(lg.log_end_offset)
        _ = lg.last_stable_offset
        best = min(best, time.perf_counter() - t0)
        if i < repeat - 1:
            lg.close_handlers()
    assert lg is not None
    return best, lg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--txns", type=int, default=200)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    value = os.urandom(args.value)
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
        root = Path(tmp)
        results = {}
        for name, transactional in (("transactional", True), ("plain", False)):
            t0 = time.perf_counter()
            lg = _write(root / name, args.txns, args.records, args.batch, value, transactional)
            write_s = time.perf_counter() - t0
            size = lg.size_in_bytes
            leo = lg.log_end_offset
            rec_s, recovered = _recover(lg.dir, root / f"{name}-copies", args.repeat)
            assert recovered.log_end_offset == leo
            aborted = sum(len(s.txn_index.entries) for s in recovered.segments)
            results[name] = rec_s
            print(f"{name:>13}: {leo} offsets, {size / 1e6:.1f} MB in {recovered.number_of_segments} segment(s); "
                  f"written in {write_s:.2f} s; recovery (kill -9, recovery point 0) {rec_s * 1000:.1f} ms "
                  f"= {size / 1e6 / rec_s:.0f} MB/s; aborted transactions indexed: {aborted}; "
                  f"LSO {recovered.last_stable_offset}")
            recovered.close_handlers()
            lg.close_handlers()
        print(f"transactional / plain recovery time: {results['transactional'] / results['plain']:.2f}x "
              f"({args.txns} transactions of {args.records} records, batches of {args.batch})")


if __name__ == "__main__":
    main()
