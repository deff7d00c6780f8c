"""Side-by-side broker benchmark: Odradek and a peer (--peer kafka: Apache Kafka 4.4; --peer tansu:
Tansu 0.6) on the standard workloads, both brokers' figures from one run.

    python bench/run.py [--peer kafka|tansu] [--client python|c|kafka-perf|both|all|c,kafka-perf]
                        [--workloads W1,W2,...] [--repeat 3] [--quick] [--w6-gb 5] [--json-out results.json]

Every workload runs in a fresh broker (W3 consumes what W2 wrote, on W2's broker), as a subprocess
(the load generator), started SETTLE_S after the broker answers; with a peer, the brokers alternate
per repetition: for each workload (or W2+W3 pair) in turn, Odradek then the peer in odd repetitions,
the peer then Odradek in even ones, so neither always runs first (or second) after the other's
session. For each run the broker's CPU seconds (utime+stime from /proc/<pid>/stat) and peak RSS
(VmHWM, reset per workload) are recorded; loopback TCP bandwidth is measured in the same run. The
tables show each repetition, the medians over the repetitions, the ratio Odradek/peer, and the
issue's targets.

The peer Kafka (bench/brokers.py's KafkaBroker, on peers/kafka_peer.py: the jars from Maven Central,
fetched once) is one combined KRaft node, broker and controller in one JVM with Kafka's default heap
(-Xmx1G -Xms1G); its CPU seconds and peak RSS are its JVM's. Both brokers keep their data on disk
under the same parent directory (--dir, default the system temp), written through the same page
cache, with the same flush policy (Kafka's default, also Odradek's: no fsync per write). The page
cache is treated alike: each session's broker directory is deleted when it ends (its cached and dirty
pages go with it; --keep keeps them) and ``sync`` runs before the next session starts, whichever
broker it is; nothing else is dropped for either.

A workload's topic is created before its clock starts, and the clock waits until every partition has
its log on disk (Kafka lists a new partition's leader before it has made its log: 1,000 partitions
took it 10-20 s more here). Every session's broker is a fresh process, so Kafka runs each workload
with a JVM that has just started (its JIT warming up during the first seconds of the workload), as
Odradek runs each in a fresh Python process; both get SETTLE_S after their first ApiVersions answer.

Clients (--client): ``python`` runs `odradek perf` (confluent-kafka's Python binding with a Python loop
around it); ``c`` runs librdkafka's own C perf tool, rdkafka_performance (built from librdkafka 2.15.0's
source by bench/build_rdkafka.sh into the ignored bench/.rdkafka; bench/rdkafka_perf.py parses its
summary into the same result), so the broker rather than a Python client loop is measured;
``kafka-perf`` runs Kafka's own perf tools (Java: kafka-producer-perf-test, kafka-consumer-perf-test,
kafka-e2e-latency; bench/kafka_perf.py parses their output), the load generator Kafka is measured with.
The same load generator drives both brokers. Several clients (``both`` = python,c; ``all``; or a
comma-separated list such as ``c,kafka-perf``) run each workload with each client on the same broker,
one after the other, and report each (rows W2, W2/c, W2/k). W4 (end-to-end latency) with ``c`` runs
our rate-paced C producer (bench/lat_producer.c) against ``rdkafka_performance -C -l`` as the consumer
(bench/c_e2e.py), at W4's rate, acks, linger and fetch wait; with ``kafka-perf`` it runs
kafka-e2e-latency, which sends one record and waits for its consumer to receive it before the next
(serial round trips, at most 10,000 of them, not W4's paced stream; percentiles in whole ms).

Units: MB = 2**20 bytes and GB = 2**30 bytes (as Kafka's perf tools), latencies in ms.

Workloads (issue 4):
  W1  1,000,000 x 100 B, acks=1, 1 partition                       records/s
  W2  200,000 x 1 KB, acks=all, 6 partitions                        MB/s, CPU s/GB
  W3  consume W2's records (assign, from the beginning)             MB/s
  W4  e2e latency, 5,000 msg/s of 1 KB, linger.ms=5, fetch.wait.max.ms=100 (50,000 records)   p99 ms
  W5  100,000 x 1 KB over 1,000 partitions (acks=all)               MB/s, peak RSS
  W6  start time with 1,000 partitions and --w6-gb GB on disk, after a clean stop and after kill -9
      (Odradek, and Kafka with --peer kafka, its data produced through it with rdkafka_performance;
      Tansu's memory storage keeps nothing across restarts)

--quick and --scale change the record counts; the tables' titles name the counts that ran (W1 at
--scale 10: "10M x 100 B").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import c_e2e  # noqa: E402
import kafka_perf  # noqa: E402
import paced_producer  # noqa: E402
import rdkafka_perf  # noqa: E402
from brokers import BenchBroker, KafkaBroker, OdradekBroker, TansuBroker, fetch_tansu, kafka_peer  # noqa: E402
from loopback import loopback_mb_per_sec  # noqa: E402
from w6 import run_w6  # noqa: E402

MB = 1024.0 * 1024.0
GB = 1024.0 * MB
SETTLE_S = 1.0  # pause between a broker answering and its first workload (either broker)
ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6"]
METRICS_OFF = "odradek-nometrics"  # --peer: Odradek without http.listeners (no request metrics)
CLIENTS = ("python", "c", "kafka-perf")
CLIENT_ALIASES = {"both": ["python", "c"], "all": list(CLIENTS)}
# a row of the tables per workload and client: "W2" (Python client), "W2/c" (rdkafka_performance),
# "W2/k" (Kafka's perf tools)
CLIENT_SUFFIX = {"python": "", "c": "/c", "kafka-perf": "/k"}
CLIENT_TITLE = {"python": "", "c": " [C client]", "kafka-perf": " [Kafka perf tools]"}
PEER_LETTER = {"tansu": "T", "kafka": "K", METRICS_OFF: "N"}
KAFKA_E2E_MAX_RECORDS = 10_000  # kafka-e2e-latency's round trips are serial: ~2-6 ms each here


@dataclass
class Workload:
    name: str
    title: str
    mode: str  # produce | consume | e2e
    records: int
    record_size: int
    args: list[str] = field(default_factory=list)
    partitions: int = 1
    metric: str = "mb_per_sec"  # key of the perf result, dotted for nested
    unit: str = "MB/s"
    higher_is_better: bool = True
    topic_from: str | None = None  # consume the topic another workload produced


def count_label(n: int) -> str:
    """A record count as the workload titles write it: 1M, 200k, 2.5k, 10M, 100 (three significant digits)."""
    for div, unit in ((1_000_000, "M"), (1_000, "k")):
        if n >= div:
            return f"{float(f'{n / div:.3g}'):g}{unit}"
    return str(n)


def workloads(quick: bool, scale: float = 1.0) -> dict[str, Workload]:
    """The workloads at their standard sizes (``quick``: a tenth or less), record counts times ``scale``; each
    title names the record count it runs with."""

    def n(full: int, small: int) -> int:
        return max(1, int((small if quick else full) * scale))

    w1, w2, w4, w5 = n(1_000_000, 100_000), n(200_000, 20_000), n(50_000, 2_500), n(100_000, 10_000)
    return {
        "W1": Workload("W1", f"{count_label(w1)} x 100 B acks=1, 1 partition", "produce", w1, 100,
                       ["--acks", "1"], 1, "records_per_sec", "rec/s"),
        "W2": Workload("W2", f"{count_label(w2)} x 1 KB acks=all, 6 partitions", "produce", w2, 1024,
                       ["--acks", "all"], 6),
        "W3": Workload("W3", "consume W2 (assign, from beginning)", "consume", w2, 1024,
                       [], 6, topic_from="W2"),
        "W4": Workload("W4", f"e2e 5,000 msg/s x 1 KB, linger 5, fetch wait 100 ({count_label(w4)})", "e2e", w4,
                       1024, ["--throughput", "5000", "--acks", "1", "--producer-props", "linger.ms=5",
                              "--consumer-props", "fetch.wait.max.ms=100"], 1, "latency_ms.p99", "p99 ms", False),
        "W5": Workload("W5", f"{count_label(w5)} x 1 KB over 1,000 partitions, acks=all", "produce", w5, 1024,
                       ["--acks", "all"], 1000),
    }


def parse_clients(value: str) -> list[str]:
    """--client: one client, an alias (both, all) or a comma-separated list, in CLIENTS' order."""
    names: list[str] = []
    for part in value.split(","):
        part = part.strip()
        for name in CLIENT_ALIASES.get(part, [part]):
            if name not in CLIENTS:
                raise argparse.ArgumentTypeError(
                    f"unknown client {name!r}: one of {', '.join(CLIENTS)}, both, all, or a comma-separated list")
            if name not in names:
                names.append(name)
    return [c for c in CLIENTS if c in names]


