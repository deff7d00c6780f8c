"""10,000 partitions on one broker (issue 17): create time, produce MB/s at 6 vs N partitions in one run,
RSS, open descriptors, and start time after a clean stop and after kill -9.

One broker, fresh log directory. Steps (all in one run, so the ratio compares like with like):
  1. start; create topic ``p6`` (6 partitions) and time the creation of ``pN`` (N partitions, default
     10,000) until the admin client's CreateTopics future resolves (the broker answers once every log exists);
  2. produce ``--records`` 1 KB records, acks=all, to ``p6`` and then to ``pN`` with ``odradek perf produce``
     (librdkafka; the same producer settings for both: ``sticky.partitioning.linger.ms=0``, each record to
     a random partition, so that every partition gets data; ``--no-spread`` keeps the sticky partitioner);
     then the same to ``pN`` again: the first pass also makes each partition's files (``.log``, ``.index``,
     ``.timeindex``, as Kafka does at creation), the second measures appends alone;
  3. RSS (VmRSS and peak VmHWM) and open descriptors of the broker process (/proc/PID/fd);
  4. clean stop (SIGTERM), start timed until ApiVersions answers;
  5. produce ``--crash-records`` more to ``pN``, kill -9, start timed again (log recovery), and
     produce ``--records`` to ``pN`` once more (every partition's files are opened again lazily).

Each produce pass reports the broker's and the client's CPU seconds and both per record batch
written (batches counted in the segments before and after), so it shows which side sets the rate.
``--client`` picks the load generator, with the same settings for both topics:

  python   ``odradek perf produce`` (confluent-kafka: a Python loop over librdkafka's produce());
  c        librdkafka's own ``rdkafka_performance`` (bench/rdkafka_perf.py; ``linger.ms=1``);
  flood    pre-encoded 1 MB multi-partition ProduceRequests (bench/produce_flood.py): the client
           costs almost nothing, so the broker's own per-batch cost sets the rate. librdkafka sends
           one partition per ProduceRequest and walks its queued partitions on each wake-up, which
           at 10,000 partitions on one broker costs it 2-3x the broker's CPU.

``--producer-props K=V ...`` adds producer settings to every pass, both topics alike: for the C client
``linger.ms=200 queue.buffering.max.messages=2000000`` (librdkafka's 100,000-message queue holds ten
records per partition at 10,000 partitions, so its batches stay tiny); for the flood client
``batch.size=16384`` (Kafka's default batch.size: one 16-record batch per partition per request,
requests up to 1 MB), which compares 6 and 10,000 partitions at the same batch size.

The first pass over N partitions makes ~2N files, so it measures the filesystem's file creation too. On
ext4 that is ~15-40 us a file, but up to ~850 us within minutes of a bulk deletion (such as an earlier
run's work directory: ext4's inode allocator passes over recently deleted inodes, ``recently_deleted()``
in ``find_inode_bit``, measured with perf): run on a filesystem that has not just deleted tens of
thousands of files, or give ``--workdir`` on a fresh one.

  python bench/partitions_bench.py                     # 10,000 partitions, 200,000 records
  python bench/partitions_bench.py --client c --json   # librdkafka's C tool (bench/.rdkafka)
  python bench/partitions_bench.py --partitions 2000 --records 50000 --json
  python bench/partitions_bench.py --client flood --records 1000000 --producer-props batch.size=16384

``--peer kafka`` compares Odradek with Apache Kafka 4.4 (one combined KRaft node, heap -Xmx1G -Xms1G,
bench/brokers.py's KafkaBroker) on the same steps for each, alternating per repetition (``--reps``),
each on a fresh log dir that is deleted (and ``sync`` run) before the next:

  1. start; create ``pN`` (RF=1): ``create_s`` until CreateTopics is answered, ``logs_s`` until every
     partition's log directory exists (Kafka answers and lists the leaders before it has made the logs);
  2. ``--records`` 1 KB records spread over every partition (rdkafka_performance, acks=all,
     ``sticky.partitioning.linger.ms=0``), so each partition has a segment to load;
  3. clean stop (SIGTERM, timed), then a start timed from the process's launch: the first ApiVersions
     answer, the first acknowledged produce to the last partition (``last_s``) and one record
     acknowledged on every partition (``all_s``, acks=1; the client's produce of N records is in it, alike
     for both);
  4. ``--crash-records`` more records, kill -9, and the same timed start (log recovery).

  python bench/partitions_bench.py --peer kafka                        # 10,000 partitions, 3 repetitions
  python bench/partitions_bench.py --peer kafka --partitions 100 --records 1000 --crash-records 500 --reps 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the broker runs in its own working directory: a relative PYTHONPATH (PYTHONPATH=src) would not reach it
os.environ["PYTHONPATH"] = os.pathsep.join(
    str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
)

from brokers import BenchBroker, KafkaBroker, OdradekBroker, kafka_peer  # noqa: E402
from first_produce import produce_acked, timed_start, value  # noqa: E402

RECORD_SIZE = 1024


# Kafka's KRaft controller refuses one user operation of more than 10,000 metadata records (POLICY_VIOLATION
# "Unable to perform excessively large batch operation.": a topic of 10,000 partitions is 10,001), so the
# topic is created with at most this many partitions and grown by CreatePartitions as many at a time; both
# brokers are given the same requests
CREATE_STEP = 5000


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> float:
    """Seconds until ``topic`` has ``partitions`` partitions: CreateTopics of at most CREATE_STEP, then
    CreatePartitions adding CREATE_STEP at a time."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connected before the clock starts
    t0 = time.monotonic()
    have = min(partitions, CREATE_STEP)
    admin.create_topics([NewTopic(topic, num_partitions=have, replication_factor=1)],
                        operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
    while have < partitions:
        have = min(partitions, have + CREATE_STEP)
        admin.create_partitions([NewPartitions(topic, have)], operation_timeout=timeout,
                                request_timeout=timeout)[topic].result(timeout)
    return time.monotonic() - t0


def produce_python(bootstrap: str, topic: str, records: int, timeout: float, props: list[str] | None = None,
                   acks: str = "all") -> tuple[dict[str, Any], float]:
    """``odradek perf produce`` (confluent-kafka: a Python loop calling librdkafka's produce() per record);
    (its result, its CPU seconds)."""
    cmd = [sys.executable, "-m", "odradek", "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
           "--num-records", str(records), "--record-size", str(RECORD_SIZE), "--acks", acks, "--json",
           "--timeout", str(timeout)]
    if props:
        cmd += ["--producer-props", *props]
    with tempfile.TemporaryFile("w+") as fout, tempfile.TemporaryFile("w+") as ferr:
        proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, stdin=subprocess.DEVNULL, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        fout.seek(0)
        ferr.seek(0)
        stdout, stderr = fout.read(), ferr.read()
    try:
        result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"perf produce exited {os.waitstatus_to_exitcode(status)}: {stderr[-800:]}") from None
    if result.get("error"):
        raise RuntimeError(f"perf produce: {result['error']}")
    return result, usage.ru_utime + usage.ru_stime


