"""Pipeline benchmark (not a test): prints figures.

    python bench/pipeline_bench.py [--bootstrap-server HOST:PORT] [--messages 1000000] [--value-bytes 100]
                                   [--rate 1000] [--seconds 30] [--master local[2]] [--skip-read] [--skip-freshness]
                                   [--min-partitions 0,4] [--readers librdkafka,wire] [--rounds 3] [--partitions 3]
                                   [--variant 'NAME;KEY=VALUE;...' ...] [--all-batches]

1. source read: a topic of ``--messages`` messages (``--partitions``, 3) read by a Spark batch query through
   the ``odradek`` source (``write.format("noop")``): rows/s and MB/s of key+value payload; the same
   ranges read by the bare client (``kafka_client.read_range``, one process) for reference. Both
   readers in the same run: ``reader=librdkafka`` (confluent-kafka's consumer, a Python object per
   record) and ``reader=wire`` (the default: Fetch responses decoded into Arrow in C).
2. freshness: ``odradek pipeline run`` (a separate process, continuous trigger) on a CDC topic while
   events are produced at ``--rate`` per second for ``--seconds``; per event, produced (the record's
   CreateTime) → visible in the ODS (``_loaded_at`` of its row): p50 / p99 / max, over all events and
   after the first 5 s. Each ``--variant`` runs it once more in the same run, in order, with its settings
   (see ``Variant``: ``spark.*`` keys go to ``[spark] conf``, ``job.KEY`` to ``[spark]``, ``src=DIR`` runs
   the job from another source tree, the others to ``[spark] source_options``), e.g. ``--variant
   'before;src=/work/main/src' --variant after`` for a before/after pair of code changes. ``--all-batches``
   prints every line of the job (its start-up and warm-up, then each micro-batch with the seconds since
   production started) and the p50/p99/max of the events produced in each of the first 10 seconds.

Without --bootstrap-server a broker is started in a temporary directory: Odradek, or with ``--broker
kafka`` Apache Kafka 4.4 (one combined KRaft node, bench/brokers.py's KafkaBroker).

``--jvm-connector`` also reads the same topic from the same broker, in the same Spark session and in
turn with the source's settings, through Spark's own JVM Kafka connector (``format("kafka")``,
spark-sql-kafka-0-10 4.2.0 with its kafka-clients 3.9.2, fetched from Maven Central by
``peers/kafka_peer.py fetch-spark`` and given to Spark in ``spark.jars``; ``startingOffsets`` earliest,
``endingOffsets`` latest, the same ``minPartitions``), and prints the source's rows/s over the
connector's. Both produce the same seven columns (key, value, topic, partition, offset, timestamp,
timestampType) into the ``noop`` sink.

    python bench/pipeline_bench.py --skip-freshness --jvm-connector --readers wire --messages 5000000
    python bench/pipeline_bench.py --skip-freshness --jvm-connector --readers wire --broker kafka
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def fill(bootstrap: str, topic: str, n: int, value_bytes: int, partitions: int = 3) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "compression.type": "none", "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(value_bytes)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%09d" % i, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


JVM_CONNECTOR = "JVM connector spark-sql-kafka-0-10"


def connector_ratios(rates: dict[str, float]) -> list[str]:
    """Each odradek source setting's rows/s over the JVM connector's at the same minPartitions (the issue's
    target: >= 1.0); nothing without a JVM connector run."""
    out = []
    for label, rate in rates.items():
        if not label.startswith("odradek source"):
            continue
        mp = label.split("minPartitions=", 1)[1].split()[0]
        jvm = next((r for k, r in rates.items() if k.startswith(JVM_CONNECTOR) and f"minPartitions={mp} " in k), None)
        if jvm:
            setting = label.split(", ", 1)[1].split(" (", 1)[0]
            out.append(f"ratio odradek source ({setting}) / JVM connector rows/s: {rate / jvm:.2f}")
    return out


def bench_read(bootstrap: str, n: int, value_bytes: int, master: str, min_partitions: list[int] | None = None,
               readers: tuple[str, ...] = ("librdkafka", "wire"), rounds: int = 3, partitions: int = 3,
               jvm_jars: list[Path] | None = None) -> None:
    from odradek.pipeline import kafka_client
    from odradek.pipeline.options import SourceOptions
    from odradek.pipeline.source import arrow_schema, kafka_schema
    from odradek.pipeline.spark import build_session

    topic = f"bench-read-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    secs = fill(bootstrap, topic, n, value_bytes, partitions)
    payload_mb = n * (value_bytes + 10) / 1e6
    print(f"produced {n:,} messages ({payload_mb:.0f} MB key+value) in {secs:.1f} s")

    schema = arrow_schema(kafka_schema(False))
    for reader in readers:
        opts = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "reader": reader},
                                   streaming=False)
        lookup = kafka_client.OffsetLookup(opts)
        ends = lookup.latest(lookup.partitions())
        t0 = time.perf_counter()
        rows = 0
        for (t, p), end in ends.items():
            for b in kafka_client.read_range(opts, schema, t, p, 0, end):
                rows += b.num_rows
        secs = time.perf_counter() - t0
        assert rows == n, (rows, n)
        print(f"client read_range, reader={reader} (1 process): {rows:,} rows in {secs:.2f} s = "
              f"{rows / secs:,.0f} rows/s, {payload_mb / secs:.1f} MB/s")

    conf = {"spark.sql.shuffle.partitions": "2"}
    if jvm_jars:
        conf["spark.jars"] = ",".join(str(j) for j in jvm_jars)
    spark = build_session(master, "odradek-bench", conf, log_level="ERROR")
    # every setting is read once to warm up, then the settings take turns, ``rounds`` times: the JVM's
    # JIT speeds each later read up, so settings measured one after the other favour the last one
    runs: dict[str, tuple[Any, list[float]]] = {}
    for reader in readers:
        for mp in min_partitions or [0]:
            df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                  .option("reader", reader))
            if mp:
                df = df.option("minPartitions", str(mp))
            df = df.load()
            label = f"odradek source, reader={reader}, minPartitions={mp or 'default'} ({df.rdd.getNumPartitions()} tasks)"
            runs[label] = (df, [])
    if jvm_jars:
        for mp in min_partitions or [0]:
            df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                  .option("startingOffsets", "earliest").option("endingOffsets", "latest"))
            if mp:
                df = df.option("minPartitions", str(mp))
            df = df.load()
            label = f"{JVM_CONNECTOR}, minPartitions={mp or 'default'} ({df.rdd.getNumPartitions()} tasks)"
            runs[label] = (df, [])
    for df, _times in runs.values():
        df.write.format("noop").mode("overwrite").save()  # warm-up: workers, codegen, JIT
    for _ in range(rounds):
        for df, times in runs.values():
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            times.append(time.perf_counter() - t0)
    rates: dict[str, float] = {}
    for label, (_df, times) in runs.items():
        med = statistics.median(times)
        rates[label] = n / med
        print(f"spark batch read ({master}), {label}: {n:,} rows, median of {rounds} in turn {med:.2f} s = "
              f"{n / med:,.0f} rows/s, {payload_mb / med:.1f} MB/s (runs: "
              + ", ".join(f"{n / t / 1e6:.2f}" for t in times) + " M rows/s)", flush=True)
    for line in connector_ratios(rates):
        print(line)
    df = next(iter(runs.values()))[0]
    ceiling(spark, n, master)
    t0 = time.perf_counter()
    count = df.count()
    secs = time.perf_counter() - t0
    assert count == n, (count, n)
    print(f"spark count(): {count:,} in {secs:.2f} s")
    spark.stop()


def ceiling(spark: Any, n: int, master: str) -> None:
    """Spark's own ceiling for a Python data source in this run: a source whose tasks yield one prebuilt
    Arrow batch of 100 B values over and over (no broker, no decoding), with as many tasks as the topic
    has partitions."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from odradek.pipeline.source import kafka_schema

    class Part(InputPartition):
        def __init__(self, i: int) -> None:
            self.i = i

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [Part(i) for i in range(3)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import numpy as np
            import pyarrow as pa

            from odradek.pipeline.source import arrow_schema

            rows = 50_000
            b = pa.RecordBatch.from_arrays([
                pa.array([b"k%09d" % i for i in range(rows)], pa.binary()), pa.array([b"v" * 100] * rows, pa.binary()),
                pa.array(["t"] * rows), pa.array(np.zeros(rows, np.int32)), pa.array(np.arange(rows)),
                pa.array(np.zeros(rows, np.int64)).cast(pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(rows, np.int32))], schema=arrow_schema(kafka_schema(False)))
            for _ in range(n // rows // 3):
                yield b

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_ceiling"

        def schema(self) -> Any:
            return kafka_schema(False)

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    spark.dataSource.register(Source)
    df = spark.read.format("bench_ceiling").load()
    df.write.format("noop").mode("overwrite").save()
    total = n // 50_000 // 3 * 50_000 * 3
    for run in (1, 2):
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        secs = time.perf_counter() - t0
        print(f"spark ceiling ({master}): prebuilt Arrow batches, no broker #{run}: {total:,} rows in {secs:.2f} s = "
              f"{total / secs:,.0f} rows/s")


CONFIG = """
[broker]
bootstrap_servers = "{bootstrap}"
[warehouse]
path = "./warehouse"
checkpoint_dir = "./checkpoints"
[spark]
master = "{master}"
starting_offsets = "earliest"
{spark_keys}[[ods]]
table = "events"
topics = ["{topic}"]
key = ["id"]
version = "source.lsn"
[ods.columns]
id = "Int64"
payload = "String"
"""


@dataclass
class Variant:
    """``NAME;KEY=VALUE;...``: ``spark.*`` keys go to ``[spark] conf``, ``job.KEY`` to ``[spark] KEY`` (a TOML
    value: ``job.warm_up=false``), ``src=DIR`` runs the job from another source tree (e.g. the main
    branch's, for a before/after of code changes in one run), the others to ``[spark] source_options``."""

    name: str
    spark_keys: str = ""
    tables: str = ""
    src: str | None = None

    @classmethod
    def parse(cls, spec: str) -> Variant:
        name, *pairs = spec.split(";")
        conf: dict[str, str] = {}
        source: dict[str, str] = {}
        out = cls(name)
        for pair in pairs:
            k, _, v = pair.partition("=")
            k, v = k.strip(), v.strip()
            if k == "src":
                out.src = os.path.abspath(v)
            elif k.startswith("job."):
                out.spark_keys += f"{k[4:]} = {v}\n"
            else:
                (conf if k.startswith("spark.") else source)[k] = v
        out.tables = "".join(f"[spark.{table}]\n" + "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in d.items())
                             for table, d in (("conf", conf), ("source_options", source)) if d)
        return out


def bench_freshness(bootstrap: str, rate: int, seconds: int, master: str, tmp: Path, variant: str = "default",
                    all_batches: bool = False) -> None:
    from confluent_kafka import Producer

    v = Variant.parse(variant)
    name = v.name
    shown = (v.spark_keys + v.tables).strip() + (f" src={v.src}" if v.src else "")
    print(f"--- freshness, variant {name}" + (f": {shown!r}" if shown else ""))
    topic = f"bench-cdc-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 3)
    work = tmp / f"fresh-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    cfg = work / "pipeline.toml"
    cfg.write_text(CONFIG.format(bootstrap=bootstrap, master=master, topic=topic, spark_keys=v.spark_keys) + v.tables)
    log = open(work / "job.log", "w")  # noqa: SIM115
    env = dict(os.environ)
    if v.src:
        env["PYTHONPATH"] = v.src
    job = subprocess.Popen([sys.executable, "-m", "odradek", "pipeline", "run", "--config", str(cfg)],
                           stdout=subprocess.PIPE, stderr=log, text=True, cwd=work, env=env)
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
        if all_batches:
            print("  (start) " + line.rstrip())
        if line.startswith("batch "):
            break
    lines: list[str] = []

    started = time.perf_counter()

    def pump() -> None:
        assert job.stdout is not None
        for line in job.stdout:
            lines.append(line.rstrip())
            stamped.append(f"{time.perf_counter() - started:6.2f} s {line.rstrip()}")

    stamped: list[str] = []

    threading.Thread(target=pump, daemon=True).start()
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
                          "FROM ods.events_state WHERE id > 0"], capture_output=True, text=True, check=True, env=env)
    r = json.loads(out.stdout)
    print(f"freshness [{name}] (produced -> visible in the ODS) over {int(r['n']):,} events at {rate}/s: "
          f"p50 {r['q'][0]:.0f} ms, p99 {r['q'][1]:.0f} ms, max {int(r['mx'])} ms")
    # the same after the first 5 s of production (the first micro-batches after the start are the slowest)
    out = subprocess.run([sys.executable, "-m", "odradek", "pipeline", "query", "--config", str(cfg), "--format", "jsonl",
                          "SELECT count() AS n, quantiles(0.5, 0.99)(dateDiff('millisecond', _timestamp, _loaded_at)) AS q, "
                          "max(dateDiff('millisecond', _timestamp, _loaded_at)) AS mx "
                          f"FROM ods.events_state WHERE id > {rate * 5}"], capture_output=True, text=True, check=True,
                         env=env)
    r = json.loads(out.stdout)
    print(f"freshness [{name}] after the first 5 s, over {int(r['n']):,} events: "
          f"p50 {r['q'][0]:.0f} ms, p99 {r['q'][1]:.0f} ms, max {int(r['mx'])} ms")
    if all_batches:  # per second of production: where the slow events are
        out = subprocess.run([sys.executable, "-m", "odradek", "pipeline", "query", "--config", str(cfg), "--format",
                              "jsonl", f"SELECT intDiv(id - 1, {rate}) AS s, count() AS n, "
                              "quantiles(0.5, 0.99)(dateDiff('millisecond', _timestamp, _loaded_at)) AS q, "
                              "max(dateDiff('millisecond', _timestamp, _loaded_at)) AS mx "
                              "FROM ods.events_state WHERE id > 0 GROUP BY s ORDER BY s LIMIT 10"],
                             capture_output=True, text=True, check=True, env=env)
        for row in map(json.loads, out.stdout.splitlines()):
            print(f"  second {int(row['s'])}: {int(row['n'])} events, p50 {row['q'][0]:.0f} ms, p99 {row['q'][1]:.0f} ms, "
                  f"max {int(row['mx'])} ms")
    slow = [x for x in lines if x.startswith("batch ") and " trigger " in x
            and int(x.rsplit(" trigger ", 1)[1].split()[0]) > 1000]
    print(f"  micro-batches over 1 s: {len(slow)}" + "".join(f"\n    {x}" for x in slow[:8]))
    phases: dict[str, list[int]] = {}
    batches = [x for x in lines if x.startswith("batch ")]
    if all_batches:
        for x in stamped:
            print("  " + x)
    else:
        for x in batches[:3] + ["..."] + batches[-3:] if len(batches) > 6 else batches:
            print("  " + x)
    for x in batches:
        if " | ms " in x:
            words = x.split(" | ms ", 1)[1].split()
            for name, ms in zip(words[::2], words[1::2], strict=False):
                phases.setdefault(name, []).append(int(ms))
    print(f"{len(batches)} micro-batches; median ms per phase (Spark's durationMs): "
          + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in phases.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--min-partitions", default="0",
                    help="the source's minPartitions (Spark tasks) for the read; a comma-separated list measures each "
                         "in the same run (0: the source's default)")
    ap.add_argument("--readers", default="librdkafka,wire", help="the source readers to measure (comma-separated)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the topic the read measures")
    ap.add_argument("--rounds", type=int, default=3, help="reads of each setting, taken in turn (median printed)")
    ap.add_argument("--jvm-connector", action="store_true",
                    help="also read the topic with Spark's JVM Kafka connector (spark-sql-kafka-0-10) in the same run")
    ap.add_argument("--broker", choices=["odradek", "kafka"], default="odradek",
                    help="the broker started when --bootstrap-server is not given")
    ap.add_argument("--skip-read", action="store_true")
    ap.add_argument("--skip-freshness", action="store_true")
    ap.add_argument("--all-batches", action="store_true",
                    help="print every line of the job after production started, with its time since then")
    ap.add_argument("--variant", action="append", default=[],
                    help="'NAME;KEY=VALUE;...': one more freshness run with these settings (spark.* keys are Spark "
                         "conf, the others source options); repeat for a before/after comparison in one run")
    args = ap.parse_args()
    if os.environ.get("PYTHONPATH"):  # the job runs in its own directory: PYTHONPATH=src must still resolve
        os.environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep)
                                                   if p)
    tmp = Path(tempfile.mkdtemp(prefix="odradek-pipeline-bench-"))
    broker = None
    kafka: Any = None
    try:
        bootstrap = args.bootstrap_server
        if not bootstrap and args.broker == "kafka":
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from brokers import KafkaBroker

            kafka = KafkaBroker(tmp / "kafka")
            kafka.start()
            bootstrap = kafka.bootstrap
            print(f"Apache Kafka 4.4 on {bootstrap}")
        elif not bootstrap:
            broker, bootstrap = start_broker(tmp)
            print(f"embedded broker on {bootstrap}")
        jars = None
        if args.jvm_connector:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))
            import kafka_peer

            jars = kafka_peer.fetch_spark_kafka()
        if not args.skip_read:
            bench_read(bootstrap, args.messages, args.value_bytes, args.master,
                       [int(x) for x in args.min_partitions.split(",")], tuple(args.readers.split(",")), args.rounds,
                       args.partitions, jars)
        if not args.skip_freshness:
            for variant in args.variant or ["default"]:
                bench_freshness(bootstrap, args.rate, args.seconds, args.master, tmp, variant, args.all_batches)
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            broker.wait(60)
        if kafka is not None:
            kafka.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
