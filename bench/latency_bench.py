"""Latency under load (W4 with librdkafka's C perf tool): end-to-end latency of 1 KB records produced
acks=all at a fixed rate, on one broker and on three brokers over ZooKeeper (RF=3,
min.insync.replicas=2), with the broker's share from its RequestMetrics.

    python bench/latency_bench.py [--rates 1000,102400] [--seconds 10] [--setups single,cluster]
                                  [--partitions 6] [--record-size 1024] [--linger-ms 1]
                                  [--fetch-wait-max-ms 100] [--tick-us 1000] [--producer-nice N]
                                  [--json FILE] [--profile DIR]

Per setup and rate, on fresh brokers (each with ``http.listeners`` on a free port):

* a consumer, ``rdkafka_performance -C -l -A FILE -o end -c N`` over every partition, starts first and is
  waited for until the broker has answered its fetches;
* a producer, our ``lat_producer -r RATE -a all -s SIZE -W PARTITIONS`` (bench/lat_producer.c,
  bench/paced_producer.py), paced in 1 ms ticks (clock_nanosleep to each tick's absolute time, the
  messages due, ``rd_kafka_poll(rk, 0)``; it sleeps between ticks), writes ``LATENCY:<wall clock µs>``
  at the start of each payload (the record stays SIZE bytes) after one untimed warm-up record per
  partition;
* the consumer's ``-l`` reads that timestamp back from every record it receives and writes
  ``now - timestamp`` (µs) per record to FILE: produce call to consumer receipt, i.e. end-to-end
  latency including the producer's linger and the consumer's fetch wait. Producer and consumer share
  the machine's clock.

Reported: the rate reached (produce calls over the producing time) and how far the producer fell
behind its schedule at worst (descheduled, or blocked on a full local queue: librdkafka's
queue.buffering.max.messages, 100,000, fills when acknowledgements lag a second at 100,000 msg/s;
``queue full xN`` counts the 1 ms waits for room in it), e2e p50/p99/p99.9/max, the producer's acks=all
produce-to-acknowledgement p99 (from its delivery reports), CPU seconds of the brokers (and
how many of them the kernel spent for them: system time), the producer and the consumer (with the run's length and the machine's
one-minute load average: other work on the machine shows up in every latency), and for
Produce, FetchConsumer and FetchFollower each phase of Kafka's RequestMetrics (request queue, local,
remote, response queue, response send, total: p50/p99/p99.9 over the broker's last minute, scraped
after the run; the worst broker for the cluster) with the request count of the run (after - before).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paced_producer  # noqa: E402
import rdkafka_perf  # noqa: E402
from brokers import OdradekBroker, cpu_delta, free_port  # noqa: E402
from c_e2e import Consumer, e2e_summary  # noqa: E402
from cluster_bench import create, profiled  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from odradek.devcluster.zookeeper import Ensemble  # noqa: E402

PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems",
          "totaltimems")
REQUESTS = ("Produce", "FetchConsumer", "FetchFollower")
QUANTILES = ("0.50", "0.99", "0.999")
SAMPLE = re.compile(r'^(kafka_network_requestmetrics_\w+?)\{([^}]*)\}\s+(\S+)$')


def scrape(port: int) -> dict[tuple[str, str, str], float]:
    """(metric, request, quantile or '') -> value of the RequestMetrics samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return parse_metrics(r.read().decode())


def parse_metrics(text: str) -> dict[tuple[str, str, str], float]:
    """The RequestMetrics samples of Prometheus' text format."""
    out: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = dict(kv.split("=", 1) for kv in m.group(2).split(","))
        labels = {k: v.strip('"') for k, v in labels.items()}
        out[(m.group(1), labels.get("request", ""), labels.get("quantile", ""))] = float(m.group(3))
    return out


def broker_share(before: list[dict[tuple[str, str, str], float]],
                 after: list[dict[tuple[str, str, str], float]]) -> dict[str, Any]:
    """Per request: the run's request count (summed over brokers) and each phase's quantiles (worst broker)."""
    share: dict[str, Any] = {}
    for req in REQUESTS:
        key = ("kafka_network_requestmetrics_totaltimems_count", req, "")
        n = sum(a.get(key, 0.0) - b.get(key, 0.0) for a, b in zip(after, before, strict=True))
        if n <= 0:
            continue
        phases = {}
        for phase in PHASES:
            name = f"kafka_network_requestmetrics_{phase}"
            phases[phase] = {q: max(a.get((name, req, q), 0.0) for a in after) for q in QUANTILES}
        share[req] = {"requests": int(n), **phases}
    return share