def produce_c(bootstrap: str, topic: str, records: int, timeout: float, props: list[str] | None = None,
              acks: str = "all") -> tuple[dict[str, Any], float]:
    """librdkafka's rdkafka_performance (bench/rdkafka_perf.py); (its result, its CPU seconds)."""
    import rdkafka_perf

    conf = dict(p.split("=", 1) for p in props or [])
    # without spreading (--no-spread) the tool keeps librdkafka's sticky partitioner
    conf.setdefault("sticky.partitioning.linger.ms", "10")
    result, cpu = rdkafka_perf.run(rdkafka_perf.ensure_built(), "produce", bootstrap, topic, records, RECORD_SIZE,
                                   acks=acks, latency=False, props=conf, timeout_s=timeout)
    if result.get("error"):
        raise RuntimeError(f"rdkafka_performance: {result['error']} {result.get('stderr_tail', '')}")
    return result, cpu


def produce_flood(bootstrap: str, topic: str, records: int, timeout: float, props: list[str] | None = None,
                  acks: str = "all") -> tuple[dict[str, Any], float]:
    """Pre-encoded multi-partition ProduceRequests (bench/produce_flood.py); (its result, its CPU seconds).
    The topic's partition count is in its name (``p6``, ``p10000``)."""
    import produce_flood

    conf = dict(p.split("=", 1) for p in props or [])
    # batch.size, as the Java producer names it, in records per batch (0: the batches fill the request)
    batch_records = int(conf.get("batch.size", "0")) // RECORD_SIZE
    result = produce_flood.run(bootstrap, topic, int(topic[1:]), records, record_size=RECORD_SIZE,
                               acks=-1 if acks == "all" else int(acks), batch_records=batch_records)
    if result.get("error"):
        raise RuntimeError(f"produce_flood: {result['error']}")
    return result, float(result["client_cpu_s"])


