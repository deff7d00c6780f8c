"""The whole chain: PostgreSQL → Debezium on Kafka Connect → Odradek → ``odradek pipeline run --source
debezium`` (Spark, as a process) → the ODS on chDB, which must equal the database row for row.

One Odradek broker, one PostgreSQL cluster, one Connect worker running Debezium's PostgreSQL connector for
``shop.customers``, ``shop.orders`` and ``shop.order_items`` (topics ``pg.shop.<table>``, three partitions,
written in transactions). The seeded rows reach the ODS through the connector's snapshot (``r``), then a
workload of inserts, updates, primary-key changes (a customer renumbered, cascading to its orders; items
renumbered), deletes (cascading to items), multi-statement transactions, rolled-back transactions and a
column added to ``shop.customers`` streams through. Check 1: once the pipeline has drained, every ODS view
(``SELECT ... FROM <table>_state FINAL WHERE _is_deleted = 0``) equals ``SELECT * FROM`` its PostgreSQL
table (psql), row for row. Then more changes stream while the Spark job (or Odradek) is killed with
SIGKILL mid-run and started again (the job from its checkpoint): check 2, the same equality, no
quarantined record, no version loaded twice.

The two variants (``spark``, ``broker``: which process is killed) share the broker, PostgreSQL, the Connect
worker and its connector (the module fixture ``shop``: their start, the seed and Debezium's snapshot, once);
each runs its own pipeline jobs into a warehouse of its own, which read the Debezium topics from their start
(the snapshot, then the changes of the variants before it), and its own workload on the same database. The
column is added to ``shop.customers`` during the first variant's check 1; a later variant's jobs read the
records from before and after that change all the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from integration.broker import Broker, BrokerFactory, free_port
from pipeline.test_ods import _reap, pipeline_cmd, query

from odradek.devcluster.cdc_workload import KEYS, TABLES, RetailWorkload
from odradek.devcluster.postgres import PostgresError, PostgresServer

from .conftest import connect_peer
from .test_debezium_postgres import BackgroundWorkload

DATABASE = "postgres"
PREFIX = "pg"
CONNECTOR = "shop-ods"
COLUMNS = {
    "customers": {"customer_id": "Int64", "full_name": "String", "email": "Nullable(String)",
                  "phone": "Nullable(String)", "loyalty_tier": "Nullable(String)"},
    "orders": {"order_id": "Int64", "customer_id": "Int64", "status": "String", "amount": "Decimal(12, 2)",
               "created_at": "DateTime64(6, 'UTC')"},
    "order_items": {"item_id": "Int64", "order_id": "Int64", "sku": "String", "qty": "Int32",
                    "price": "Decimal(10, 2)"},
}
DECIMALS = {"amount", "price"}
# the same rows as text on both sides: timestamps as epoch milliseconds, NULL as ''
PG_SELECT = {
    "customers": "SELECT customer_id, full_name, email, phone, loyalty_tier FROM shop.customers",
    "orders": "SELECT order_id, customer_id, status, amount, (extract(epoch FROM created_at) * 1000)::bigint "
              "FROM shop.orders",
    "order_items": "SELECT item_id, order_id, sku, qty, price FROM shop.order_items",
}
ODS_SELECT = {
    "customers": "SELECT customer_id, full_name, email, phone, loyalty_tier FROM ods.customers",
    "orders": "SELECT order_id, customer_id, status, toString(amount) AS amount, "
              "toUnixTimestamp64Milli(created_at) AS created_at FROM ods.orders",
    "order_items": "SELECT item_id, order_id, sku, qty, toString(price) AS price FROM ods.order_items",
}


def config_text(bootstrap: str) -> str:
    out = f"""
[broker]
bootstrap_servers = "{bootstrap}"
[warehouse]
path = "./warehouse"
checkpoint_dir = "./checkpoints"
[spark]
master = "local[2]"
max_offsets_per_trigger = 400
trigger_interval = "1 seconds"
warm_up = false
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""
    for table, cols in COLUMNS.items():
        out += f'\n[[ods]]\ntable = "{table}"\ntopics = ["unused.{table}"]\nkey = ["{KEYS[table]}"]\n[ods.columns]\n'
        out += "".join(f'{c} = "{t}"\n' for c, t in cols.items())
    return out


def norm(table: str, row: list[Any]) -> tuple[Any, ...]:
    names = list(COLUMNS[table])
    out: list[Any] = []
    for name, v in zip(names, row, strict=True):
        if v is None or v == "":
            out.append(None)
        elif name in DECIMALS:
            out.append(Decimal(str(v)))
        else:
            out.append(str(v))
    return tuple(out)


def pg_rows(postgres: PostgresServer, table: str) -> list[tuple[Any, ...]]:
    return sorted((norm(table, r) for r in postgres.query(PG_SELECT[table] + ";", DATABASE)),
                  key=lambda r: int(r[0]))


def ods_rows(cfg: Path, table: str) -> list[tuple[Any, ...]]:
    return sorted((norm(table, list(r.values())) for r in query(cfg, ODS_SELECT[table])), key=lambda r: int(r[0]))


