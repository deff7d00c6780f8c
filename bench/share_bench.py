"""Share groups (KIP-932, issue 37): records/s delivered and acknowledged by 1, 5 and 20 share consumers of one
share group on one partition, Odradek and Apache Kafka 4.4 in the same run.

    python bench/share_bench.py [--records 200000] [--size 1024] [--consumers 1,5,20] [--reps 3]
                                [--brokers odradek,kafka] [--ack-mode explicit] [--json FILE]

Each (consumer count, repetition, broker) is a session on a fresh broker (bench/brokers.py's OdradekBroker or
KafkaBroker: one combined KRaft node, heap -Xmx1G -Xms1G) with its data on disk; its directory is deleted and
``sync`` run after it. The brokers alternate per repetition: Odradek then Kafka in odd repetitions, Kafka then
Odradek in even ones. Share groups are on in both: Odradek finalizes ``share.version`` 1 by default; Kafka's log
dir is formatted with ``kafka-storage format --feature share.version=1`` (Kafka 4.4 would start a new cluster at
share.version 2, its dead-letter-queue level, which Odradek does not have; level 1 is the share groups both
serve). The finalized level is read back from ApiVersions and recorded.

Before the clock, in each session:

1. the topic (one partition) is created and its log waited for on disk;
2. the group's ``share.auto.offset.reset=earliest`` is set with IncrementalAlterConfigs on the GROUP resource
   (as ``kafka-configs --entity-type groups --alter`` does);
3. a warm-up share group reads one record of another topic, so that the share coordinator's state topic
   (``__share_group_state``) and ``__consumer_offsets`` exist: the clock does not time their creation;
4. ``--records`` records of ``--size`` bytes are produced (confluent-kafka, acks=all, linger.ms 5,
   batch.size ``--batch-bytes``, 16384 by default as Kafka's producer: a share-partition acquires whole
   batches, so the batch size sets how finely the records are spread over the consumers);
5. the K consumers start, as K separate processes (this file with ``--worker``: confluent-kafka 2.16's
   ``ShareConsumer``, librdkafka 2.16's share consumer), each created and waiting, so neither the processes'
   start nor the imports are timed.

Then all are told to go at once; each subscribes and polls. In ``explicit`` acknowledgement mode (the default)
each worker ACCEPTs every record it gets (``acknowledge``); the acknowledgements go to the broker with its next
poll's ShareFetch, or with ``commit_async`` when a poll returns nothing. ``implicit`` mode leaves it to the
client (the records of a poll are accepted on the next poll or commit). Either way a record counts as
acknowledged when the broker has answered its acknowledgement (the acknowledgement commit callback, with no
error). The clock runs from the first consumer's subscribe to the last record's acknowledgement; records/s
delivered is up to the last record's first delivery; the seconds to the first delivery (joining the group, the
assignment, the share-partition's initialization) are shown apart, as they weigh on a small run. The last
acknowledgements ride a ShareFetch that the broker holds until its max wait when no records are left (both
brokers alike), so the acknowledged figure includes that one wait at the end. Records/s acknowledged is also
given from the first delivery instead of the subscribe. Redeliveries are the deliveries whose
``delivery_count()`` (the broker's count, from ShareFetch's AcquiredRecords) is above 1; duplicates are the
deliveries beyond one per record (a record delivered twice, whether or not its count says so).

CPU: the broker's utime+stime (/proc/<pid>/stat) from the go to the last acknowledgement; each consumer process's
own (getrusage: all its threads, librdkafka's included) from the go to the stop, summed over the K consumers;
``busy cores`` is (broker + consumers) / elapsed, of the machine's ``os.cpu_count()``: near it, the machine, not
the broker, set the rate.

The output: every session's line, then per consumer count each measure's repetitions, their medians and the
ratio Odradek/Kafka of the medians. ``--json FILE`` keeps the raw results.

  python bench/share_bench.py                                                  # the issue's figures
  python bench/share_bench.py --records 20000 --consumers 1,5 --reps 1         # smoke size
  python bench/share_bench.py --brokers odradek --records 2000 --consumers 1,2 --reps 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import BenchBroker, KafkaBroker, OdradekBroker, cpu_delta  # noqa: E402

TOPIC = "share-bench"
GROUP = "share-bench"
WARM_TOPIC = "share-bench-warmup"
WARM_GROUP = "share-bench-warmup"
SHARE_VERSION = 1  # share groups (Kafka's SV_1); Kafka 4.4's SV_2 adds the dead-letter queue
BROKERS = ("odradek", "kafka")
ACK_MODES = ("explicit", "implicit")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ offsets as ranges


def to_ranges(offsets: Iterable[int]) -> list[list[int]]:
    """Offsets as sorted [first, last] runs (the workers' lines stay short: a poll's records are consecutive)."""
    out: list[list[int]] = []
    for o in sorted(set(offsets)):
        if out and out[-1][1] == o - 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return out


def from_ranges(ranges: Iterable[Sequence[int]]) -> Iterator[int]:
    for first, last in ranges:
        yield from range(first, last + 1)


# ------------------------------------------------------------------------------ the workers' lines, tallied


class Tally:
    """What the K workers report, one JSON line at a time (``feed``), from any of their reader threads:

    ``{"sub": t}``                          subscribed at t
    ``{"d": ranges, "n": n, "r": r, "t": t}`` a poll at t: the offsets it delivered, n deliveries, r of them
                                              with a delivery count above 1
    ``{"a": ranges, "t": t}``               the broker answered these offsets' acknowledgements at t
    ``{"ae": n, "t": t, "e": text}``        n acknowledgements failed
    ``{"err": text}``                       a record with an error
    ``{"cpu": s}``                          the worker's CPU seconds from the go to the stop

    t is time.monotonic(), CLOCK_MONOTONIC: one clock for every process of the machine. ``done`` is set
    when every one of ``records`` offsets (0 .. records-1) has been acknowledged."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.first_delivery = array("d", [math.inf]) * records
        self.first_ack = array("d", [math.inf]) * records
        self.delivered = 0  # distinct offsets delivered
        self.acked = 0  # distinct offsets acknowledged
        self.deliveries = 0
        self.redelivered = 0
        self.ack_errors = 0
        self.foreign = 0  # offsets outside 0 .. records-1 (none expected: a fresh topic)
        self.subscribed: list[float] = []
        self.consumer_cpu: list[float] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def feed(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except ValueError:  # not one of the worker's lines: kept, not fatal to the reader
            with self.lock:
                self.errors.append(f"unexpected output: {line.strip()[:200]}")
            return
        with self.lock:
            t = float(msg.get("t", 0.0))
            if "sub" in msg:
                self.subscribed.append(float(msg["sub"]))
            if "d" in msg:
                self.deliveries += int(msg["n"])
                self.redelivered += int(msg["r"])
                for o in from_ranges(msg["d"]):
                    if not 0 <= o < self.records:
                        self.foreign += 1
                    elif self.first_delivery[o] == math.inf:
                        self.first_delivery[o] = t
                        self.delivered += 1
            if "a" in msg:
                for o in from_ranges(msg["a"]):
                    if not 0 <= o < self.records:
                        self.foreign += 1
                    elif self.first_ack[o] == math.inf:
                        self.first_ack[o] = t
                        self.acked += 1
            if "ae" in msg:
                self.ack_errors += int(msg["ae"])
                self.errors.append(str(msg.get("e", "acknowledgement failed")))
            if "err" in msg:
                self.errors.append(str(msg["err"]))
            if "cpu" in msg:
                self.consumer_cpu.append(float(msg["cpu"]))
            if self.acked >= self.records:
                self.done.set()

    def summary(self) -> dict[str, Any]:
        """The session's figures (seconds from the first subscribe; rates over the distinct records)."""
        with self.lock:
            out: dict[str, Any] = {
                "delivered": self.delivered, "acked": self.acked, "deliveries": self.deliveries,
                "redelivered": self.redelivered, "duplicates": self.deliveries - self.delivered,
                "ack_errors": self.ack_errors, "foreign_offsets": self.foreign,
                "consumer_cpu_s": round(sum(self.consumer_cpu), 3),
                "consumer_cpu_max_s": round(max(self.consumer_cpu, default=0.0), 3),
                "consumers_reported": len(self.consumer_cpu),
            }
            if not self.subscribed:
                return out
            start = min(self.subscribed)
            if self.delivered:
                out["first_delivery_s"] = round(min(self.first_delivery) - start, 4)
                last = max(t for t in self.first_delivery if t != math.inf)
                out["delivered_s"] = round(last - start, 4)
                out["delivered_rps"] = round(self.delivered / max(last - start, 1e-9), 1)
            if self.acked:
                last = max(t for t in self.first_ack if t != math.inf)
                out["elapsed_s"] = round(last - start, 4)
                out["acked_rps"] = round(self.acked / max(last - start, 1e-9), 1)
                if self.delivered:  # the same from the first delivery: the group's start left out
                    first = min(self.first_delivery)
                    out["acked_after_first_rps"] = round(self.acked / max(last - first, 1e-9), 1)
            return out


# ------------------------------------------------------------------------------ a worker process


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process: librdkafka's too
    return r.ru_utime + r.ru_stime


def worker(bootstrap: str, topic: str, group: str, index: int, ack_mode: str, out: IO[str] = sys.stdout) -> int:
    """One share consumer: created, then ``ready``; subscribes at ``go`` (a line on stdin) and polls until
    ``stop`` (the next line), reporting Tally's lines on stdout."""
    write_lock = threading.Lock()

    def emit(**kw: Any) -> None:
        with write_lock:
            out.write(json.dumps(kw, separators=(",", ":")) + "\n")
            out.flush()

    def on_commit(offsets: dict[Any, set[int]], exc: Exception | None) -> None:
        t = time.monotonic()
        mine = [o for tp, offs in offsets.items() if tp.topic == topic for o in offs]
        if exc is not None:
            emit(ae=max(len(mine), 1), t=t, e=str(exc))
        elif mine:
            emit(a=to_ranges(mine), t=t)

    explicit = ack_mode == "explicit"
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"share-bench-{index}",
                       "share.acknowledgement.mode": ack_mode})
    c.set_acknowledgement_commit_callback(on_commit)
    emit(ready=os.getpid())
    if sys.stdin.readline().strip() != "go":
        c.close()
        return 2
    stop = threading.Event()

    def wait_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_stop, daemon=True).start()
    cpu0 = _own_cpu()
    t = time.monotonic()
    c.subscribe([topic])
    emit(sub=t)
    while not stop.is_set():
        msgs = c.poll(0.1)
        if not msgs:
            c.commit_async()  # what the last poll acknowledged, when no next ShareFetch carries it
            continue
        t = time.monotonic()
        offsets: list[int] = []
        redelivered = 0
        for m in msgs:
            if m.error() is not None:
                emit(err=str(m.error()))
                continue
            offsets.append(m.offset() or 0)  # a record's offset (None only on an error message)
            if (m.delivery_count() or 0) > 1:
                redelivered += 1
            if explicit:
                c.acknowledge(m)  # ACCEPT
        emit(d=to_ranges(offsets), n=len(offsets), r=redelivered, t=t)
    emit(cpu=round(_own_cpu() - cpu0, 3))
    c.close()
    return 0