def count_batches(logdir: Path, topic: str) -> int:
    """Record batches in the topic's segments (the batch header's length field, from byte 8)."""
    n = 0
    for d in logdir.glob(f"{topic}-*"):
        for f in d.glob("*.log"):
            with f.open("rb") as fh:
                data = fh.read()
            pos, end = 0, len(data)
            while pos + 12 <= end:
                size = int.from_bytes(data[pos + 8:pos + 12], "big")
                if size <= 0:
                    break
                pos += 12 + size
                n += 1
    return n


class Pass:
    """One produce pass: the client's result and both sides' CPU per batch."""

    def __init__(self, broker: OdradekBroker, client: str, topic: str, records: int, timeout: float,
                 props: list[str] | None, acks: str = "all") -> None:
        before_cpu = broker.cpu_seconds()
        before_batches = count_batches(broker.logdir, topic)
        fn = {"c": produce_c, "flood": produce_flood}.get(client, produce_python)
        self.result, self.client_cpu_s = fn(broker.bootstrap, topic, records, timeout, props, acks)
        self.broker_cpu_s = broker.cpu_seconds() - before_cpu
        self.batches = count_batches(broker.logdir, topic) - before_batches
        self.mb_per_sec: float | None = self.result.get("mb_per_sec")

    def summary(self) -> dict[str, Any]:
        b = max(self.batches, 1)
        return {"mb_per_sec": self.mb_per_sec, "elapsed_s": self.result.get("elapsed_s"),
                "batches": self.batches, "broker_cpu_s": round(self.broker_cpu_s, 3),
                "client_cpu_s": round(self.client_cpu_s, 3),
                "broker_us_per_batch": round(self.broker_cpu_s / b * 1e6, 1),
                "client_us_per_batch": round(self.client_cpu_s / b * 1e6, 1)}


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def partitions_with_data(logdir: Path, topic: str) -> int:
    n = 0
    for d in logdir.glob(f"{topic}-*"):
        if any(f.stat().st_size > 0 for f in d.glob("*.log")):
            n += 1
    return n