def differences(postgres: PostgresServer, cfg: Path) -> dict[str, str]:
    """Per table whose ODS differs from PostgreSQL: a short description ({} when all are equal)."""
    out: dict[str, str] = {}
    for table in TABLES:
        want, got = pg_rows(postgres, table), ods_rows(cfg, table)
        if want != got:
            missing = [r for r in want if r not in got][:3]
            extra = [r for r in got if r not in want][:3]
            out[table] = f"{len(want)} rows in PostgreSQL, {len(got)} in the ODS; missing {missing}, extra {extra}"
    return out


def wait_equal(postgres: PostgresServer, cfg: Path, jobs: list[PipelineProcess], timeout: float = 300.0,
               restarts: list[str] | None = None) -> float:
    """Until the ODS equals PostgreSQL; the seconds it took. With ``restarts``, a job whose query failed is
    started again once (from its checkpoint) and the failure recorded there."""
    t0 = time.monotonic()
    job = jobs[-1]
    if restarts is not None and not restarts and job.proc.poll() is not None:
        restarts.append(job.failure())
        jobs.append(PipelineProcess(cfg, f"run{len(jobs) + 1}"))
        job = jobs[-1]
    last: dict[str, str] = {}
    while not any(x.startswith("pipeline: reading") for x in job.lines):  # its warehouse schema is there
        assert job.proc.poll() is None, f"the pipeline exited: {job.output()}"
        assert time.monotonic() - t0 < timeout, f"the pipeline did not start: {job.output()}"
        time.sleep(0.2)
    while time.monotonic() - t0 < timeout:
        if restarts is not None and not restarts and job.proc.poll() is not None:
            restarts.append(job.failure())
            jobs.append(PipelineProcess(cfg, f"run{len(jobs) + 1}"))
            return wait_equal(postgres, cfg, jobs, timeout - (time.monotonic() - t0), None) \
                + time.monotonic() - t0
        assert job.proc.poll() is None, f"the pipeline exited: {job.output()}"
        try:
            last = differences(postgres, cfg)
        except AssertionError as e:  # a query through a job that just died
            last = {"query": str(e)[:300]}
            time.sleep(2)
            continue
        if not last:
            return time.monotonic() - t0
        time.sleep(2)
    raise AssertionError(f"the ODS differs from PostgreSQL after {timeout:.0f}s: {last}\n{job.output()[-3000:]}")