class Workers:
    """K worker processes, their stdout lines fed to a Tally by one reader thread each."""

    def __init__(self, bootstrap: str, k: int, tally: Tally, ack_mode: str, timeout: float) -> None:
        self.tally = tally
        self.procs: list[subprocess.Popen[str]] = []
        self.readers: list[threading.Thread] = []
        self.ready = threading.Semaphore(0)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--bootstrap", bootstrap,
               "--topic", TOPIC, "--group", GROUP, "--ack-mode", ack_mode]
        for i in range(k):
            p = subprocess.Popen([*cmd, "--index", str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, bufsize=1)
            self.procs.append(p)
            th = threading.Thread(target=self._read, args=(p,), daemon=True)
            th.start()
            self.readers.append(th)
        deadline = time.monotonic() + timeout
        waiting = k
        while waiting:
            if self.ready.acquire(timeout=0.2):
                waiting -= 1
                continue
            gone = [p.returncode for p in self.procs if p.poll() is not None]
            if gone:
                raise RuntimeError(f"a share consumer process exited before it was ready: codes {gone}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{waiting} of {k} share consumers not ready after {timeout:.0f} s")

    def _read(self, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith('{"ready"'):
                self.ready.release()
            elif line.strip():
                self.tally.feed(line)

    def tell(self, word: str) -> None:
        for p in self.procs:
            if p.poll() is None and p.stdin is not None:
                p.stdin.write(word + "\n")
                p.stdin.flush()

    def finish(self, timeout: float = 60.0) -> list[int | None]:
        """Stop every worker (its last line is its CPU), wait for it to close its consumer; SIGKILL after
        ``timeout``."""
        self.tell("stop")
        deadline = time.monotonic() + timeout
        codes: list[int | None] = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(deadline - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                codes.append(None)
        for th in self.readers:
            th.join(10)
        return codes

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


# ------------------------------------------------------------------------------ a session


def finalized_level(bootstrap: str, feature: str) -> int:
    """The finalized max level of ``feature`` (ApiVersions v3's FinalizedFeatures), 0 when not finalized."""
    from odradek.client.wire import WireClient  # here: the workers need none of kio

    with WireClient(bootstrap, timeout=15, client_id="share-bench") as w:
        r = w.request(18, 3, client_software_name="share-bench", client_software_version="1")
    return next((int(f.max_version_level) for f in r.finalized_features if f.name == feature), 0)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)


def set_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest on the GROUP resource (IncrementalAlterConfigs, as kafka-configs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def produce(bootstrap: str, topic: str, n: int, value: bytes, batch_bytes: int, timeout: float) -> float:
    """n records of ``value``, acks=all; the seconds it took (not part of any figure)."""
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": batch_bytes,
                  "queue.buffering.max.kbytes": 262144})
    t0 = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(timeout) != 0 or failed:
        raise KafkaException(f"produce to {topic}: {len(failed)} failed ({failed[:1]}), or not flushed in {timeout} s")
    return time.monotonic() - t0


def warm_up(bootstrap: str, timeout: float) -> None:
    """One share group reads one record of its own topic: the share coordinator's state topic and the
    group's are made before the clock."""
    create_topic(bootstrap, WARM_TOPIC)
    set_earliest(bootstrap, WARM_GROUP)
    produce(bootstrap, WARM_TOPIC, 1, b"warm", 16384, timeout)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": WARM_GROUP})
    c.subscribe([WARM_TOPIC])
    try:
        deadline = time.monotonic() + timeout
        while not [m for m in c.poll(0.5) or [] if m.error() is None]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the warm-up share consumer got nothing in {timeout:.0f} s")
        c.commit_sync(30)
    finally:
        c.close()


def new_broker(kind: str, workdir: Path) -> BenchBroker:
    if kind == "kafka":
        return KafkaBroker(workdir, features={"share.version": SHARE_VERSION})
    return OdradekBroker(workdir)


def run_session(kind: str, workdir: Path, records: int, consumers: int, size: int, batch_bytes: int,
                ack_mode: str, timeout: float) -> dict[str, Any]:
    """One fresh broker of ``kind``, filled, then read by ``consumers`` share consumers; the figures."""
    out: dict[str, Any] = {"broker": kind, "consumers": consumers, "records": records, "size": size,
                           "ack_mode": ack_mode}
    broker = new_broker(kind, workdir)
    workers: Workers | None = None
    try:
        broker.start(timeout)
        b = broker.bootstrap
        out["share_version"] = finalized_level(b, "share.version")
        if out["share_version"] < 1:
            raise RuntimeError(f"{kind}: share groups are not enabled (share.version {out['share_version']})")
        create_topic(b, TOPIC)
        broker.wait_partitions_on_disk(TOPIC, 1, timeout)
        set_earliest(b, GROUP)
        warm_up(b, timeout)
        out["produce_s"] = round(produce(b, TOPIC, records, os.urandom(size), batch_bytes, timeout), 3)
        tally = Tally(records)
        workers = Workers(b, consumers, tally, ack_mode, timeout)
        cpu0 = [broker.cpu_split()]
        workers.tell("go")
        finished = tally.done.wait(timeout)
        cpu1 = [broker.cpu_split()]
        codes = workers.finish()
        user, system = cpu_delta(cpu0, cpu1)
        out.update(tally.summary())
        out["broker_cpu_s"] = round(user + system, 3)
        out["broker_cpu_sys_s"] = round(system, 3)
        if out.get("elapsed_s"):
            out["busy_cores"] = round((out["broker_cpu_s"] + out["consumer_cpu_s"]) / out["elapsed_s"], 2)
        out["peak_rss_mb"] = round(broker.peak_rss_mb(), 1)
        if tally.errors:
            out["client_errors"] = tally.errors[:5]
        if not finished:
            raise TimeoutError(f"{tally.acked:,} of {records:,} records acknowledged after {timeout:.0f} s")
        if any(c != 0 for c in codes):
            raise RuntimeError(f"share consumer exit codes {codes}")
    except Exception as e:  # recorded; the other sessions go on
        out["error"] = f"{type(e).__name__}: {e}"
        log(f"{kind} K={consumers}: {out['error']}")
    finally:
        if workers is not None:
            workers.kill()
        broker.stop()
        broker.kill()
    return out


# ------------------------------------------------------------------------------ the report

ROWS: tuple[tuple[str, str, str], ...] = (
    ("acked_rps", "records/s acknowledged", ",.0f"),
    ("acked_after_first_rps", "  the same from 1st delivery", ",.0f"),
    ("delivered_rps", "records/s delivered", ",.0f"),
    ("elapsed_s", "seconds to the last ack", ".2f"),
    ("first_delivery_s", "seconds to the first delivery", ".2f"),
    ("redelivered", "redeliveries (count > 1)", ",.0f"),
    ("duplicates", "duplicate deliveries", ",.0f"),
    ("broker_cpu_s", "broker CPU s", ".2f"),
    ("consumer_cpu_s", "consumers' CPU s (sum)", ".2f"),
    ("busy_cores", "busy cores (broker+consumers)", ".2f"),
)


def session_line(r: dict[str, Any]) -> str:
    head = f"K={r['consumers']:<3} rep {r.get('rep', 0) + 1} {r['broker']:8s}"
    if "error" in r:
        return f"{head} ERROR {r['error']}"
    return (f"{head} {r.get('acked_rps', 0):>10,.0f} rec/s acked  {r.get('delivered_rps', 0):>10,.0f} delivered  "
            f"{r.get('elapsed_s', 0):6.2f} s  redelivered {r.get('redelivered', 0):,}  dup {r.get('duplicates', 0):,}  "
            f"broker CPU {r.get('broker_cpu_s', 0):.2f} s  consumers CPU {r.get('consumer_cpu_s', 0):.2f} s")


def compare_lines(results: list[dict[str, Any]]) -> list[str]:
    """Per consumer count and measure: each broker's repetitions -> their median, and Odradek / Kafka of the
    medians. A session that failed is shown as "-" and left out of the median."""
    lines: list[str] = []
    for k in sorted({int(r["consumers"]) for r in results}):
        runs = [r for r in results if r["consumers"] == k]
        lines.append(f"K={k} share consumer{'s' if k != 1 else ''}:")
        for key, label, spec in ROWS:
            meds: dict[str, float] = {}
            cells = []
            for kind in BROKERS:
                vals = [None if "error" in r else r.get(key) for r in runs if r["broker"] == kind]
                if not vals:
                    continue
                got = [float(v) for v in vals if v is not None]
                if got:
                    meds[kind] = statistics.median(got)
                cells.append(f"{kind} " + " ".join("-" if v is None else format(v, spec) for v in vals)
                             + (f" -> {format(meds[kind], spec)}" if kind in meds else ""))
            ratio = (f"{meds['odradek'] / meds['kafka']:.2f}x" if "odradek" in meds and meds.get("kafka")
                     else "n/a")
            lines.append(f"  {label:30s} " + "  ".join(f"{c:34s}" for c in cells) + f" O/K {ratio}")
    return lines


def parse_consumers(text: str) -> list[int]:
    out = [int(x) for x in text.split(",") if x.strip()]
    if not out or any(k < 1 for k in out):
        raise argparse.ArgumentTypeError(f"--consumers wants counts >= 1, comma-separated, not {text!r}")
    return out


def parse_brokers(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out or any(x not in BROKERS for x in out):
        raise argparse.ArgumentTypeError(f"--brokers wants a comma-separated subset of {','.join(BROKERS)}")
    return out


def session_order(brokers: Sequence[str], rep: int) -> list[str]:
    """The brokers in the order given in odd repetitions (rep 0, 2, ...), reversed in even ones."""
    return list(brokers) if rep % 2 == 0 else list(reversed(brokers))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024, help="bytes per record value")
    ap.add_argument("--batch-bytes", type=int, default=16384, help="the filling producer's batch.size")
    ap.add_argument("--consumers", type=parse_consumers, default=[1, 5, 20], help="share consumer counts, e.g. 1,5,20")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--brokers", type=parse_brokers, default=list(BROKERS), help="odradek,kafka (the order of rep 1)")
    ap.add_argument("--ack-mode", choices=ACK_MODES, default="explicit")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per step (start, produce, consume)")
    ap.add_argument("--dir", type=Path, default=None, help="parent of the brokers' directories")
    ap.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the raw results here")
    # a worker process (started by the bench itself)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", default=TOPIC, help=argparse.SUPPRESS)
    ap.add_argument("--group", default=GROUP, help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.bootstrap, args.topic, args.group, args.index, args.ack_mode)

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="odradek-share-bench-", dir=args.dir) as tmp:
        for k in args.consumers:
            for rep in range(args.reps):
                for kind in session_order(args.brokers, rep):
                    d = Path(tmp) / f"{kind}-k{k}-{rep}"
                    log(f"{kind}: {k} share consumer(s), repetition {rep + 1}")
                    r = run_session(kind, d, args.records, k, args.size, args.batch_bytes, args.ack_mode,
                                    args.timeout)
                    r["rep"] = rep
                    results.append(r)
                    print(session_line(r), flush=True)
                    shutil.rmtree(d, ignore_errors=True)
                    os.sync()
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k in (
            "records", "size", "batch_bytes", "consumers", "reps", "brokers", "ack_mode")}, "cpus": os.cpu_count(),
            "runs": results}, indent=1, default=str))
    print(f"\n{args.records:,} records x {args.size} B on one partition, one share group, {args.ack_mode} "
          f"acknowledgements; from the first subscribe to the last acknowledgement; each repetition -> median")
    for text in compare_lines(results):
        print(text)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