def run(workdir: Path, partitions: int, records: int, crash_records: int, spread: bool, timeout: float,
        log: Any = print, client: str = "python", extra_props: list[str] | None = None) -> dict[str, Any]:
    broker = OdradekBroker(workdir / "broker")
    out: dict[str, Any] = {"partitions": partitions, "records": records, "record_size": RECORD_SIZE,
                           "client": client}
    big = f"p{partitions}"
    try:
        out["first_start_s"] = round(broker.start(), 3)
        create_topic(broker.bootstrap, "p6", 6)
        out["create_s"] = round(create_topic(broker.bootstrap, big, partitions, timeout), 3)
        log(f"created {big} in {out['create_s']:.2f} s; RSS {broker.rss_mb():.0f} MB, {open_fds(broker.pid)} fds")
        out["rss_after_create_mb"] = round(broker.rss_mb(), 1)
        props = (["sticky.partitioning.linger.ms=0"] if spread else []) + list(extra_props or [])
        r6 = Pass(broker, client, "p6", records, timeout, props)
        rn = Pass(broker, client, big, records, timeout, props)
        # the same again: every partition's files exist now (the first pass made ~3 files per partition,
        # ~0.3 ms each on this ext4), so this is the per-batch cost alone
        rw = Pass(broker, client, big, records, timeout, props)
        out["mb_per_sec_6"] = r6.mb_per_sec
        out["mb_per_sec_n"] = rn.mb_per_sec
        out["mb_per_sec_n_files_exist"] = rw.mb_per_sec
        out["pass_6"], out["pass_n"], out["pass_n_files_exist"] = r6.summary(), rn.summary(), rw.summary()
        for name, p in (("6", r6), (big, rn), (f"{big} again", rw)):
            log(f"  {name}: {p.summary()}")
        if out["mb_per_sec_6"] and out["mb_per_sec_n"]:
            out["ratio"] = round(out["mb_per_sec_n"] / out["mb_per_sec_6"], 3)
        if out["mb_per_sec_6"] and out["mb_per_sec_n_files_exist"]:
            out["ratio_files_exist"] = round(out["mb_per_sec_n_files_exist"] / out["mb_per_sec_6"], 3)
        log(f"produce 6 partitions {out['mb_per_sec_6']} MB/s, {partitions} partitions {out['mb_per_sec_n']} MB/s "
            f"({out.get('ratio')}x; first writes, files made), again {out['mb_per_sec_n_files_exist']} MB/s "
            f"({out.get('ratio_files_exist')}x)")
        out["rss_mb"] = round(broker.rss_mb(), 1)
        out["peak_rss_mb"] = round(broker.peak_rss_mb(), 1)
        out["open_fds"] = open_fds(broker.pid)
        t0 = time.monotonic()
        rc = broker.stop()
        out["clean_stop_s"] = round(time.monotonic() - t0, 3)
        if rc != 0:
            raise RuntimeError(f"broker exited {rc} after SIGTERM\n{broker.log_tail(20)}")
        out["partitions_with_data"] = partitions_with_data(broker.logdir, big)
        out["clean_start_s"] = round(broker.start(), 3)
        out["clean_start_reported_s"] = broker.reported_start_s()
        out["clean_start_rss_mb"] = round(broker.rss_mb(), 1)
        log(f"start after clean stop {out['clean_start_s']:.2f} s, RSS {out['clean_start_rss_mb']:.0f} MB")
        Pass(broker, client, big, crash_records, timeout, props, acks="1")
        broker.kill()
        out["kill9_start_s"] = round(broker.start(), 3)
        out["kill9_start_reported_s"] = broker.reported_start_s()
        out["kill9_start_peak_rss_mb"] = round(broker.peak_rss_mb(), 1)
        log(f"start after kill -9 {out['kill9_start_s']:.2f} s, peak RSS {out['kill9_start_peak_rss_mb']:.0f} MB")
        # as many records as the passes before the kill, so the rates compare: a 20,000-record pass ran
        # at a fifth of the 200,000-record rate before a kill as well as after (the client's start over
        # 10,000 partitions weighs on two records per partition), which read as slow recovery
        after = Pass(broker, client, big, records, timeout, props)
        out["produce_after_recovery_mb_per_sec"] = after.mb_per_sec
        out["pass_after_recovery"] = after.summary()
        out["stop_rc"] = broker.stop()
    finally:
        broker.kill()
    return out


