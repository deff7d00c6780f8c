"""Freshness of change data capture up to the broker: a commit in PostgreSQL → its change readable
(read_committed) on the broker, through Debezium's PostgreSQL connector on one Kafka Connect worker with
exactly-once sources.

    python bench/cdc_freshness.py [--broker odradek|kafka] [--rate 1000] [--seconds 30] [--poll-interval-ms 500]

Starts the broker (bench/brokers.py), a PostgreSQL of its own (odradek.devcluster.postgres), one Connect
worker (peers/connect_peer.py) and one connector for the retail tables of
odradek.devcluster.cdc_workload; then commits transactions at ``--rate`` changes per second (batches of
transactions every 100 ms, one psql call each) for ``--seconds``, while a consumer reads the three topics.
A change's freshness is the time it was read less its commit time in PostgreSQL (the envelope's
``source.ts_ms``, from the commit record, in milliseconds): same machine, same clock. Prints the count and
the percentiles. The worker polls PostgreSQL's replication stream and commits one Kafka transaction per poll
(``transaction.boundary=poll``), so its ``poll.interval.ms`` (Debezium's default 500 ms) bounds the wait.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))

import connect_peer  # noqa: E402
from brokers import KafkaBroker, OdradekBroker, free_port  # noqa: E402
from confluent_kafka import Consumer  # noqa: E402

from odradek.devcluster.cdc_workload import TABLES, RetailWorkload  # noqa: E402
from odradek.devcluster.postgres import PostgresServer  # noqa: E402

PREFIX = "pg"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("odradek", "kafka"), default="odradek")
    ap.add_argument("--rate", type=int, default=1000, help="changes per second")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--poll-interval-ms", type=int, default=None, help="Debezium's poll.interval.ms (default 500)")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="cdc-freshness-"))
    broker = (KafkaBroker if args.broker == "kafka" else OdradekBroker)(base / args.broker)
    broker.start()
    postgres = PostgresServer().start()
    worker = connect_peer.ConnectWorker(base / "worker", broker.bootstrap, free_port(), group_id="freshness")
    latencies: list[float] = []
    stop = threading.Event()
    try:
        workload = RetailWorkload(seed=1)
        postgres.psql(workload.schema_sql())
        seed, _ = workload.seed(customers=50, orders=50)
        postgres.psql(seed)
        worker.start()
        extra = {"poll.interval.ms": str(args.poll_interval_ms)} if args.poll_interval_ms else {}
        worker.put_connector("shop", connect_peer.debezium_postgres_config(
            port=postgres.port, database="postgres", topic_prefix=PREFIX, partitions=3,
            tables=[RetailWorkload.qualified(t) for t in TABLES], extra=extra))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                tasks = worker.status("shop").get("tasks", [])
            except connect_peer.RestError:  # 404 until the worker has written the connector's first status
                tasks = []
            if tasks and tasks[0]["state"] == "RUNNING":
                break
            time.sleep(0.5)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "freshness-reader",
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
        consumer.subscribe([f"{PREFIX}.shop.{t}" for t in TABLES])

        def consume() -> None:
            while not stop.is_set():
                for m in consumer.consume(1000, 0.05):
                    if m.error() is not None:
                        print(f"consumer: {m.error()}", file=sys.stderr)
                        continue
                    if m.value() is None:  # a tombstone
                        continue
                    now_ms = time.time() * 1000
                    env = json.loads(m.value())
                    if env.get("op") != "r":
                        latencies.append(now_ms - env["source"]["ts_ms"])

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        time.sleep(3)  # the consumer has joined and read the snapshot
        latencies.clear()
        changes = 0
        start = time.monotonic()
        tick = start
        while time.monotonic() - start < args.seconds:
            # every 100 ms, one psql call with the transactions that bring the count to rate × time so far
            scripts = []
            while changes < args.rate * (tick + 0.1 - start):
                script, done = workload.transactions(1, rollback_every=0)
                scripts.append(script)
                changes += len(done)
            if scripts:
                postgres.psql("".join(scripts))
            tick += 0.1
            time.sleep(max(0.0, tick - time.monotonic()))
        elapsed = time.monotonic() - start
        time.sleep(5)
        stop.set()
        reader.join(10)
        consumer.close()
    finally:
        stop.set()
        worker.stop()
        postgres.stop(remove=True)
        broker.stop()
    lat = sorted(latencies)
    if not lat:
        print("no changes read")
        return 1
    q = statistics.quantiles(lat, n=100)
    print(f"{args.broker}: {changes} changes committed in {elapsed:.1f} s ({changes / elapsed:.0f}/s), "
          f"{len(lat)} read; commit → readable ms: p50 {q[49]:.0f}, p90 {q[89]:.0f}, p99 {q[98]:.0f}, "
          f"max {lat[-1]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