def broker_part_of_ack(share: dict[str, Any], ack_ms: dict[str, float]) -> dict[str, float]:
    """Per quantile, the broker's Produce TotalTimeMs (worst broker) over the producer's
    produce-to-acknowledgement latency: the part of what the client waited that the broker accounts
    for, from reading the request to writing the answer (the rest is the client's own queues and
    threads, the sockets, and the machine's scheduler)."""
    produce = share.get("Produce")
    if not produce:
        return {}
    out = {}
    for q, key in zip(QUANTILES, ("p50", "p99", "p999"), strict=True):
        ack = ack_ms.get(key)
        if ack:
            out[key] = round(produce["totaltimems"][q] / ack, 3)
    return out


def fetching(ports: list[int], seen: float) -> float:
    """FetchConsumer requests answered so far, over the brokers."""
    return sum(s.get(("kafka_network_requestmetrics_totaltimems_count", "FetchConsumer", ""), 0.0)
               for s in (scrape(p) for p in ports)) - seen


def measure(brokers: list[OdradekBroker], http_ports: list[int], args: argparse.Namespace, rate: int,
            workdir: Path) -> dict[str, Any]:
    bootstrap = ",".join(b.bootstrap for b in brokers)
    rf = 3 if len(brokers) == 3 else 1
    deadline = time.monotonic() + 60
    while True:  # every broker registered
        try:
            create(bootstrap, "w", args.partitions, rf)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    records = rate * args.seconds
    # the producer's warm-up sends one untimed record per partition first: the consumer counts them too
    consumer = Consumer(args.binary, bootstrap, "w", args.partitions, records + args.partitions, workdir,
                        {"fetch.wait.max.ms": str(args.fetch_wait_max_ms)})
    base = fetching(http_ports, 0.0)
    deadline = time.monotonic() + 30
    while fetching(http_ports, base) < 2 * args.partitions and time.monotonic() < deadline:
        time.sleep(0.2)  # the consumer has fetched (offset end resolved) on every leader
    time.sleep(1.0)
    before = [scrape(p) for p in http_ports]
    split0 = [b.cpu_split() for b in brokers]
    with profiled(brokers, args, f"{len(brokers)}b-{rate}"):
        produced, producer_cpu = paced_producer.run(
            args.producer, bootstrap, "w", records, args.record_size, rate, acks="all", tick_us=args.tick_us,
            warmup_partitions=args.partitions, props={"linger.ms": str(args.linger_ms)},
            timeout_s=args.seconds * 20 + 60, nice=args.producer_nice)
    consumer.wait(60)
    user, kernel = cpu_delta(split0, [b.cpu_split() for b in brokers])
    after = [scrape(p) for p in http_ports]
    e2e = e2e_summary(consumer.latencies_us())
    result: dict[str, Any] = {
        "rate_asked": rate, "records": records, "rate_reached": produced.get("records_per_sec"),
        "mb_per_sec": produced.get("mb_per_sec"), "behind_max_ms": produced.get("behind_max_ms"),
        "producer_queue_full": produced.get("queue_full"), "e2e_ms": e2e,
        "produce_ack_ms": produced.get("ack_ms", {}), "broker_cpu_s": round(user + kernel, 2),
        "broker_kernel_cpu_s": round(kernel, 2),
        "producer_cpu_s": round(producer_cpu, 2), "consumer_cpu_s": round(consumer.cpu_s, 2),
        "elapsed_s": produced.get("elapsed_s"), "producer_nice": args.producer_nice,
        "loadavg_1m": round(os.getloadavg()[0], 2), "broker_share": broker_share(before, after),
        "producer_command": produced.get("command"), "consumer_command": consumer.command,
    }
    result["broker_part_of_ack"] = broker_part_of_ack(result["broker_share"], result["produce_ack_ms"])
    if "error" in produced:
        result["error"] = f"producer: {produced['error']} {produced.get('stderr_tail', '')[-300:]}"
    elif consumer.exit_code != 0 or e2e.get("records", 0) < records:
        result["error"] = f"consumer exit {consumer.exit_code}, {e2e.get('records', 0)} of {records} latencies"
    return result


def http_override(port: int) -> dict[str, str]:
    return {"http.listeners": f"http://127.0.0.1:{port}"}


def run_single(base: Path, args: argparse.Namespace, rate: int, tag: str) -> dict[str, Any]:
    port = free_port()
    b = OdradekBroker(base / tag, {"offsets.topic.replication.factor": "1", **http_override(port)})
    b.start()
    try:
        return measure([b], [port], args, rate, b.workdir)
    finally:
        b.stop()


