"""Replication throughput: acks=all produce on a three-broker cluster (RF=3, min.insync.replicas=2,
Debian's ZooKeeper) against the same workload on one embedded broker (RF=1), alternating, medians of
``--reps`` runs, in one process so the ratio is measured under the same machine load.

    python bench/cluster_bench.py [--peer kafka] [--client c|python|kafka-perf] [--records 200000]
                                  [--record-size 1024] [--partitions 6] [--reps 3] [--rate MSGS_PER_S]
                                  [--profile DIR]

Prints one line per run and a summary table: MB/s, records/s, p99 latency and broker CPU seconds
(summed over the cluster's brokers; "kernel" is the system-time part of them), and the ratio cluster /
single. The client is librdkafka's C perf
tool by default (rdkafka_performance, built by bench/build_rdkafka.sh; bench/rdkafka_perf.py), so the
brokers rather than a Python producer loop are measured; ``--client python`` runs `odradek perf`.
Latency is the produce-to-acknowledgement time of each record (the C tool's ``-l``). ``--rate`` caps
the producer (messages/s, e.g. 102400 for 100 MB/s of 1 KB records) for latency at a given load.
``--profile DIR`` records every broker with py-spy (``$PY_SPY`` or on the PATH) during the measured
produce (speedscope files). On this 2-core machine the
three brokers, ZooKeeper and the client share two cores, so the ratio says as much about CPU
per replicated byte as about replication latency.

``--peer kafka`` measures the three Odradek brokers against three Apache Kafka 4.4 nodes instead of
the single broker (bench/brokers.py's KafkaTrio on peers/kafka_peer.py: combined KRaft nodes, broker
and controller in each JVM, a three-voter quorum, heap -Xmx1G -Xms1G each), with the same topic (RF=3,
min.insync.replicas=2), the same acks=all load and the same client; the two clusters alternate (Odradek
first in odd repetitions, Kafka first in even ones) and each run's data is deleted and synced before
the next, whichever cluster wrote it. Kafka's CPU seconds are its three JVMs' (its controllers
included); Odradek's are its three brokers' (ZooKeeper's are not counted). ``--client kafka-perf``
produces with Kafka's kafka-producer-perf-test (bench/kafka_perf.py) instead of rdkafka_performance.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_perf  # noqa: E402
import rdkafka_perf  # noqa: E402
from brokers import BenchBroker, KafkaTrio, OdradekBroker, cpu_delta  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from odradek.devcluster.zookeeper import Ensemble  # noqa: E402


def perf(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    if args.client == "kafka-perf":
        r, _ = kafka_perf.run("produce", bootstrap, topic, args.records, args.record_size, acks="all", timeout_s=600)
        return r
    if args.client == "c":
        r, _ = rdkafka_perf.run(args.binary, "produce", bootstrap, topic, args.records, args.record_size,
                                acks="all", rate=args.rate, timeout_s=600)
        return r
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


def settle(bootstrap: str, topic: str, partitions: int) -> None:
    """One acks=all record per partition, acknowledged, before the measured produce: every follower
    is then fetching. A follower whose first fetch reached its leader before the leader had taken
    its LeaderAndIsr backs off replica.fetch.backoff.ms (1 s, as Kafka's fetcher does); a produce
    started at once waited that second on the partition (12 of 90 cluster runs without this step
    stalled ~1 s: p99 ~1 s, 190-260 MB/s; none of 26 with it), which measures topic creation, not
    replication."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for q in range(partitions):
        p.produce(topic, b"settle", partition=q)
    if p.flush(60) != 0:
        raise RuntimeError(f"settling {topic}: records not acknowledged within 60 s")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader, once every partition has one (the produce spreads over all leaders)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        out = {p: m.leader for p, m in md.partitions.items()}
        if out and all(v >= 0 for v in out.values()) or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def add_cpu(r: dict[str, Any], before: list[tuple[float, float]], brokers: list[Any]) -> None:
    """The brokers' CPU seconds since ``before`` (their ``cpu_split``s), summed: ``broker_cpu_s`` and the
    kernel's part of it, ``broker_kernel_s`` (system time: copies, splice/sendfile, system calls)."""
    user, kernel = cpu_delta(before, [b.cpu_split() for b in brokers])
    r["broker_cpu_s"] = user + kernel
    r["broker_kernel_s"] = kernel


def run_single(base: Path, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    b = OdradekBroker(base / f"single{rep}", {"offsets.topic.replication.factor": "1"})
    b.start()
    try:
        create(b.bootstrap, "w", args.partitions, 1)
        settle(b.bootstrap, "w", args.partitions)
        split0 = [b.cpu_split()]
        with profiled([b], args, f"single{rep}"):
            r = perf(b.bootstrap, "w", args)
        add_cpu(r, split0, [b])
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
        r_leaders = leaders(bootstrap, "w")
        settle(bootstrap, "w", args.partitions)
        split0 = [b.cpu_split() for b in brokers]
        with profiled(brokers, args, f"cluster{rep}"):
            r = perf(bootstrap, "w", args)
        add_cpu(r, split0, brokers)
        r["leaders"] = r_leaders
        r["p99_ms"] = r.get("latency_ms", {}).get("p99", 0.0)
        return r
    finally:
        for b in brokers:
            b.stop()


def run_kafka(base: Path, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    """The same produce on three Kafka nodes (RF=3, min.insync.replicas=2)."""
    trio = KafkaTrio(base / f"kafka{rep}")
    trio.start()
    try:
        create(trio.bootstrap, "w", args.partitions, 3)
        r_leaders = leaders(trio.bootstrap, "w")
        settle(trio.bootstrap, "w", args.partitions)
        split0 = [b.cpu_split() for b in trio.brokers]
        r = perf(trio.bootstrap, "w", args)
        add_cpu(r, split0, trio.brokers)
        r["leaders"] = r_leaders
        r["p99_ms"] = r.get("latency_ms", {}).get("p99", 0.0)
        r["broker_peak_rss_mb"] = [round(b.peak_rss_mb()) for b in trio.brokers]
        return r
    finally:
        trio.stop()


def fresh_start(base: Path, kind: str, rep: int) -> None:
    """Each run starts from the same state: the segments of the run just measured are deleted and
    written out (sync) before the next. Left in place, five reps' ~6 GB of dirty pages put the
    kernel's writeback on the later reps' clock (the last rep of a run used 2.4-2.9 CPU s against
    1.1-1.2 for the others, and its single broker 0.6-0.9 against 0.2)."""
    dirs = {"single": [base / f"single{rep}"], "kafka": [base / f"kafka{rep}"]}.get(
        kind, list(base.glob(f"cluster{rep}-b*")))
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    os.sync()


@contextlib.contextmanager
def profiled(brokers: list[BenchBroker], args: argparse.Namespace, tag: str) -> Iterator[None]:
    """py-spy on every broker while the body runs (``--profile DIR``), else nothing."""
    if not args.profile:
        yield
        return
    args.profile.mkdir(parents=True, exist_ok=True)
    pyspy = os.environ.get("PY_SPY") or shutil.which("py-spy") or "py-spy"
    spies = [subprocess.Popen([pyspy, "record", "--pid", str(b.pid), "--rate", "200", "--format", "speedscope",
                               "--output", str(args.profile / f"{tag}-b{i}.json")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i, b in enumerate(brokers, 1)]
    time.sleep(1.0)  # py-spy attached
    try:
        yield
    finally:
        for s in spies:
            s.send_signal(signal.SIGINT)
        for s in spies:
            s.wait(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--client", choices=["c", "python", "kafka-perf"], default="c")
    ap.add_argument("--peer", choices=["kafka"], default=None,
                    help="three Odradek brokers against three Kafka nodes (instead of against one Odradek broker)")
    ap.add_argument("--rate", type=int, default=None, help="producer messages/s (C client)")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy every broker into this directory")
    args = ap.parse_args(argv)
    args.binary = rdkafka_perf.ensure_built() if args.client == "c" else None
    base = Path(tempfile.mkdtemp(prefix="odradek-cluster-bench-"))
    zk = Ensemble(base / "zk", 1).start()
    kinds = ("cluster", "kafka") if args.peer == "kafka" else ("single", "cluster")
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    try:
        for rep in range(args.reps):
            # with a peer the two clusters alternate: Odradek first in odd repetitions, Kafka in even ones
            for kind in kinds if args.peer is None or rep % 2 == 0 else tuple(reversed(kinds)):
                try:
                    if kind == "single":
                        r = run_single(base, args, rep)
                    elif kind == "cluster":
                        r = run_cluster(base, zk, args, rep)
                    else:
                        r = run_kafka(base, args, rep)
                except Exception as e:  # recorded; the other runs go on
                    r = {"error": f"{type(e).__name__}: {e}"}
                fresh_start(base, kind, rep)
                results[kind].append(r)
                if "error" in r:
                    r["error"] = f"{r['error']} {r.get('stdout_tail', '')[-300:]!r}"
                print(f"rep {rep + 1} {kind:7s}: " + (r.get("error") or
                      f"{r.get('mb_per_sec', 0):8.1f} MB/s {r.get('records_per_sec', 0):10,.0f} rec/s "
                      f"p99 {r.get('p99_ms', 0):7.1f} ms  broker CPU {r['broker_cpu_s']:.1f} s"
                      f" (kernel {r['broker_kernel_s']:.1f})"
                      + (f"  peak RSS MB {r['broker_peak_rss_mb']}" if "broker_peak_rss_mb" in r else "")
                      + (f"  leaders {sorted(r['leaders'].values())}" if "leaders" in r else "")), flush=True)
    finally:
        zk.stop()
        shutil.rmtree(base, ignore_errors=True)  # GBs of segments per run

    def med(kind: str, key: str) -> float | None:
        vals = [float(r[key]) for r in results[kind] if key in r and "error" not in r]
        return statistics.median(vals) if vals else None

    rate = f", {args.rate:,} msg/s" if args.rate else ""
    print(f"\n{args.client} client, acks=all, {args.records:,} x {args.record_size} B{rate}, {args.partitions} "
          f"partitions; medians of {args.reps}")
    print(f"{'':16s}{'MB/s':>10s}{'rec/s':>12s}{'p99 ms':>10s}{'broker CPU s':>14s}{'kernel s':>10s}"
          "   MB/s of each rep")
    labels = {"single": "Odradek 1", "cluster": "Odradek 3 RF=3", "kafka": "Kafka 3 RF=3"}
    for kind in kinds:
        vals = [med(kind, k) for k in ("mb_per_sec", "records_per_sec", "p99_ms", "broker_cpu_s", "broker_kernel_s")]
        each = " ".join(f"{r['mb_per_sec']:.1f}" if "error" not in r and "mb_per_sec" in r else "-"
                        for r in results[kind])
        print(f"{labels[kind]:16s}" + "".join(f"{v:>{w}.1f}" if v is not None else f"{'-':>{w}}"
                                             for v, w in zip(vals, (10, 12, 10, 14, 10), strict=True)) + f"   {each}")
    if args.peer == "kafka":
        for key, label in (("mb_per_sec", "MB/s"), ("p99_ms", "p99 ms"), ("broker_cpu_s", "broker CPU s")):
            a, b = med("cluster", key), med("kafka", key)
            print(f"ratio Odradek/Kafka {label}: {a / b:.2f}" if a is not None and b else
                  f"ratio Odradek/Kafka {label}: n/a")
    else:
        a, b = med("cluster", "mb_per_sec"), med("single", "mb_per_sec")
        if a and b:
            print(f"ratio cluster/single MB/s: {a / b:.2f}")
    return 1 if any("error" in r for rs in results.values() for r in rs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
