"""Latency under load (W4 with librdkafka's C perf tool): end-to-end latency of 1 KB records produced
acks=all at a fixed rate, on one broker and on three brokers over ZooKeeper (RF=3,
min.insync.replicas=2), with the broker's share from its RequestMetrics.

    python bench/latency_bench.py [--rates 1000,102400] [--seconds 10] [--warmup-s 10] [--setups single,cluster]
                                  [--partitions 6] [--record-size 1024] [--linger-ms 1]
                                  [--fetch-wait-max-ms 100] [--tick-us 1000] [--producer-nice N]
                                  [--peer kafka] [--search-p99-ms 50 [--search-start 5000]
                                  [--search-max 200000] [--search-steps 3]]
                                  [--reps 1] [--json FILE] [--profile DIR]

``--peer kafka`` runs every setup and rate on Apache Kafka 4.4 too, in the same run with the same
clients and settings (bench/brokers.py on peers/kafka_peer.py: ``single`` is one combined KRaft node,
``cluster`` three combined nodes that are a three-voter quorum, the topic RF=3 with
min.insync.replicas=2; heap -Xmx1G -Xms1G each, as Kafka ships it); the brokers alternate per
repetition (Odradek first in odd repetitions, Kafka first in even ones). ``--search-p99-ms 50`` first
looks, per setup, for the highest rate at which Kafka's e2e p99 stays under 50 ms (from
``--search-start`` doubling up to ``--search-max`` until p99 reaches the limit, then ``--search-steps``
bisections, each a run on a fresh Kafka), then measures both brokers at that rate as at the fixed rates.
Kafka's RequestMetrics are JMX MBeans, not served over HTTP: its broker share is printed as n/a, and
the wait for the consumer's first fetches (read from Odradek's metrics) is a fixed
``--consumer-settle-s`` for Kafka instead.

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
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paced_producer  # noqa: E402
import rdkafka_perf  # noqa: E402
from brokers import BenchBroker, KafkaBroker, KafkaTrio, OdradekBroker, cpu_delta, free_port  # noqa: E402
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


def wait_consumer(http_ports: list[int], partitions: int, settle_s: float) -> None:
    """Until the consumer has fetched (its end offsets resolved) on every leader: Odradek's FetchConsumer
    count, then 1 s; a broker without the metrics endpoint (Kafka) gets ``settle_s``."""
    if not http_ports:
        time.sleep(settle_s)
        return
    base = fetching(http_ports, 0.0)
    deadline = time.monotonic() + 30
    while fetching(http_ports, base) < 2 * partitions and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)


def measure(brokers: list[BenchBroker], http_ports: list[int], args: argparse.Namespace, rate: int,
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
    for b in brokers:  # every replica's log made (Kafka lists a leader before it has made the log)
        b.wait_partitions_on_disk("w", args.partitions, timeout=120)
    warmup: dict[str, Any] | None = None
    if args.warmup_s > 0:
        # the same produce and consume at the same rate, not measured: a JVM broker compiles its hot paths
        # in its first seconds (Kafka's e2e p99 of a 30 s run from a cold start was over 1 s here)
        records = rate * args.warmup_s
        consumer = Consumer(args.binary, bootstrap, "w", args.partitions, records + args.partitions, workdir,
                            {"fetch.wait.max.ms": str(args.fetch_wait_max_ms)})
        wait_consumer(http_ports, args.partitions, args.consumer_settle_s)
        produced, _ = paced_producer.run(
            args.producer, bootstrap, "w", records, args.record_size, rate, acks="all", tick_us=args.tick_us,
            warmup_partitions=args.partitions, props={"linger.ms": str(args.linger_ms)},
            timeout_s=args.warmup_s * 20 + 60, nice=args.producer_nice)
        consumer.wait(60, grace_s=10)
        warmup = {"seconds": args.warmup_s, "e2e_ms": e2e_summary(consumer.latencies_us()),
                  "error": produced.get("error")}
    records = rate * args.seconds
    # the producer's warm-up sends one untimed record per partition first: the consumer counts them too
    consumer = Consumer(args.binary, bootstrap, "w", args.partitions, records + args.partitions, workdir,
                        {"fetch.wait.max.ms": str(args.fetch_wait_max_ms)})
    wait_consumer(http_ports, args.partitions, args.consumer_settle_s)
    before = [scrape(p) for p in http_ports]
    split0 = [b.cpu_split() for b in brokers]
    spied = profiled(brokers, args, f"{len(brokers)}b-{rate}") if http_ports else contextlib.nullcontext()
    with spied:
        produced, producer_cpu = paced_producer.run(
            args.producer, bootstrap, "w", records, args.record_size, rate, acks="all", tick_us=args.tick_us,
            warmup_partitions=args.partitions, props={"linger.ms": str(args.linger_ms)},
            timeout_s=args.seconds * 20 + 60, nice=args.producer_nice)
    # a consumer that missed a warm-up record (started late) is stopped 10 s after the producer is done
    consumer.wait(60, grace_s=10)
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
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "broker_share": broker_share(before, after) if http_ports else None,
        "producer_command": produced.get("command"), "consumer_command": consumer.command,
        "warmup": warmup,
    }
    result["broker_part_of_ack"] = broker_part_of_ack(result["broker_share"] or {}, result["produce_ack_ms"])
    if "error" in produced:
        result["error"] = f"producer: {produced['error']} {produced.get('stderr_tail', '')[-300:]}"
    elif consumer.exit_code != 0 and not consumer.stopped_early or e2e.get("records", 0) < records:
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
        return measure(list(brokers), ports, args, rate, brokers[0].workdir)
    finally:
        for b in brokers:
            b.stop()


def run_kafka_single(base: Path, args: argparse.Namespace, rate: int, tag: str) -> dict[str, Any]:
    """One combined Kafka node (KRaft broker and controller in one JVM)."""
    b = KafkaBroker(base / tag)
    b.start()
    try:
        return measure([b], [], args, rate, b.workdir)
    finally:
        b.stop()


def run_kafka_cluster(base: Path, args: argparse.Namespace, rate: int, tag: str) -> dict[str, Any]:
    """Three Kafka nodes, a three-voter quorum; the topic RF=3, min.insync.replicas=2."""
    trio = KafkaTrio(base / tag)
    trio.start()
    try:
        return measure(list(trio.brokers), [], args, rate, trio.brokers[0].workdir)
    finally:
        trio.stop()


def run_one(base: Path, zk: Ensemble | None, args: argparse.Namespace, setup: str, kind: str, rate: int,
            tag: str) -> dict[str, Any]:
    """One measurement on fresh brokers; its directories deleted (and written out) afterwards, so the next
    run starts from the same state."""
    try:
        if kind == "kafka":
            r = (run_kafka_cluster if setup == "cluster" else run_kafka_single)(base, args, rate, tag)
        elif setup == "cluster":
            assert zk is not None
            r = run_cluster(base, zk, args, rate, tag)
        else:
            r = run_single(base, args, rate, tag)
    except Exception as e:  # recorded; the other runs go on
        r = {"rate_asked": rate, "error": f"{type(e).__name__}: {e}"}
    for d in [base / tag, *base.glob(f"{tag}-b*")]:
        shutil.rmtree(d, ignore_errors=True)
    os.sync()
    r["setup"], r["broker"] = setup, kind
    return r


def line(setup: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{setup:16s} {r['rate_asked']:>8,} msg/s: {r['error']}"
    e = r["e2e_ms"]
    return (f"{setup:16s} {r['rate_asked']:>8,} asked {r['rate_reached'] or 0:>10,.0f} msg/s {r['mb_per_sec'] or 0:7.1f} MB/s"
            f"  e2e p50 {e['p50']:6.2f} p99 {e['p99']:6.2f} p99.9 {e['p999']:6.2f} max {e['max']:7.2f} ms"
            f"  ack p99 {r['produce_ack_ms'].get('p99', 0):6.2f} ms (behind {r['behind_max_ms'] or 0:.1f} ms"
            f"{', queue full x' + str(r['producer_queue_full']) if r.get('producer_queue_full') else ''})"
            f"  CPU s broker {r['broker_cpu_s']:.1f} (kernel {r.get('broker_kernel_cpu_s', 0):.1f}) producer {r['producer_cpu_s']:.1f} consumer {r['consumer_cpu_s']:.1f}"
            f" in {r['elapsed_s'] or 0:.1f} s, load {r['loadavg_1m']:.1f}"
            + (f"; after a {w['seconds']} s warm-up (its p99 {w['e2e_ms'].get('p99', 0):.2f} ms)"
               if (w := r.get("warmup")) and w.get("e2e_ms") else ""))


def share_lines(r: dict[str, Any]) -> list[str]:
    if "broker_share" in r and r["broker_share"] is None:
        return ["    broker's RequestMetrics: n/a (Kafka's are JMX MBeans, not served over HTTP)"]
    out = []
    part = r.get("broker_part_of_ack") or {}
    if part:
        out.append("    broker's Produce total / producer's ack latency: "
                   + "  ".join(f"{k} {v:.0%}" for k, v in part.items()))
    for req, s in (r.get("broker_share") or {}).items():
        cells = "  ".join(f"{ph.replace('timems', '')} {'/'.join(f'{s[ph][q]:g}' for q in QUANTILES)}"
                          for ph in PHASES)
        out.append(f"    {req:13s} n={s['requests']:<7d} {cells}")
    return out


def search_rate(p99_at: Callable[[int], float | None], start: int, limit_ms: float, max_rate: int,
                steps: int) -> tuple[int | None, list[tuple[int, float | None]]]:
    """The highest rate (msg/s) at which ``p99_at(rate)`` (a run's e2e p99 in ms; None for a failed run)
    stays under ``limit_ms``: from ``start`` doubling until the limit is reached or ``max_rate`` run,
    halving instead when ``start`` is already over it, then ``steps`` bisections between the highest
    rate under the limit and the lowest over it (to 1 % of the rate). Returns (that rate, or None when
    no rate tried stayed under it; every (rate, p99) tried, in order)."""
    tried: list[tuple[int, float | None]] = []

    def ok(rate: int) -> bool:
        p99 = p99_at(rate)
        tried.append((rate, p99))
        return p99 is not None and p99 < limit_ms

    good: int | None = None
    bad: int | None = None
    rate = start
    if ok(rate):
        good = rate
        while good < max_rate:
            rate = min(good * 2, max_rate)
            if not ok(rate):
                bad = rate
                break
            good = rate
    else:
        bad = rate
        for _ in range(steps):
            rate = max(1, bad // 2)
            if ok(rate):
                good = rate
                break
            bad = rate
        else:
            return None, tried
    for _ in range(steps):
        if good is None or bad is None or bad - good <= max(1, good // 100):
            break
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good, tried


def compare_lines(results: list[dict[str, Any]], setups: list[str], kinds: list[str]) -> list[str]:
    """Per setup and rate: the median e2e p99 and p99.9 of each broker over its runs without error, and
    with two brokers the ratio Odradek / Kafka of those medians (the issue's target: <= 1.0)."""
    out = []
    rates = sorted({int(r["rate_asked"]) for r in results if r.get("phase", "measure") == "measure"})
    for setup in setups:
        for rate in rates:
            med: dict[str, tuple[float, float, int]] = {}
            for kind in kinds:
                ok = [r for r in results if r["setup"] == setup and r.get("broker", "odradek") == kind
                      and r["rate_asked"] == rate and r.get("phase", "measure") == "measure" and "error" not in r]
                if ok:
                    med[kind] = (statistics.median(r["e2e_ms"]["p99"] for r in ok),
                                 statistics.median(r["e2e_ms"]["p999"] for r in ok), len(ok))
            if not med:
                continue
            cells = "; ".join(f"{kind} p99 {p99:.2f} ms, p99.9 {p999:.2f} ms over {n}"
                              for kind, (p99, p999, n) in med.items())
            if len(kinds) == 2:
                a, b = med.get(kinds[0]), med.get(kinds[1])
                if a and b and b[0] and b[1]:
                    cells += f"; ratio O/K p99 {a[0] / b[0]:.2f}, p99.9 {a[1] / b[1]:.2f}"
                else:
                    cells += "; ratio O/K n/a"
            out.append(f"{setup:8s} {rate:>8,} msg/s: median e2e {cells}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,102400", help="producer messages/s, comma-separated")
    ap.add_argument("--seconds", type=int, default=10, help="records = rate x seconds")
    ap.add_argument("--warmup-s", type=int, default=10,
                    help="before each measured run, the same produce and consume for this long on the same fresh "
                         "broker, not measured (0: none)")
    ap.add_argument("--setups", default="single,cluster")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--linger-ms", type=int, default=1)
    ap.add_argument("--fetch-wait-max-ms", type=int, default=100)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tick-us", type=int, default=1000, help="the producer's pacing tick (µs)")
    ap.add_argument("--producer-nice", type=int, default=0, help="the producer's niceness")
    ap.add_argument("--peer", choices=["kafka"], default=None, help="Apache Kafka 4.4 beside Odradek, same run")
    ap.add_argument("--consumer-settle-s", type=float, default=3.0,
                    help="Kafka: seconds between the consumer's start and the producer's (no metrics to ask)")
    ap.add_argument("--search-p99-ms", type=float, default=None,
                    help="with --peer kafka: also find the highest rate at which Kafka's p99 stays under this")
    ap.add_argument("--search-start", type=int, default=5000)
    ap.add_argument("--search-max", type=int, default=200_000)
    ap.add_argument("--search-steps", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--profile", type=Path, default=None, help="py-spy every Odradek broker into this directory")
    args = ap.parse_args(argv)
    if args.search_p99_ms is not None and args.peer != "kafka":
        ap.error("--search-p99-ms needs --peer kafka (the rate is searched on Kafka)")
    args.binary = rdkafka_perf.ensure_built()
    args.producer = paced_producer.ensure_built()
    rates = [int(x) for x in args.rates.split(",") if x]
    setups = args.setups.split(",")
    kinds = ["odradek", "kafka"] if args.peer == "kafka" else ["odradek"]
    base = Path(tempfile.mkdtemp(prefix="odradek-latency-bench-"))
    zk = Ensemble(base / "zk", 1).start() if "cluster" in setups else None
    results: list[dict[str, Any]] = []
    plan = [(setup, rate) for rate in rates for setup in setups]
    try:
        if args.search_p99_ms is not None:
            for setup in setups:
                def p99_at(rate: int, setup: str = setup) -> float | None:
                    r = run_one(base, zk, args, setup, "kafka", rate, f"search-{setup}-{rate}")
                    r["phase"] = "search"
                    results.append(r)
                    print(line(f"search {setup}/kafka", r), flush=True)
                    return None if "error" in r else float(r["e2e_ms"]["p99"])

                found, tried = search_rate(p99_at, args.search_start, args.search_p99_ms, args.search_max,
                                           args.search_steps)
                print(f"{setup}: highest rate with Kafka's p99 < {args.search_p99_ms:g} ms: "
                      + (f"{found:,} msg/s" if found else "none") + " (tried "
                      + ", ".join(f"{r:,}: {'error' if p is None else f'{p:.1f} ms'}" for r, p in tried) + ")",
                      flush=True)
                if found and (setup, found) not in plan:
                    plan.append((setup, found))
        for rep in range(args.reps):
            for setup, rate in plan:
                # with a peer the brokers alternate: Odradek first in odd repetitions, Kafka in even ones
                for kind in kinds if rep % 2 == 0 else list(reversed(kinds)):
                    r = run_one(base, zk, args, setup, kind, rate, f"{setup}-{kind}-{rate}-{rep}")
                    r["rep"], r["phase"] = rep, "measure"
                    results.append(r)
                    print(line(f"{setup}/{kind}", r), flush=True)
                    for s in share_lines(r):
                        print(s, flush=True)
    finally:
        if zk is not None:
            zk.stop()
        shutil.rmtree(base, ignore_errors=True)  # GBs of segments per run
    print(f"\n{args.record_size} B records, acks=all, {args.partitions} partitions, linger.ms={args.linger_ms}, "
          f"fetch.wait.max.ms={args.fetch_wait_max_ms}; broker phases p50/p99/p99.9 ms (worst broker)")
    for text in compare_lines(results, setups, kinds):
        print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all("error" not in r for r in results if r.get("phase") == "measure") else 1

if __name__ == "__main__":
    raise SystemExit(main())