def run_cluster(base: Path, zk: Ensemble, args: argparse.Namespace, rate: int, tag: str) -> dict[str, Any]:
    chroot = f"/{tag}"
    kz = KazooClient(hosts=zk.connect)
    kz.start(timeout=10)
    kz.ensure_path(chroot)
    kz.stop()
    kz.close()
    ports = [free_port() for _ in range(3)]
    brokers = [OdradekBroker(base / f"{tag}-b{i}", {
        "broker.id": str(i), "zookeeper.connect": zk.connect + chroot, "offsets.topic.replication.factor": "3",
        **http_override(ports[i - 1])}) for i in (1, 2, 3)]
    for b in brokers:
        b.start()
    try:
        return measure(brokers, ports, args, rate, brokers[0].workdir)
    finally:
        for b in brokers:
            b.stop()


def line(setup: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{setup:8s} {r['rate_asked']:>8,} msg/s: {r['error']}"
    e = r["e2e_ms"]
    return (f"{setup:8s} {r['rate_asked']:>8,} asked {r['rate_reached'] or 0:>10,.0f} msg/s {r['mb_per_sec'] or 0:7.1f} MB/s"
            f"  e2e p50 {e['p50']:6.2f} p99 {e['p99']:6.2f} p99.9 {e['p999']:6.2f} max {e['max']:7.2f} ms"
            f"  ack p99 {r['produce_ack_ms'].get('p99', 0):6.2f} ms (behind {r['behind_max_ms'] or 0:.1f} ms"
            f"{', queue full x' + str(r['producer_queue_full']) if r.get('producer_queue_full') else ''})"
            f"  CPU s broker {r['broker_cpu_s']:.1f} (kernel {r.get('broker_kernel_cpu_s', 0):.1f}) producer {r['producer_cpu_s']:.1f} consumer {r['consumer_cpu_s']:.1f}"
            f" in {r['elapsed_s'] or 0:.1f} s, load {r['loadavg_1m']:.1f}")


def share_lines(r: dict[str, Any]) -> list[str]:
    out = []
    part = r.get("broker_part_of_ack") or {}
    if part:
        out.append("    broker's Produce total / producer's ack latency: "
                   + "  ".join(f"{k} {v:.0%}" for k, v in part.items()))
    for req, s in r.get("broker_share", {}).items():
        cells = "  ".join(f"{ph.replace('timems', '')} {'/'.join(f'{s[ph][q]:g}' for q in QUANTILES)}"
                          for ph in PHASES)
        out.append(f"    {req:13s} n={s['requests']:<7d} {cells}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,102400", help="producer messages/s, comma-separated")
    ap.add_argument("--seconds", type=int, default=10, help="records = rate x seconds")
    ap.add_argument("--setups", default="single,cluster")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--linger-ms", type=int, default=1)
    ap.add_argument("--fetch-wait-max-ms", type=int, default=100)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tick-us", type=int, default=1000, help="the producer's pacing tick (µs)")
    ap.add_argument("--producer-nice", type=int, default=0, help="the producer's niceness")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--profile", type=Path, default=None, help="py-spy every broker into this directory")
    args = ap.parse_args(argv)
    args.binary = rdkafka_perf.ensure_built()
    args.producer = paced_producer.ensure_built()
    rates = [int(x) for x in args.rates.split(",")]
    setups = args.setups.split(",")
    base = Path(tempfile.mkdtemp(prefix="odradek-latency-bench-"))
    zk = Ensemble(base / "zk", 1).start() if "cluster" in setups else None
    results: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            for rate in rates:
                for setup in setups:
                    tag = f"{setup}-{rate}-{rep}"
                    if setup == "cluster":
                        assert zk is not None
                        r = run_cluster(base, zk, args, rate, tag)
                    else:
                        r = run_single(base, args, rate, tag)
                    r["setup"], r["rep"] = setup, rep
                    # the next run starts from the same state: this one's segments deleted and written out
                    for d in [base / tag, *base.glob(f"{tag}-b*")]:
                        shutil.rmtree(d, ignore_errors=True)
                    os.sync()
                    results.append(r)
                    print(line(setup, r), flush=True)
                    for s in share_lines(r):
                        print(s, flush=True)
    finally:
        if zk is not None:
            zk.stop()
        shutil.rmtree(base, ignore_errors=True)  # GBs of segments per run
    print(f"\n{args.record_size} B records, acks=all, {args.partitions} partitions, linger.ms={args.linger_ms}, "
          f"fetch.wait.max.ms={args.fetch_wait_max_ms}; broker phases p50/p99/p99.9 ms (worst broker)")
    for setup in setups:
        for rate in rates:
            ok = [r for r in results if r["setup"] == setup and r["rate_asked"] == rate and "error" not in r]
            if ok:
                p99 = statistics.median(r["e2e_ms"]["p99"] for r in ok)
                p999 = statistics.median(r["e2e_ms"]["p999"] for r in ok)
                print(f"{setup:8s} {rate:>8,} msg/s: median e2e p99 {p99:.2f} ms, p99.9 {p999:.2f} ms over {len(ok)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
