"""Start to the first acknowledged produce, and idle RSS: Odradek beside Apache Kafka 4.4 (``--peer kafka``).

    python bench/start_bench.py [--peer kafka] [--reps 3] [--idle-seconds 10] [--record-size 1024]
                                [--json FILE]

Per repetition and broker (the brokers alternate: Odradek first in odd repetitions, Kafka first in even
ones), on a fresh log dir:

* fresh: the clock starts when the broker's process is launched (``python -m odradek broker``; Kafka's
  JVM, ``java ... kafka.Kafka server.properties`` as kafka-server-start.sh runs it). A client probes
  ApiVersions every 10 ms until it is answered (``answer``), then a confluent-kafka producer
  (acks=all, linger.ms=0) sends one record to a topic that does not exist yet: the broker creates it
  (``auto.create.topics.enable``, true by default in both) and the clock stops at the record's
  delivery report (``first ack``). Kafka's log dir is formatted (``kafka-storage format``, a JVM of its
  own) before the clock starts, as a user formats once before the first start; its seconds are shown
  apart (``format``);
* idle RSS: ``--idle-seconds`` after that acknowledgement, with no client connected, the broker
  process's VmRSS (and its peak, VmHWM) from /proc/<pid>/status. Kafka's heap is Kafka's default,
  ``-Xmx1G -Xms1G`` (kafka-server-start.sh's KAFKA_HEAP_OPTS; G1 does not touch the heap's pages
  ahead, so RSS counts what it used);
* restart: a clean stop (SIGTERM), then the same clock to the first acknowledged produce to the
  topic made above (it exists now).

Each run's directory is deleted and ``sync`` runs before the next, whichever broker wrote it. The
summary prints every repetition, the medians and the ratios Odradek / Kafka (the issue's targets:
start to first acknowledged produce <= 1/5 of Kafka's, idle RSS <= 1/4 of Kafka's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import BenchBroker, KafkaBroker, OdradekBroker, kafka_peer  # noqa: E402
from first_produce import produce_acked, timed_start, value  # noqa: E402

KINDS = ("odradek", "kafka")
PHASES = ("fresh", "restart")


def new_broker(kind: str, workdir: Path) -> BenchBroker:
    if kind == "kafka":
        return KafkaBroker(workdir)
    return OdradekBroker(workdir)


def first_ack(broker: BenchBroker, topic: str, args: argparse.Namespace) -> dict[str, float]:
    """From the launch: the first ApiVersions answer and the first acknowledged acks=all produce to ``topic``."""
    def produce(deadline: float) -> float:
        return produce_acked(broker.bootstrap, topic, args.record_size, deadline)

    return timed_start(broker, [("first_ack", produce)], args.timeout)


def run_one(kind: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    broker = new_broker(kind, workdir)
    out: dict[str, Any] = {"broker": kind}
    try:
        if isinstance(broker, KafkaBroker):
            kafka_peer().fetch()
            t = time.monotonic()
            broker.node.format()
            out["format_s"] = round(time.monotonic() - t, 3)
            out["heap"] = " ".join(broker.node.heap)
        out["fresh"] = first_ack(broker, "first", args)
        time.sleep(args.idle_seconds)
        out["idle_rss_mb"] = round(broker.rss_mb(), 1)
        out["peak_rss_mb"] = round(broker.peak_rss_mb(), 1)
        rc = broker.stop()
        if rc not in (0, 143):  # Kafka's JVM exits 143 (128 + SIGTERM) after its clean shutdown
            raise RuntimeError(f"{kind} exited {rc} after SIGTERM")
        out["restart"] = first_ack(broker, "first", args)
        broker.stop()
    except Exception as e:  # recorded; the other runs go on
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        broker.kill()
    return out


def median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


ROWS = (("fresh.answer_s", "fresh start: first ApiVersions answer", "s"),
        ("fresh.first_ack_s", "fresh start: first acknowledged produce", "s"),
        ("restart.answer_s", "restart: first ApiVersions answer", "s"),
        ("restart.first_ack_s", "restart: first acknowledged produce", "s"),
        ("idle_rss_mb", "idle RSS after start", "MB"),
        ("format_s", "kafka-storage format before the first start", "s"))
TARGETS = (("fresh.first_ack_s", "start to first acknowledged produce <= 1/5 of Kafka's", 0.2),
           ("restart.first_ack_s", "restart to first acknowledged produce <= 1/5 of Kafka's", 0.2),
           ("idle_rss_mb", "idle RSS <= 1/4 of Kafka's", 0.25))


def summarise(results: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[str]:
    """The table: per measure and broker every repetition and the median, then Odradek / Kafka of the
    medians and the issue's targets (a ratio only where both brokers have a median)."""
    lines = []
    for key, label, unit in ROWS:
        for kind in kinds:
            vals = [value(r, key) for r in results if r["broker"] == kind]
            if all(v is None for v in vals):
                continue
            each = " ".join("-" if v is None else f"{v:.2f}" if unit == "s" else f"{v:.0f}" for v in vals)
            m = median(vals)
            shown = "-" if m is None else f"{m:.2f}" if unit == "s" else f"{m:.0f}"
            lines.append(f"{label:44s} {kind:8s} {each:>24s} -> {shown} {unit}")
    if len(kinds) == 2:
        for key, label, limit in TARGETS:
            o = median([value(r, key) for r in results if r["broker"] == kinds[0]])
            k = median([value(r, key) for r in results if r["broker"] == kinds[1]])
            if o is None or not k:
                lines.append(f"[n/a ] {label}: n/a")
                continue
            ratio = o / k
            lines.append(f"[{'PASS' if ratio <= limit else 'FAIL'}] {label}: {ratio:.3f}x ({o:g} vs {k:g})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", choices=["kafka"], default=None, help="Apache Kafka 4.4 beside Odradek")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=10.0, help="idle time before RSS is read")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=180.0, help="bound on each start, in seconds")
    ap.add_argument("--dir", type=Path, default=None, help="parent directory for the brokers' data")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    kinds: tuple[str, ...] = KINDS if args.peer == "kafka" else ("odradek",)
    base = Path(tempfile.mkdtemp(prefix="odradek-start-bench-", dir=args.dir))
    results: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            for kind in kinds if rep % 2 == 0 else tuple(reversed(kinds)):
                d = base / f"{kind}-{rep}"
                r = run_one(kind, d, args)
                r["rep"] = rep
                shutil.rmtree(d, ignore_errors=True)
                os.sync()
                results.append(r)
                print(f"rep {rep + 1} {kind:8s}: " + (r.get("error") or (
                    f"fresh: answer {r['fresh']['answer_s']:.2f} s, first ack {r['fresh']['first_ack_s']:.2f} s; "
                    f"idle RSS {r['idle_rss_mb']:.0f} MB (peak {r['peak_rss_mb']:.0f}); restart: answer "
                    f"{r['restart']['answer_s']:.2f} s, first ack {r['restart']['first_ack_s']:.2f} s"
                    + (f"; format {r['format_s']:.2f} s, heap {r['heap']}" if "format_s" in r else ""))),
                    flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nmedians of {args.reps}; one {args.record_size} B record, acks=all; idle RSS {args.idle_seconds:g} s "
          f"after the first acknowledgement; load average {os.getloadavg()[0]:.1f}")
    for line in summarise(results, kinds):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