def row_title(w: Workload, client: str) -> str:
    if client == "kafka-perf" and w.mode == "e2e":
        return f"e2e serial round trips x {w.record_size} B, acks=1 [kafka-e2e-latency]"
    return w.title + CLIENT_TITLE[client]


def e2e_settings(args: list[str]) -> dict[str, int]:
    """W4's rate, linger.ms and fetch.wait.max.ms from its `odradek perf e2e` arguments, for the C clients."""
    out = {"rate": 5000, "linger_ms": 5, "fetch_wait_max_ms": 500}
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--throughput":
            out["rate"] = int(value)
        elif flag in ("--producer-props", "--consumer-props"):
            for prop in value.split(","):
                k, _, v = prop.partition("=")
                if k == "linger.ms":
                    out["linger_ms"] = int(v)
                elif k == "fetch.wait.max.ms":
                    out["fetch_wait_max_ms"] = int(v)
    return out


def metric_of(result: dict[str, Any], key: str) -> float | None:
    value: Any = result
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, int | float) else None


def median(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


# ---------------------------------------------------------------------------------------------- running


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.quick: bool = args.quick
        self.defs = workloads(self.quick, args.scale)
        self.workdir = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
        self.tansu_binary: Path | None = None
        self.runs: list[dict[str, Any]] = []
        self.run_id = uuid.uuid4().hex[:6]
        self.clients: list[str] = args.client
        self.rdkafka_perf: Path | None = rdkafka_perf.ensure_built() if "c" in self.clients else None

    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def new_broker(self, kind: str, tag: str) -> BenchBroker:
        d = self.workdir / f"{tag}-{kind}"
        if kind == "odradek":
            # /metrics on (a free port: the default 9644 may be taken); the metrics-off peer has none
            return OdradekBroker(d, {"http.listeners": "http://127.0.0.1:0"})
        if kind == METRICS_OFF:
            return OdradekBroker(d, {"http.listeners": ""})
        if kind == "kafka":
            return KafkaBroker(d)
        assert self.tansu_binary is not None
        return TansuBroker(d, self.tansu_binary)

    def create_topic(self, broker: BenchBroker, topic: str, partitions: int) -> None:
        from odradek.perf.common import PerfOptions, check_reachable, ensure_topic

        opts = PerfOptions(bootstrap=broker.bootstrap, topic=topic, num_records=0, record_size=0,
                           partitions=partitions)
        t0 = time.monotonic()
        ensure_topic(check_reachable(opts), opts, timeout=120.0)
        in_metadata = time.monotonic() - t0
        broker.wait_partitions_on_disk(topic, partitions)  # both brokers: every partition's log made
        if partitions > 100:
            self.log(f"created {topic} with {partitions} partitions on {broker.kind}: leaders in metadata after "
                     f"{in_metadata:.1f} s, every log on disk after {time.monotonic() - t0:.1f} s")

    def perf_c(self, w: Workload, broker: BenchBroker, topic: str) -> tuple[dict[str, Any], float]:
        """Run rdkafka_performance for ``w``; its result in `odradek perf`'s form and its CPU seconds."""
        assert self.rdkafka_perf is not None
        acks = w.args[w.args.index("--acks") + 1] if "--acks" in w.args else "1"
        if w.mode == "e2e":
            e2e = e2e_settings(w.args)
            return c_e2e.run_w4(self.rdkafka_perf, paced_producer.ensure_built(), broker.bootstrap, topic, w.records,
                                w.record_size, e2e["rate"], w.partitions, self.workdir / f"{topic}-c-e2e", acks=acks,
                                linger_ms=e2e["linger_ms"], fetch_wait_max_ms=e2e["fetch_wait_max_ms"],
                                timeout_s=self.args.timeout)
        return rdkafka_perf.run(self.rdkafka_perf, w.mode, broker.bootstrap, topic, w.records, w.record_size,
                                acks=acks, partitions=w.partitions, timeout_s=self.args.timeout)

    def perf_kafka(self, w: Workload, broker: BenchBroker, topic: str) -> tuple[dict[str, Any], float]:
        """Run Kafka's perf tool for ``w``; its result in `odradek perf`'s form and its CPU seconds."""
        acks = w.args[w.args.index("--acks") + 1] if "--acks" in w.args else "1"
        records = min(w.records, KAFKA_E2E_MAX_RECORDS) if w.mode == "e2e" else w.records
        return kafka_perf.run(w.mode, broker.bootstrap, topic, records, w.record_size, acks=acks,
                              timeout_s=self.args.timeout)

    def perf(self, w: Workload, broker: BenchBroker, topic: str, client: str = "python") -> tuple[dict[str, Any], float]:
        """Run `odradek perf` for ``w``; returns its JSON result and the client's CPU seconds."""
        if client == "c":
            return self.perf_c(w, broker, topic)
        if client == "kafka-perf":
            return self.perf_kafka(w, broker, topic)
        cmd = [sys.executable, "-m", "odradek", "perf", w.mode, "--bootstrap-server", broker.bootstrap,
               "--topic", topic, "--num-records", str(w.records), "--record-size", str(w.record_size),
               "--partitions", str(w.partitions), "--json", "--timeout", str(self.args.timeout), *w.args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        killer = threading.Timer(self.args.timeout + 60, proc.kill)
        killer.start()
        err_chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read() if proc.stderr else b""))
        reader.start()
        out = proc.stdout.read() if proc.stdout else b""
        reader.join()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        killer.cancel()
        client_cpu = usage.ru_utime + usage.ru_stime
        lines = out.decode(errors="replace").strip().splitlines()
        try:
            result: dict[str, Any] = json.loads(lines[-1])
        except (ValueError, IndexError):
            result = {"error": f"no JSON from perf (exit {proc.returncode})"}
        if proc.returncode != 0:
            stderr_tail = b"".join(err_chunks).decode(errors="replace")[-800:]
            result.setdefault("error", f"exit code {proc.returncode}")
            result["stderr_tail"] = stderr_tail
        return result, client_cpu

    def measure(self, w: Workload, broker: BenchBroker, kind: str, rep: int, topic: str,
                record: bool = True, client: str = "python") -> dict[str, Any]:
        peak_reset = broker.reset_peak_rss()
        cpu0 = broker.cpu_seconds()
        t0 = time.monotonic()
        result, client_cpu = self.perf(w, broker, topic, client)
        wall = time.monotonic() - t0
        cpu = broker.cpu_seconds() - cpu0
        nbytes = float(result.get("bytes") or result.get("records", 0) * w.record_size)
        run = {
            "workload": w.name, "broker": kind, "client": client, "rep": rep, "topic": topic, "records": w.records,
            "record_size": w.record_size, "wall_s": round(wall, 3),
            "metric": metric_of(result, w.metric),
            "broker_cpu_s": round(cpu, 3),
            "broker_cpu_s_per_gb": round(cpu / (nbytes / GB), 3) if nbytes else None,
            "broker_cores": round(cpu / wall, 3) if wall > 0 else None,
            "broker_peak_rss_mb": round(broker.peak_rss_mb(), 1),
            "peak_rss_is_per_workload": peak_reset,
            "client_cpu_s": round(client_cpu, 3),
            "loadavg": loadavg(),
            "perf": result,
        }
        if record:
            self.runs.append(run)
        m = run["metric"]
        shown = f"{m:,.1f} {w.unit}" if m is not None else "n/a"
        err = f"  ERROR: {result.get('error')}" if "error" in result else ""
        self.log(f"{w.name} {kind:8s} {client:6s} rep {rep}: {shown}; broker {cpu:.2f} CPU s ({run['broker_cores']} cores), "
                 f"peak RSS {run['broker_peak_rss_mb']:.0f} MB; client {client_cpu:.2f} CPU s{err}")
        return run

    def session(self, names: list[str], kind: str, rep: int) -> None:
        """Run workloads that share one fresh broker (W2 then W3), or a single workload."""
        tag = f"r{rep}-{'-'.join(names)}"
        broker = self.new_broker(kind, tag)
        try:
            broker.start()
        except Exception as e:
            self.log(f"{kind} failed to start: {e}")
            for client in self.clients:
                for name in names:
                    self.runs.append({"workload": name, "broker": kind, "client": client, "rep": rep, "metric": None,
                                      "perf": {"error": f"broker start failed: {e}"}})
            return
        time.sleep(SETTLE_S)  # start-up housekeeping (Odradek's protocol warm-up) is not the workload's
        topics: dict[str, str] = {}
        try:
            for client in self.clients:
                for name in names:
                    w = self.defs[name]
                    key = w.topic_from or name
                    ckey = f"{key}-{client}"
                    try:
                        if ckey not in topics:
                            topics[ckey] = f"bench-{key.lower()}-{client}-{self.run_id}-{rep}"
                            # created before the clock (and the CPU count) starts: W5's 1,000 partitions take a while
                            self.create_topic(broker, topics[ckey], w.partitions)
                            if w.topic_from:  # W3 without W2: fill the topic W2 would have written, unmeasured
                                self.measure(self.defs[w.topic_from], broker, kind, rep, topics[ckey], record=False,
                                             client=client)
                        self.measure(w, broker, kind, rep, topics[ckey], client=client)
                    except Exception as e:  # recorded; the other workloads go on
                        self.log(f"{name} {kind} {client} rep {rep} failed: {type(e).__name__}: {e}")
                        self.runs.append({"workload": name, "broker": kind, "client": client, "rep": rep,
                                          "metric": None, "perf": {"error": f"{type(e).__name__}: {e}"}})
        finally:
            rc = broker.stop()
            if rc not in (0, None) and kind == "odradek":
                self.log(f"odradek exited with code {rc} after SIGTERM; log: {broker.log_path}")
            if not self.args.keep:
                shutil.rmtree(broker.workdir, ignore_errors=True)
            # the next session (either broker) starts with no dirty pages of this one to write back
            os.sync()

    def run(self) -> dict[str, Any]:
        args = self.args
        selected = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
        unknown = [w for w in selected if w not in ALL_WORKLOADS]
        if unknown:
            raise SystemExit(f"unknown workloads: {', '.join(unknown)} (known: {', '.join(ALL_WORKLOADS)})")
        kinds = ["odradek"]
        if args.peer == "tansu":
            self.tansu_binary = fetch_tansu()
        if args.peer == "kafka":
            kafka_peer().fetch()  # once, before any clock: Maven Central, the first time only
        if args.peer:
            kinds.append(args.peer)
        meta: dict[str, Any] = {
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "quick": self.quick, "repeat": args.repeat, "workloads": selected, "peer": args.peer,
            "clients": self.clients,
            "loadavg_start": loadavg(),
        }
        self.log(f"workdir {self.workdir}; measuring loopback bandwidth")
        loop_before = loopback_mb_per_sec()
        self.log(f"loopback {loop_before:.0f} MB/s")
        sessions: list[list[str]] = []
        for name in ALL_WORKLOADS[:5]:
            if name not in selected:
                continue
            if name == "W3" and sessions and sessions[-1][0] == "W2":
                sessions[-1].append("W3")
            else:
                sessions.append([name])
        try:
            for rep in range(1, args.repeat + 1):
                order = kinds if rep % 2 == 1 else list(reversed(kinds))
                for names in sessions:
                    for kind in order:
                        self.session(names, kind, rep)
            w6: dict[str, Any] | None = None
            w6_peer: dict[str, Any] | None = None
            if "W6" in selected:
                w6 = run_w6(self.workdir, args.w6_gb, args.w6_partitions, args.repeat,
                            crash_records=args.w6_crash_records, log=self.log)
                self.drop_w6_dir("w6-odradek")
                if args.peer == "kafka":
                    w6_peer = run_w6(self.workdir, args.w6_gb, args.w6_partitions, args.repeat,
                                     crash_records=args.w6_crash_records, log=self.log, kind="kafka")
                    self.drop_w6_dir("w6-kafka")
        finally:
            if not args.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
        loop_after = loopback_mb_per_sec()
        meta["loopback_mb_per_sec"] = [round(loop_before, 1), round(loop_after, 1)]
        meta["loadavg_end"] = loadavg()
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        return {"meta": meta, "runs": self.runs, "w6": w6, "w6_peer": w6_peer}

    def drop_w6_dir(self, name: str) -> None:
        """W6's GBs go (with their cached pages) before the next broker's W6, as each session's do."""
        if not self.args.keep:
            shutil.rmtree(self.workdir / name, ignore_errors=True)
        os.sync()