def targets(r: dict[str, Any]) -> list[tuple[str, bool]]:
    return [
        (f"create {r['partitions']} partitions < 10 s: {r.get('create_s')} s", (r.get("create_s") or 99) < 10),
        (f"produce at >= 0.7x of 6 partitions: {r.get('ratio')}x", (r.get("ratio") or 0) >= 0.7),
        (f"produce again (files exist) at >= 0.7x: {r.get('ratio_files_exist')}x",
         (r.get("ratio_files_exist") or 0) >= 0.7),
        (f"RSS < 1 GB: {r.get('peak_rss_mb')} MB peak", (r.get("peak_rss_mb") or 9e9) < 1024),
        (f"clean restart < 5 s: {r.get('clean_start_s')} s", (r.get("clean_start_s") or 99) < 5),
        (f"restart after kill -9 < 20 s: {r.get('kill9_start_s')} s", (r.get("kill9_start_s") or 99) < 20),
    ]


def served_steps(broker: BenchBroker, topic: str, partitions: int) -> list[tuple[str, Any]]:
    """After a start: a produce acknowledged on the last partition, then one on every partition (acks=1)."""
    def last(deadline: float) -> float:
        return produce_acked(broker.bootstrap, topic, RECORD_SIZE, deadline, [partitions - 1], acks="1")

    def every(deadline: float) -> float:
        return produce_acked(broker.bootstrap, topic, RECORD_SIZE, deadline, range(partitions), acks="1")

    return [("last", last), ("all", every)]


def run_restarts(kind: str, workdir: Path, partitions: int, records: int, crash_records: int, timeout: float,
                 log: Any = print) -> dict[str, Any]:
    """Create, clean restart and restart after kill -9 of one broker (``kind``: odradek or kafka) with
    ``partitions`` partitions; see the module's ``--peer`` steps."""
    broker: BenchBroker = KafkaBroker(workdir) if kind == "kafka" else OdradekBroker(workdir)
    big = f"p{partitions}"
    out: dict[str, Any] = {"broker": kind, "partitions": partitions}
    try:
        if isinstance(broker, KafkaBroker):
            kafka_peer().fetch()
            broker.node.format()
        out["first_start_s"] = round(broker.start(timeout), 3)
        created = create_topic(broker.bootstrap, big, partitions, timeout)
        out["create_s"] = round(created, 3)
        out["logs_s"] = round(created + (broker.wait_partitions_on_disk(big, partitions, timeout) or 0.0), 3)
        log(f"{kind}: created {big} in {out['create_s']:.2f} s, every log on disk after {out['logs_s']:.2f} s")
        if records:
            produce_c(broker.bootstrap, big, records, timeout, ["sticky.partitioning.linger.ms=0"])
        t = time.monotonic()
        rc = broker.stop(timeout)
        out["clean_stop_s"] = round(time.monotonic() - t, 3)
        if rc not in (0, 143):  # Kafka's JVM exits 143 (128 + SIGTERM) after its clean shutdown
            raise RuntimeError(f"{kind} exited {rc} after SIGTERM")
        out["clean"] = timed_start(broker, served_steps(broker, big, partitions), timeout)
        log(f"{kind}: after clean stop {out['clean']}")
        if crash_records:
            produce_c(broker.bootstrap, big, crash_records, timeout, ["sticky.partitioning.linger.ms=0"], acks="1")
        broker.kill()
        out["kill9"] = timed_start(broker, served_steps(broker, big, partitions), timeout)
        log(f"{kind}: after kill -9 {out['kill9']}")
        out["rss_mb"] = round(broker.rss_mb(), 1)
        broker.stop(timeout)
    except Exception as e:  # recorded; the other runs go on
        out["error"] = f"{type(e).__name__}: {e}"
        log(f"{kind}: {out['error']}")
    finally:
        broker.kill()
    return out


PEER_ROWS = (("create_s", "create: CreateTopics answered"), ("logs_s", "create: every log on disk"),
             ("clean.answer_s", "after clean stop: ApiVersions answered"),
             ("clean.last_s", "after clean stop: last partition acked"),
             ("clean.all_s", "after clean stop: every partition acked"),
             ("kill9.answer_s", "after kill -9: ApiVersions answered"),
             ("kill9.last_s", "after kill -9: last partition acked"),
             ("kill9.all_s", "after kill -9: every partition acked"))


