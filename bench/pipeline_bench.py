"""Pipeline benchmark (not a test): prints figures.

    python bench/pipeline_bench.py [--bootstrap-server HOST:PORT] [--messages 1000000] [--value-bytes 100]
                                   [--rate 1000] [--seconds 30] [--master local[2]] [--skip-read] [--skip-freshness]

1. source read: a topic of ``--messages`` messages (3 partitions) read by a Spark batch query through
   the ``odradek`` source (``write.format("noop")``): rows/s and MB/s of key+value payload; the same
   ranges read by the bare client (``kafka_client.read_range``, one process) for reference.
2. freshness: ``odradek pipeline run`` (a separate process, continuous trigger) on a CDC topic while
   events are produced at ``--rate`` per second for ``--seconds``; per event, produced (the record's
   CreateTime) → visible in the ODS (``_loaded_at`` of its row): p50 / p99 / max.

Without --bootstrap-server an embedded broker is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = open(tmp / "broker.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "broker", "--override",
                             f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp / 'data'}"],
                            stdout=log, stderr=log)
    log.close()
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("broker did not start")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def fill(bootstrap: str, topic: str, n: int, value_bytes: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "compression.type": "none", "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(value_bytes)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%09d" % i, value=value, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def bench_read(bootstrap: str, n: int, value_bytes: int, master: str) -> None:
    from odradek.pipeline import kafka_client
    from odradek.pipeline.options import SourceOptions
    from odradek.pipeline.source import arrow_schema, kafka_schema
    from odradek.pipeline.spark import build_session

    topic = f"bench-read-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 3)
    secs = fill(bootstrap, topic, n, value_bytes)
    payload_mb = n * (value_bytes + 10) / 1e6
    print(f"produced {n:,} messages ({payload_mb:.0f} MB key+value) in {secs:.1f} s")

    opts = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    schema = arrow_schema(kafka_schema(False))
    lookup = kafka_client.OffsetLookup(opts)
    ends = lookup.latest(lookup.partitions())
    t0 = time.perf_counter()
    rows = 0
    for (t, p), end in ends.items():
        for b in kafka_client.read_range(opts, schema, t, p, 0, end):
            rows += b.num_rows
    secs = time.perf_counter() - t0
    print(f"client read_range (1 process): {rows:,} rows in {secs:.2f} s = {rows / secs:,.0f} rows/s, "
          f"{payload_mb / secs:.1f} MB/s")

    spark = build_session(master, "odradek-bench", {"spark.sql.shuffle.partitions": "2"}, log_level="ERROR")
    df = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    df.limit(10).write.format("noop").mode("overwrite").save()  # warm-up: workers, codegen
    for run in (1, 2):
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        secs = time.perf_counter() - t0
        print(f"spark batch read ({master}) #{run}: {n:,} rows in {secs:.2f} s = {n / secs:,.0f} rows/s, "
              f"{payload_mb / secs:.1f} MB/s")
    t0 = time.perf_counter()
    count = df.count()
    secs = time.perf_counter() - t0
    assert count == n, (count, n)
    print(f"spark count(): {count:,} in {secs:.2f} s")
    spark.stop()


CONFIG = """
[broker]
bootstrap_servers = "{bootstrap}"
[warehouse]
path = "./warehouse"
checkpoint_dir = "./checkpoints"
[spark]
master = "{master}"
starting_offsets = "earliest"
[[ods]]
table = "events"
topics = ["{topic}"]
key = ["id"]
version = "source.lsn"
[ods.columns]
id = "Int64"
payload = "String"
"""


def bench_freshness(bootstrap: str, rate: int, seconds: int, master: str, tmp: Path) -> None:
    from confluent_kafka import Producer

    topic = f"bench-cdc-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 3)
    work = tmp / "fresh"
    work.mkdir()
    cfg = work / "pipeline.toml"
    cfg.write_text(CONFIG.format(bootstrap=bootstrap, master=master, topic=topic))
    log = open(work / "job.log", "w")  # noqa: SIM115
    job = subprocess.Popen([sys.executable, "-m", "odradek", "pipeline", "run", "--config", str(cfg)],
                           stdout=subprocess.PIPE, stderr=log, text=True, cwd=work)
    assert job.stdout is not None
    print("waiting for the job to start ...")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})

    def event(i: int) -> bytes:
        return json.dumps({"op": "c", "before": None, "after": {"id": i, "payload": "x" * 50},
                           "source": {"db": "bench", "table": "events", "lsn": i}, "ts_ms": int(time.time() * 1000)}).encode()

    # warm up: the first micro-batch pays for worker start-up and code generation
    p.produce(topic, key=b'{"id": 0}', value=event(0))
    p.flush()
    for line in job.stdout:
        if line.startswith("batch "):
            break
    total = rate * seconds
    t0 = time.perf_counter()
    for i in range(1, total + 1):
        due = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            time.sleep(min(0.001, due - now))
        p.produce(topic, key=json.dumps({"id": i}).encode(), value=event(i))
        p.poll(0)
    p.flush()
    print(f"produced {total:,} events in {time.perf_counter() - t0:.1f} s ({rate}/s)")
    time.sleep(5)
    job.send_signal(signal.SIGTERM)
    try:
        job.wait(120)
    except subprocess.TimeoutExpired:
        job.kill()
    log.close()
    out = subprocess.run([sys.executable, "-m", "odradek", "pipeline", "query", "--config", str(cfg), "--format", "jsonl",
                          "SELECT count() AS n, quantiles(0.5, 0.99)(dateDiff('millisecond', _timestamp, _loaded_at)) AS q, "
                          "max(dateDiff('millisecond', _timestamp, _loaded_at)) AS mx "
                          "FROM ods.events_state WHERE id > 0"], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    print(f"freshness (produced -> visible in the ODS) over {int(r['n']):,} events at {rate}/s: "
          f"p50 {r['q'][0]:.0f} ms, p99 {r['q'][1]:.0f} ms, max {int(r['mx'])} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-read", action="store_true")
    ap.add_argument("--skip-freshness", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="odradek-pipeline-bench-"))
    broker = None
    try:
        bootstrap = args.bootstrap_server
        if not bootstrap:
            broker, bootstrap = start_broker(tmp)
            print(f"embedded broker on {bootstrap}")
        if not args.skip_read:
            bench_read(bootstrap, args.messages, args.value_bytes, args.master)
        if not args.skip_freshness:
            bench_freshness(bootstrap, args.rate, args.seconds, args.master, tmp)
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            broker.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
