"""W6: broker start time with 1,000 partitions and N GB on disk, after a clean stop and after kill -9.

Odradek's data is written fast and directly through odradek.log (valid v2 batches of 16 x 1 KB records,
appended through Log.append_as_leader as the broker would, then a clean LogManager shutdown) into the
log directory of a broker that created the topic and was stopped. Kafka's (``kind="kafka"``, the
peer of bench/run.py) is produced through the broker, N GB of 1 KB records with rdkafka_performance
(acks=1, a random partition each), before a clean stop. Each repetition then:
  1. starts the broker (after a clean stop) and times it until ApiVersions is answered;
  2. produces ``crash_records`` 1 KB records over all partitions (acks=1) and kills the broker with -9;
  3. starts it again and times the recovery;
  4. stops it cleanly for the next repetition.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import rdkafka_perf
from brokers import BenchBroker, KafkaBroker, OdradekBroker

TOPIC = "w6"
BATCH_RECORDS = 16
RECORD_SIZE = 1024


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        request_timeout=timeout)[topic].result(timeout)


def fill(logdir: Path, topic: str, partitions: int, total_bytes: int) -> dict[str, float]:
    """Append ``total_bytes`` of record batches spread evenly over the topic's partitions."""
    from odradek.log import LogConfig, LogManager
    from odradek.protocol.records import build_batch, validate_batches

    now = int(time.time() * 1000)
    value = os.urandom(RECORD_SIZE)
    batch = build_batch([(None, value)] * BATCH_RECORDS, timestamp=now)
    headers = validate_batches(batch)
    per_partition = max(1, total_bytes // partitions // len(batch))
    mgr = LogManager([logdir], lambda _t: LogConfig())
    mgr.startup()
    t0 = time.monotonic()
    written = 0
    try:
        for p in range(partitions):
            lg = mgr.get_log(topic, p)
            if lg is None:
                raise RuntimeError(f"log {topic}-{p} missing in {logdir}: was the topic created?")
            for _ in range(per_partition):
                lg.append_as_leader(bytearray(batch), headers, 0, now)
            lg.update_high_watermark(lg.log_end_offset)
            written += per_partition * len(batch)
    finally:
        mgr.shutdown()
    return {"bytes": written, "fill_s": time.monotonic() - t0}


def crash_load(bootstrap: str, records: int, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "odradek", "perf", "produce", "--bootstrap-server", bootstrap, "--topic", TOPIC,
           "--num-records", str(records), "--record-size", str(RECORD_SIZE), "--acks", "1", "--json",
           "--timeout", str(timeout)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
    import json

    try:
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"error": f"perf produce exited {out.returncode}: {out.stderr[-500:]}"}
    return result


def fill_through_broker(broker: BenchBroker, partitions: int, total_bytes: int) -> dict[str, float]:
    """Produce ``total_bytes`` of 1 KB records (acks=1, a random partition each) with rdkafka_performance."""
    records = max(partitions, total_bytes // RECORD_SIZE)
    t0 = time.monotonic()
    result, _ = rdkafka_perf.run(rdkafka_perf.ensure_built(), "produce", broker.bootstrap, TOPIC, records, RECORD_SIZE,
                                 acks="1", partitions=partitions, latency=False, props={"linger.ms": "50"},
                                 timeout_s=3600)
    if "error" in result:
        raise RuntimeError(f"filling {TOPIC}: {result['error']}")
    return {"bytes": int(result["bytes"]), "fill_s": time.monotonic() - t0}


def run_w6(workdir: Path, gb: float, partitions: int, repeat: int, crash_records: int,
           log: Any = print, kind: str = "odradek") -> dict[str, Any]:
    broker: OdradekBroker | KafkaBroker = (KafkaBroker(workdir / "w6-kafka") if kind == "kafka"
                                           else OdradekBroker(workdir / "w6-odradek"))
    out: dict[str, Any] = {"broker": kind, "partitions": partitions, "gb_requested": gb, "runs": []}
    try:
        broker.start()
        create_topic(broker.bootstrap, TOPIC, partitions)
        broker.wait_partitions_on_disk(TOPIC, partitions)
        if kind == "kafka":
            log(f"W6 {kind}: producing {gb:g} GB over {partitions} partitions")
            info = fill_through_broker(broker, partitions, int(gb * (1 << 30)))
        rc = broker.stop()
        if rc not in (0, 143 if kind == "kafka" else 0):  # the JVM exits 143 (128 + SIGTERM) after its shutdown
            raise RuntimeError(f"broker exited {rc} after SIGTERM")
        if kind != "kafka":
            log(f"W6: writing {gb:g} GB over {partitions} partitions into {broker.logdir}")
            info = fill(broker.logdir, TOPIC, partitions, int(gb * (1 << 30)))
        out["bytes_on_disk"] = info["bytes"]
        out["fill_s"] = round(info["fill_s"], 2)
        log(f"W6 {kind}: wrote {info['bytes'] / (1 << 30):.2f} GB in {info['fill_s']:.1f} s")
        for rep in range(repeat):
            run: dict[str, Any] = {"rep": rep + 1}
            run["clean_start_s"] = round(broker.start(), 3)
            run["clean_start_reported_s"] = broker.reported_start_s()
            run["clean_start_rss_mb"] = round(broker.peak_rss_mb(), 1)
            crash = crash_load(broker.bootstrap, crash_records, timeout=120)
            run["crash_load"] = {k: crash.get(k) for k in ("records", "mb_per_sec", "error") if k in crash}
            broker.kill()
            run["kill9_start_s"] = round(broker.start(), 3)
            run["kill9_start_reported_s"] = broker.reported_start_s()
            run["kill9_start_rss_mb"] = round(broker.peak_rss_mb(), 1)
            rc = broker.stop()
            run["clean_stop_rc"] = rc
            log(f"W6 {kind} rep {rep + 1}: start after clean stop {run['clean_start_s']:.2f} s, "
                f"after kill -9 {run['kill9_start_s']:.2f} s (broker's own figures "
                f"{run['clean_start_reported_s']} / {run['kill9_start_reported_s']} s)")
            out["runs"].append(run)
    except Exception as e:  # reported in the table, the rest of the benchmark goes on
        out["error"] = f"{type(e).__name__}: {e}"
        log(f"W6 failed: {out['error']}\n{broker.log_tail(20)}")
    finally:
        broker.kill()
    return out