def compare_lines(results: list[dict[str, Any]]) -> list[str]:
    """Per measure (seconds): each broker's repetitions and median, and Odradek / Kafka of the medians
    (the issue's target: <= 1.0 for create, clean restart and restart after kill -9)."""
    lines = []
    for key, label in PEER_ROWS:
        meds: dict[str, float] = {}
        cells = []
        for kind in ("odradek", "kafka"):
            vals = [value(r, key) for r in results if r["broker"] == kind]
            got = [v for v in vals if v is not None]
            if got:
                meds[kind] = statistics.median(got)
            cells.append(f"{kind} " + " ".join("-" if v is None else f"{v:.2f}" for v in vals)
                         + (f" -> {meds[kind]:.2f}" if kind in meds else ""))
        ratio = (f"{meds['odradek'] / meds['kafka']:.2f}x" if "odradek" in meds and meds.get("kafka")
                 else "n/a")
        lines.append(f"{label:40s} {cells[0]:28s} {cells[1]:28s} O/K {ratio}")
    return lines


def main_peer(args: argparse.Namespace) -> int:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="odradek-parts-", dir=args.workdir) as tmp:
        for rep in range(args.reps):
            for kind in ("odradek", "kafka") if rep % 2 == 0 else ("kafka", "odradek"):
                d = Path(tmp) / f"{kind}-{rep}"
                r = run_restarts(kind, d, args.partitions, args.records, args.crash_records, args.timeout,
                                 log=lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True))
                r["rep"] = rep
                results.append(r)
                shutil.rmtree(d, ignore_errors=True)
                os.sync()
    if args.json:
        print(json.dumps(results))
    print(f"{args.partitions:,} partitions, {args.records:,} + {args.crash_records:,} records of {RECORD_SIZE} B; "
          f"seconds from the process's launch (create: from the request); each repetition -> median")
    for text in compare_lines(results):
        print(text)
    for r in results:
        if "error" in r:
            print(f"rep {r['rep'] + 1} {r['broker']}: {r['error']}")
    return 1 if any("error" in r for r in results) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--records", type=int, default=200_000, help="1 KB records produced to each topic")
    ap.add_argument("--crash-records", type=int, default=50_000, help="records produced before the kill -9")
    ap.add_argument("--no-spread", dest="spread", action="store_false",
                    help="keep librdkafka's sticky partitioner on the N-partition topic (fewer partitions touched)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--client", choices=("python", "c", "flood"), default="python",
                    help="python: odradek perf produce; c: librdkafka's rdkafka_performance (bench/rdkafka_perf.py); "
                         "flood: pre-encoded 1 MB multi-partition requests (bench/produce_flood.py), the broker alone")
    ap.add_argument("--producer-props", nargs="*", default=[], metavar="K=V",
                    help="more producer settings for every pass (both topics alike), e.g. linger.ms=100")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--peer", choices=["kafka"], default=None,
                    help="create, clean restart and kill -9 restart on Odradek and on Apache Kafka 4.4, alternating")
    ap.add_argument("--reps", type=int, default=3, help="with --peer: repetitions per broker")
    args = ap.parse_args()
    if args.peer == "kafka":
        return main_peer(args)
    with tempfile.TemporaryDirectory(prefix="odradek-parts-", dir=args.workdir) as tmp:
        r = run(Path(tmp), args.partitions, args.records, args.crash_records, args.spread, args.timeout,
                log=lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True),
                client=args.client, extra_props=args.producer_props)
    if args.json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print(f"{k:32} {v}")
    ok = True
    for text, passed in targets(r):
        print(f"{'PASS' if passed else 'FAIL'}  {text}", file=sys.stderr if args.json else sys.stdout)
        ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