# ---------------------------------------------------------------------------------------------- report


def fmt(v: float | None, spec: str = ",.1f") -> str:
    return "n/a" if v is None else format(v, spec)


def summarise(data: dict[str, Any], quick: bool, scale: float = 1.0) -> tuple[str, list[dict[str, Any]]]:
    runs = data["runs"]
    defs = workloads(quick, scale)
    peer = data["meta"].get("peer")
    kinds = ["odradek"] + ([peer] if peer else [])
    clients: list[str] = data["meta"].get("clients") or ["python"]
    for r in runs:
        r.setdefault("client", "python")
    row_defs = [(name + CLIENT_SUFFIX[client], client, name, w) for client in clients for name, w in defs.items()]
    p = PEER_LETTER.get(peer or "", "P")

    def med(w: str, client: str, kind: str, key: str) -> float | None:
        return median([r.get(key) for r in runs
                       if r["workload"] == w and r["broker"] == kind and r["client"] == client])

    rows = []
    summary: dict[str, dict[str, dict[str, float | None]]] = {}
    for row, client, name, w in row_defs:
        if not any(r["workload"] == name and r["client"] == client for r in runs):
            continue
        summary[row] = {}
        for kind in kinds:
            summary[row][kind] = {k: med(name, client, kind, k) for k in
                                  ("metric", "broker_cpu_s", "broker_cpu_s_per_gb", "broker_peak_rss_mb",
                                   "broker_cores", "client_cpu_s")}
        o = summary[row]["odradek"]
        t = summary[row].get(peer or "", {})
        om, tm = o.get("metric"), t.get("metric")
        ratio = om / tm if om is not None and tm else None
        n_ok = {k: sum(1 for r in runs if r["workload"] == name and r["client"] == client and r["broker"] == k
                       and r.get("metric") is not None)
                for k in kinds}
        rows.append([
            row, row_title(w, client), w.unit,
            fmt(o["metric"]), fmt(t.get("metric")), fmt(ratio, ".2f"),
            fmt(o["broker_cpu_s"], ".2f"), fmt(o["broker_cpu_s_per_gb"], ".2f"),
            fmt(t.get("broker_cpu_s"), ".2f"), fmt(t.get("broker_cpu_s_per_gb"), ".2f"),
            fmt(o["broker_peak_rss_mb"], ".0f"), fmt(t.get("broker_peak_rss_mb"), ".0f"),
            "/".join(str(n_ok[k]) for k in kinds),
        ])
    headers = ["W", "workload", "unit", "Odradek", peer or "peer", f"ratio O/{p}", "O CPU s", "O CPU s/GB",
               f"{p} CPU s", f"{p} CPU s/GB", "O RSS MB", f"{p} RSS MB", "n ok"]
    lines = [_table(headers, rows)]
    if peer:
        lines.append(f"\nEach repetition (the metric; ratio O/{p} of each repetition's pair, and of the medians):")
        lines.append(per_rep_table(runs, row_defs, kinds, p))

    w6_runs = [(k, data.get(key)) for k, key in (("odradek", "w6"), (peer, "w6_peer")) if data.get(key) is not None]
    if w6_runs:
        lines.append("\nW6 start time (process start to first ApiVersions answer; the broker's own log figure in "
                     "brackets; each repetition, then the median):")
    for kind, w6 in w6_runs:
        label = f"  {kind or 'peer':8s}"
        if "error" in w6 and not w6.get("runs"):
            lines.append(f"{label} failed: {w6['error']}")
            continue
        summary.setdefault("W6", {})[kind] = {
            key: median([r.get(key) for r in w6["runs"]])
            for key in ("clean_start_s", "kill9_start_s", "clean_start_reported_s", "kill9_start_reported_s")}
        m = summary["W6"][kind]

        def each(key: str, w6: dict[str, Any] = w6) -> str:
            return " ".join(fmt(r.get(key), ".2f") for r in w6["runs"])

        gb = w6.get("bytes_on_disk", 0) / GB
        lines.append(
            f"{label} {w6['partitions']} partitions, {gb:.2f} GB on disk: after clean stop {each('clean_start_s')} -> "
            f"{fmt(m['clean_start_s'], '.2f')} s [{fmt(m['clean_start_reported_s'], '.2f')} s]; after kill -9 "
            f"{each('kill9_start_s')} -> {fmt(m['kill9_start_s'], '.2f')} s [{fmt(m['kill9_start_reported_s'], '.2f')} s]"
            + (f"\n  error: {w6['error']}" if "error" in w6 else ""))
    if w6_runs and len(w6_runs) == 1 and peer and peer != "kafka":
        lines.append(f"  {peer:8s} n/a (memory storage)")
    if len(w6_runs) == 2 and peer:
        o, k = summary.get("W6", {}).get("odradek", {}), summary.get("W6", {}).get(peer, {})
        parts = []
        for key, label in (("clean_start_s", "after clean stop"), ("kill9_start_s", "after kill -9")):
            a, b = o.get(key), k.get(key)
            parts.append(f"{label} {fmt(a / b if a is not None and b else None, '.2f')}x")
        lines.append(f"  ratio O/{p}: " + ", ".join(parts))

    loop = max(data["meta"].get("loopback_mb_per_sec") or [0.0])
    lines.append(f"\nloopback TCP {fmt(loop, ',.0f')} MB/s (max of before/after); load average "
                 f"{data['meta'].get('loadavg_start')} -> {data['meta'].get('loadavg_end')}")
    checks = []
    for client in clients:
        suffix = CLIENT_SUFFIX[client]
        per_client = {name: summary[name + suffix] for name in ALL_WORKLOADS if name + suffix in summary}
        if "W6" in summary:
            per_client.setdefault("W6", summary["W6"])
        for c in targets(per_client, peer, loop):
            if c["target"].startswith("W6") and client != clients[0]:
                continue  # W6 has no client: listed once
            if client != "python":
                c["target"] = f"[{CLIENT_TITLE[client].strip(' []')}] {c['target']}"
            checks.append(c)
    lines.append("\nTargets (issue 4):")
    for c in checks:
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[c["pass"]]
        lines.append(f"  [{mark}] {c['target']}: {c['value']}")
    data["summary"] = summary
    data["targets"] = checks
    return "\n".join(lines), checks


