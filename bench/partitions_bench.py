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
"""

from __future__ import annotations

import argparse
import json
import os
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

from brokers import OdradekBroker  # noqa: E402

RECORD_SIZE = 1024


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> float:
    """Seconds until CreateTopics for ``partitions`` partitions completes."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connected before the clock starts
    t0 = time.monotonic()
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
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
    args = ap.parse_args()
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