class PipelineProcess:
    """``odradek pipeline run --source debezium`` as a process of its own session (kill -9 takes it
    whole with ``_reap``)."""

    def __init__(self, cfg: Path, name: str) -> None:
        self.cfg = cfg
        self.lines: list[str] = []
        self.log = open(cfg.parent / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        cmd = pipeline_cmd("run", "--config", str(cfg), "--source", "debezium", "--topic-prefix", PREFIX,
                           "--tables", ",".join(RetailWorkload.qualified(t) for t in TABLES))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=cfg.parent,
                                     start_new_session=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def batches(self) -> int:
        return sum(1 for x in self.lines if x.startswith("batch "))

    def output(self) -> str:
        return "\n".join(self.lines[-40:])

    def failure(self) -> str:
        """Why the job exited: its last lines that are not batch reports, and the last error of its log."""
        self.proc.wait(30)
        time.sleep(0.5)  # the pump thread reads the rest of stdout
        said = " | ".join(x for x in self.lines if not x.startswith("batch "))
        self.log.flush()
        errors = [x for x in Path(self.log.name).read_text(errors="replace").splitlines()
                  if "Error" in x or "Exception" in x]
        return f"exit {self.proc.returncode}: {said[-800:]} || {' / '.join(errors[-3:])[-1200:]}"

    def wait_batches(self, n: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while self.batches() < n:
            assert self.proc.poll() is None, f"the pipeline exited: {self.output()}"
            assert time.monotonic() < deadline, f"fewer than {n} batches after {timeout:.0f}s: {self.output()}"
            time.sleep(0.2)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        _reap(self.proc)
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        _reap(self.proc)
        self.log.close()


@dataclass
class Shop:
    """What the variants share: the broker, PostgreSQL with the shop's schema and rows, the Connect worker
    running Debezium's connector, and the workload that knows the database's rows."""

    broker: Broker
    postgres: PostgresServer
    worker: connect_peer.ConnectWorker
    workload: RetailWorkload
    timings: dict[str, float] = field(default_factory=dict)
    schema_changed: bool = False


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory, connect_jars: Path) -> Iterator[Shop]:
    base = tmp_path_factory.mktemp("shop")
    factory = BrokerFactory(base)
    try:
        postgres = PostgresServer().start()
    except PostgresError as e:
        pytest.fail(f"PostgreSQL is needed for these tests: {e}")
    worker: connect_peer.ConnectWorker | None = None
    try:
        broker = factory()
        workload = RetailWorkload(seed=3838)
        postgres.psql(workload.schema_sql(), DATABASE)
        seed_sql, _ = workload.seed(customers=20, orders=30)
        postgres.psql(seed_sql, DATABASE)
        snapshot = workload.snapshot()
        worker = connect_peer.ConnectWorker(base / "w1", broker.bootstrap, free_port(), group_id="ods-connect",
                                            nice=10)
        worker.start()
        worker.put_connector(CONNECTOR, connect_peer.debezium_postgres_config(
            port=postgres.port, database=DATABASE, topic_prefix=PREFIX, partitions=3,
            tables=[RetailWorkload.qualified(t) for t in TABLES], slot="shop_ods", publication="shop_ods_pub"))
        # the snapshot's records first (the pipeline subscribes to topics that exist)
        t0 = time.monotonic()
        _wait_snapshot(broker.bootstrap, {t: sum(1 for c in snapshot if c.table == t) for t in TABLES})
        yield Shop(broker, postgres, worker, workload, {"snapshot to Odradek (shared setup)": time.monotonic() - t0})
    finally:
        if worker is not None:
            worker.stop()
        factory.close()
        postgres.stop(remove=True)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("victim", ["spark", "broker"])
def test_ods_equals_postgres_through_debezium_odradek_and_spark(shop: Shop, tmp_path: Path, victim: str) -> None:
    """``spark``: kill -9 of the Spark job (driver and executors) mid-workload, then a restart from its
    checkpoint. ``broker``: kill -9 of Odradek mid-workload and a restart on the same port and log
    directory; the running job carries on (or, should its query fail, is started again) and the Connect
    worker's task carries on."""
    timings = dict(shop.timings)
    restarts: list[str] = []
    broker, postgres, workload = shop.broker, shop.postgres, shop.workload
    statements_before, rolled_back_before = Counter(workload.statements), workload.rolled_back
    if not broker.running:  # a variant before this one failed with the broker down
        broker.start()
    cfg = tmp_path / "pipeline" / "pipeline.toml"
    cfg.parent.mkdir()
    cfg.write_text(config_text(broker.bootstrap))

    jobs: list[PipelineProcess] = []
    try:
        t0 = time.monotonic()
        jobs.append(PipelineProcess(cfg, "run1"))
        script, _ = workload.transactions(40)
        postgres.psql(script, DATABASE)
        if not shop.schema_changed:
            shop.schema_changed = True
            postgres.psql(workload.schema_change(), DATABASE)
        script, _ = workload.transactions(40)
        postgres.psql(script, DATABASE)
        wait_equal(postgres, cfg, jobs)
        timings["check 1: pipeline start to ODS equal"] = time.monotonic() - t0
        first = {t: len(pg_rows(postgres, t)) for t in TABLES}

        # kill -9 of the Spark job while changes stream, then a restart from its checkpoint
        background = BackgroundWorkload(workload, postgres, per_batch=4, pause=0.3)
        background.start()
        background.wait_batches(5)
        seen = jobs[-1].batches()
        jobs[-1].wait_batches(seen + 2)
        if victim == "spark":
            jobs[-1].kill()
            killed_at = background.done
            jobs.append(PipelineProcess(cfg, "run2"))
        else:
            broker.kill()
            killed_at = background.done
            broker.start()
            background.wait_batches(killed_at + 5)
        background.limit = background.done + 15
        background.join(300)
        assert not background.is_alive()
        if background.error is not None:
            raise background.error
        assert background.done > killed_at >= 5
        timings[f"check 2 (kill -9 of {victim}): workload end to ODS equal"] = wait_equal(
            postgres, cfg, jobs, restarts=restarts if victim == "broker" else None)
        second = {t: len(pg_rows(postgres, t)) for t in TABLES}
        quarantined = query(cfg, "SELECT count() AS n FROM ods.quarantine")
        assert int(quarantined[0]["n"]) == 0, query(cfg, "SELECT reason, value FROM ods.quarantine LIMIT 5")
        for t in TABLES:
            dup = query(cfg, f"SELECT count() - uniqExact({KEYS[t]}, _version) AS n FROM ods.{t}_state")
            assert int(dup[0]["n"]) == 0, (t, dup)
    finally:
        for j in jobs:
            j.stop()
    # this variant's workload did what the check is about
    kinds = workload.statements - statements_before
    assert kinds["item_pk"] and kinds["customer_pk"] and kinds["delete_order"] and kinds["delete_item"], kinds
    assert workload.rolled_back - rolled_back_before >= 5
    print(f"\nrows compared after check 1: {first}; after check 2: {second}; timings (s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
          + f"; statements {dict(kinds)}; rolled back {workload.rolled_back - rolled_back_before}; batches {[j.batches() for j in jobs]}"
          + (f"; {restarts}" if restarts else ""))


def _wait_snapshot(bootstrap: str, want: dict[str, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ods-snapshot", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    got = dict.fromkeys(want, 0)
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            topics = consumer.list_topics(timeout=5).topics
            if all(f"{PREFIX}.shop.{t}" in topics for t in want):
                break
            time.sleep(0.5)
        consumer.assign([TopicPartition(f"{PREFIX}.shop.{t}", p, 0) for t in want for p in range(3)])
        while time.monotonic() < deadline and any(got[t] < n for t, n in want.items()):
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    got[m.topic().rsplit(".", 1)[1]] += 1
    finally:
        consumer.close()
    assert all(got[t] >= n for t, n in want.items()), (got, want)