def per_rep_table(runs: list[dict[str, Any]], row_defs: list[tuple[str, str, str, Workload]], kinds: list[str],
                  peer_letter: str) -> str:
    """Rows W x broker: the metric of each repetition and the median; a ratio row per workload."""
    reps = sorted({int(r["rep"]) for r in runs})
    out: list[list[str]] = []
    for row, client, name, w in row_defs:
        by_kind: dict[str, dict[int, float | None]] = {}
        for kind in kinds:
            by_kind[kind] = {int(r["rep"]): r.get("metric") for r in runs
                             if r["workload"] == name and r["client"] == client and r["broker"] == kind}
        if not any(by_kind.values()):
            continue
        for kind in kinds:
            vals = by_kind[kind]
            out.append([row, w.unit, kind, *(fmt(vals.get(i)) for i in reps), fmt(median(list(vals.values())))])
        if len(kinds) == 2:
            o, k = by_kind[kinds[0]], by_kind[kinds[1]]

            def ratio(a: float | None, b: float | None) -> str:
                return fmt(a / b if a is not None and b else None, ".2f")

            out.append([row, "", f"O/{peer_letter}", *(ratio(o.get(i), k.get(i)) for i in reps),
                        ratio(median(list(o.values())), median(list(k.values())))])
    return _table(["W", "unit", "broker", *(f"rep {i}" for i in reps), "median"], out)


