"""Replication throughput: acks=all produce on a three-broker cluster (RF=3, min.insync.replicas=2,
Debian's ZooKeeper) against the same workload on one embedded broker (RF=1), alternating, medians of
``--reps`` runs, in one process so the ratio is measured under the same machine load.

    python bench/cluster_bench.py [--records 200000] [--record-size 1024] [--partitions 6] [--reps 3]

Prints one line per run and a summary table: MB/s, records/s, p99 latency and broker CPU seconds
(summed over the cluster's brokers), and the ratio cluster / single. On this 2-core machine the
three brokers, ZooKeeper and the client share two cores, so the ratio says as much about CPU
per replicated byte as about replication latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import OdradekBroker  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from odradek.devcluster.zookeeper import Ensemble  # noqa: E402


def perf(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "odradek", "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
           "--num-records", str(args.records), "--record-size", str(args.record_size), "--acks", "all",
           "--partitions", str(args.partitions), "--json", "--timeout", "600"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    try:
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": f"exit {out.returncode}: {out.stderr[-500:]}"}


def create(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config={"min.insync.replicas": str(min(2, rf))})])[
        topic].result(120)


def run_single(base: Path, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    b = OdradekBroker(base / f"single{rep}", {"offsets.topic.replication.factor": "1"})
    b.start()
    try:
        create(b.bootstrap, "w", args.partitions, 1)
        cpu0 = b.cpu_seconds()
        r = perf(b.bootstrap, "w", args)
        r["broker_cpu_s"] = b.cpu_seconds() - cpu0
        r["p99_ms"] = r.get("latency_ms", {}).get("p99", 0.0)
        return r
    finally:
        b.stop()


def run_cluster(base: Path, zk: Ensemble, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    chroot = f"/bench{rep}"
    kz = KazooClient(hosts=zk.connect)
    kz.start(timeout=10)
    kz.ensure_path(chroot)
    kz.stop()
    kz.close()
    brokers = [
        OdradekBroker(base / f"cluster{rep}-b{i}", {
            "broker.id": str(i), "zookeeper.connect": zk.connect + chroot, "offsets.topic.replication.factor": "3",
        })
        for i in (1, 2, 3)
    ]
    for b in brokers:
        b.start()
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        deadline = time.monotonic() + 60
        while True:  # every broker registered
            try:
                create(bootstrap, "w", args.partitions, 3)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        cpu0 = sum(b.cpu_seconds() for b in brokers)
        r = perf(bootstrap, "w", args)
        r["broker_cpu_s"] = sum(b.cpu_seconds() for b in brokers) - cpu0
        r["p99_ms"] = r.get("latency_ms", {}).get("p99", 0.0)
        return r
    finally:
        for b in brokers:
            b.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="odradek-cluster-bench-"))
    zk = Ensemble(base / "zk", 1).start()
    results: dict[str, list[dict[str, Any]]] = {"single": [], "cluster": []}
    try:
        for rep in range(args.reps):
            for kind in ("single", "cluster"):
                r = run_single(base, args, rep) if kind == "single" else run_cluster(base, zk, args, rep)
                results[kind].append(r)
                print(f"rep {rep + 1} {kind:7s}: " + (r.get("error") or
                      f"{r.get('mb_per_sec', 0):8.1f} MB/s {r.get('records_per_sec', 0):10,.0f} rec/s "
                      f"p99 {r.get('p99_ms', 0):7.1f} ms  broker CPU {r['broker_cpu_s']:.1f} s"), flush=True)
    finally:
        zk.stop()

    def med(kind: str, key: str) -> float | None:
        vals = [float(r[key]) for r in results[kind] if key in r and "error" not in r]
        return statistics.median(vals) if vals else None

    print(f"\nacks=all, {args.records:,} x {args.record_size} B, {args.partitions} partitions; medians of {args.reps}")
    print(f"{'':10s}{'MB/s':>10s}{'rec/s':>12s}{'p99 ms':>10s}{'broker CPU s':>14s}")
    for kind, label in (("single", "1 broker"), ("cluster", "3 (RF=3)")):
        vals = [med(kind, k) for k in ("mb_per_sec", "records_per_sec", "p99_ms", "broker_cpu_s")]
        print(f"{label:10s}" + "".join(f"{v:>{w}.1f}" if v is not None else f"{'-':>{w}}"
                                       for v, w in zip(vals, (10, 12, 10, 14), strict=True)))
    a, b = med("cluster", "mb_per_sec"), med("single", "mb_per_sec")
    if a and b:
        print(f"ratio cluster/single MB/s: {a / b:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
