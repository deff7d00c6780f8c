"""Time per change of the embedded broker's metadata store (LocalStore) when it already holds many partitions.

    PYTHONPATH=src nice -n 19 .venv/bin/python scripts/metadata_store_bench.py --partitions 10000 --changes 200

Builds a store of ``--partitions`` single-partition topics in memory, writes it to a fresh directory once,
opens it as the broker does, then times ``--changes`` topic creations (one store multi each: the topic's config,
its assignment and its partition's state, as ``TopicRegistry.create_topic`` writes them) and as many partition
state updates (one store set each, as an ISR change writes). Prints the median and mean per change, the time to
open the store and the bytes on disk.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from odradek.controller.store import LocalStore
from odradek.controller.topics import TopicRegistry


def _registry(store: LocalStore) -> TopicRegistry:
    reg = TopicRegistry(store, lambda: [0])
    reg.controller_managed = False  # the partition state znodes are written too, as the controller does
    return reg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--changes", type=int, default=200)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-store-bench-") as d:
        file = Path(d) / "odradek-metadata.json"
        mem = LocalStore(None)
        reg = _registry(mem)
        for i in range(args.partitions):
            reg.create_topic(f"t{i:06d}", 1, 1)
        # one write of the whole tree through the store itself: a store that persists nothing until now
        mem.file = file
        mem._write_file()

        t0 = time.perf_counter()
        store = LocalStore(file)
        opened_s = time.perf_counter() - t0
        reg = _registry(store)

        creates: list[float] = []
        for i in range(args.changes):
            t0 = time.perf_counter()
            reg.create_topic(f"new{i:06d}", 1, 1)
            creates.append(time.perf_counter() - t0)
        sets: list[float] = []
        for i in range(args.changes):
            path = f"/brokers/topics/t{i:06d}/partitions/0/state"
            data, _ = store.get(path)
            t0 = time.perf_counter()
            store.set(path, data)
            sets.append(time.perf_counter() - t0)
        on_disk = sum(p.stat().st_size for p in Path(d).iterdir() if p.is_file())

    def ms(xs: list[float]) -> str:
        return f"median {statistics.median(xs) * 1000:.2f} ms, mean {statistics.mean(xs) * 1000:.2f} ms"

    print(f"{args.partitions} partitions, {len(store.children('/brokers/topics'))} topics after the run")
    print(f"open the store: {opened_s * 1000:.1f} ms; {on_disk} bytes on disk after the run")
    print(f"create a 1-partition topic (one multi): {ms(creates)}")
    print(f"set a partition state (one set):        {ms(sets)}")


if __name__ == "__main__":
    main()