def targets(s: dict[str, Any], peer: str | None, loopback: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def get(w: str, kind: str | None, key: str) -> float | None:
        if kind is None:
            return None
        v = s.get(w, {}).get(kind, {}).get(key)
        return float(v) if v is not None else None

    def check(target: str, value: float | None, ok: Callable[[float], bool], shown: str) -> None:
        out.append({"target": target, "value": shown if value is not None else "n/a",
                    "pass": None if value is None else bool(ok(value))})

    def ratio(w: str, key: str) -> float | None:
        o, t = get(w, "odradek", key), get(w, peer, key)
        return o / t if o is not None and t else None

    if peer == METRICS_OFF:  # issue 16: the cost of the metrics on the hot path
        r = ratio("W2", "metric")
        check("W2 MB/s with metrics >= 0.97x without", r, lambda v: v >= 0.97, f"{fmt(r, '.3f')}x")
        r = ratio("W2", "broker_cpu_s_per_gb")
        check("W2 CPU s/GB with metrics <= 1.03x without", r, lambda v: v <= 1.03, f"{fmt(r, '.3f')}x")
        return out
    r = ratio("W2", "metric")
    check("W2 produce MB/s >= 1.5x peer", r, lambda v: v >= 1.5, f"{fmt(r, '.2f')}x")
    r = ratio("W2", "broker_cpu_s_per_gb")
    check("W2 broker CPU s/GB <= 0.7x peer", r, lambda v: v <= 0.7, f"{fmt(r, '.2f')}x")
    r = ratio("W3", "metric")
    check("W3 consume MB/s >= 2.0x peer", r, lambda v: v >= 2.0, f"{fmt(r, '.2f')}x")
    o3 = get("W3", "odradek", "metric")
    frac = o3 / loopback if o3 is not None and loopback else None
    check("W3 consume MB/s >= 25% of loopback", frac, lambda v: v >= 0.25,
          f"{fmt(o3)} of {fmt(loopback, ',.0f')} MB/s = {fmt(None if frac is None else frac * 100, '.1f')}%")
    r = ratio("W1", "metric")
    check("W1 records/s >= 1.0x peer", r, lambda v: v >= 1.0, f"{fmt(r, '.2f')}x")
    r = ratio("W4", "metric")
    check("W4 p99 <= 0.5x peer", r, lambda v: v <= 0.5,
          f"{fmt(r, '.2f')}x ({fmt(get('W4', 'odradek', 'metric'), '.2f')} vs {fmt(get('W4', peer, 'metric'), '.2f')} ms)")
    rss = get("W5", "odradek", "broker_peak_rss_mb")
    check("W5 broker peak RSS < 300 MB", rss, lambda v: v < 300, f"{fmt(rss, '.0f')} MB")
    o5, o2 = get("W5", "odradek", "metric"), get("W2", "odradek", "metric")
    r = o5 / o2 if o5 is not None and o2 else None
    check("W5 produce MB/s >= 0.7x W2's", r, lambda v: v >= 0.7, f"{fmt(r, '.2f')}x ({fmt(o5)} vs {fmt(o2)} MB/s)")
    c = get("W6", "odradek", "clean_start_s")
    check("W6 start after clean stop < 3 s", c, lambda v: v < 3, f"{fmt(c, '.2f')} s")
    k = get("W6", "odradek", "kill9_start_s")
    check("W6 start after kill -9 < 10 s", k, lambda v: v < 10, f"{fmt(k, '.2f')} s")
    return out


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    def line(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "\n".join([line(headers), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", choices=["kafka", "tansu", METRICS_OFF], default=None,
                    help="also run the workloads against this broker (kafka: Apache Kafka 4.4 from peers/kafka_peer.py; "
                         f"{METRICS_OFF}: Odradek with http.listeners= empty, to measure what /metrics costs)")
    ap.add_argument("--client", type=parse_clients, default=["python"],
                    help="the load generator: odradek perf (python), librdkafka's rdkafka_performance (c), Kafka's "
                         "perf tools (kafka-perf), both (python,c), all, or a comma-separated list (c,kafka-perf)")
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS), help="comma-separated (default all)")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per workload and broker (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="reduced sizes for a smoke check")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the record counts of the workloads (longer runs average out a noisy machine)")
    ap.add_argument("--w6-gb", type=float, default=None, help="GB on disk for W6 (default 5; 0.05 with --quick)")
    ap.add_argument("--w6-partitions", type=int, default=1000)
    ap.add_argument("--w6-crash-records", type=int, default=None,
                    help="1 KB records produced before the kill -9 in W6 (default 100,000; 5,000 with --quick)")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound on each perf run in seconds")
    ap.add_argument("--json-out", type=Path, default=None, help="write the raw results here")
    ap.add_argument("--dir", default=None, help="parent directory for the brokers' data (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep broker directories and logs")
    args = ap.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.w6_gb is None:
        args.w6_gb = 0.05 if args.quick else 5.0
    if args.w6_crash_records is None:
        args.w6_crash_records = 5_000 if args.quick else 100_000

    bench = Bench(args)
    data = bench.run()
    report, checks = summarise(data, args.quick, args.scale)
    title = (f"odradek bench ({'quick, ' if args.quick else ''}median of {args.repeat}; "
             f"MB = 2^20 B; {data['meta']['cpus']} CPUs)")
    print(f"\n{title}\ncommand: {data['meta']['command']}\n")
    print(report)
    if args.json_out:
        args.json_out.write_text(json.dumps(data, indent=1, default=str) + "\n")
        print(f"\nraw results: {args.json_out}")
    failed_runs = [r for r in data["runs"] if "error" in r.get("perf", {})]
    if failed_runs:
        print(f"\n{len(failed_runs)} run(s) reported errors: "
              + "; ".join(f"{r['workload']}/{r['broker']}/rep{r['rep']}: {r['perf']['error']}" for r in failed_runs))
    w6_failed = any((data.get(key) or {}).get("error") for key in ("w6", "w6_peer"))
    return 1 if failed_runs or w6_failed else 0


if __name__ == "__main__":
    sys.exit(main())
