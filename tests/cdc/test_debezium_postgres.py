"""PostgreSQL → Debezium on Kafka Connect (distributed, exactly-once sources) → Odradek, for real.

One Odradek broker, one PostgreSQL cluster, Connect 4.4 workers with Debezium's PostgreSQL connector
3.6.1.Final. Two connectors (one for customers and orders, one for order items) are registered through
Connect's REST API; they snapshot the seeded tables, then stream a workload of inserts, updates,
primary-key changes, deletes, multi-statement and rolled-back transactions, and a column added to a
captured table. A second worker joins (the
Connect group protocol rebalances: each worker ends with one connector and one task), more changes run,
the first worker stops (everything moves to the second), and more changes run again. Then the Debezium
topics are read from Odradek (read_committed) and each key's records must be exactly the committed changes
of that key: snapshot reads first, then c / u / d in the database's order, a tombstone after each delete,
LSNs never going back, nothing from a rolled-back transaction, no duplicates. The other tests kill -9 a
worker, then Odradek itself, then the leader of a Debezium partition in a three-broker cluster (everything
with three replicas), while changes stream, and check the same.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import pytest
from cluster.cluster import FAST, Cluster
from cluster.zk import Ensemble
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from integration.broker import BrokerFactory, free_port
from waiting import wait_until

from odradek.devcluster.cdc_workload import KEYS, TABLES, Change, RetailWorkload
from odradek.devcluster.postgres import PostgresServer

from .conftest import connect_peer

DATABASE = "postgres"
# two connectors, so that two workers have work to share: Connect's incremental cooperative assignor balances
# connectors and tasks each on their own (one connector and its one task on two workers is balanced as it is)
# connectors; each has a topic prefix of its own (Debezium names its JMX metrics by it: two connectors with one
# prefix in one worker collide)
CONNECTORS = {"shop-cdc": ("customers", "orders"), "shop-cdc-items": ("order_items",)}
PREFIXES = {"customers": "pg", "orders": "pg", "order_items": "pgitems"}
PARTITIONS = 3
NUMERIC = {"amount", "price"}
TIMESTAMPS = {"created_at"}
# the two workers' group: the rebalance after a member leaves waits scheduled.rebalance.max.delay.ms for it to
# come back (KIP-415; default 5 minutes)
WORKER_PROPERTIES = {"scheduled.rebalance.max.delay.ms": "3000"}


def topic(table: str) -> str:
    return f"{PREFIXES[table]}.shop.{table}"


def norm_row(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    out: dict[str, Any] = {}
    for k, v in row.items():
        if v is not None and k in NUMERIC:
            out[k] = Decimal(str(v))
        elif v is not None and k in TIMESTAMPS:
            out[k] = v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
        else:
            out[k] = v
    return out


def expected_records(changes: list[Change]) -> dict[tuple[str, int], list[tuple[str, Any]]]:
    """Per (table, key): the records Debezium writes for these changes, in order."""
    out: dict[tuple[str, int], list[tuple[str, Any]]] = defaultdict(list)
    for ch in changes:
        out[(ch.table, ch.key)].append((ch.op, norm_row(ch.after)))
        if ch.op == "d":
            out[(ch.table, ch.key)].append(("tombstone", None))
    return out


def read_topics(bootstrap: str, want: dict[str, int], timeout: float = 120.0) -> dict[str, list[Any]]:
    """Every record of the Debezium topics (read_committed), per topic, until each has at least ``want``
    records and nothing more arrives for two seconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-check", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic(t), p, 0) for t in TABLES for p in range(PARTITIONS)])
        got: dict[str, list[Any]] = {topic(t): [] for t in TABLES}
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = consumer.consume(500, 0.5)
            for m in msgs:
                assert m.error() is None, m.error()
                got[m.topic()].append(m)
            if msgs:
                quiet_since = time.monotonic()
            elif all(len(got[t]) >= n for t, n in want.items()) and time.monotonic() - quiet_since > 2:
                return got
        counts = {t: len(v) for t, v in got.items()}
        raise AssertionError(f"the Debezium topics hold {counts} records after {timeout}s, expected {want}")
    finally:
        consumer.close()


def wait_for_snapshot(bootstrap: str, snapshot: list[Change]) -> None:
    """Until the topics hold a record for every row of the connectors' initial snapshots. A change committed
    before a snapshot reads the tables would be in the snapshot's rows instead of a record of its own: the
    workload starts after this."""
    read_topics(bootstrap, {topic(t): sum(1 for c in snapshot if c.table == t) for t in TABLES})


def placement(worker: Any) -> dict[str, str] | None:
    """Where each connector and task runs (``{"shop-cdc": worker id, "shop-cdc-0": worker id, ...}``) when all
    of them are RUNNING, else None; a FAILED one fails the test with its stack trace."""
    where: dict[str, str] = {}
    for name in CONNECTORS:
        try:
            status = worker.status(name)
        except connect_peer.RestError:  # 404 until the connector's first status is written
            return None
        tasks = status.get("tasks", [])
        failed = [t.get("trace", "") for t in [status["connector"], *tasks] if t["state"] == "FAILED"]
        assert not failed, f"{name} failed: {failed[0][:3000]}"
        if not tasks or any(t["state"] != "RUNNING" for t in [status["connector"], *tasks]):
            return None
        where[name] = status["connector"]["worker_id"]
        for t in tasks:
            where[f"{name}-{t['id']}"] = t["worker_id"]
    return where


def check_records(got: dict[str, list[Any]], expected: dict[tuple[str, int], list[tuple[str, Any]]]) -> None:
    """Each key's records are exactly the expected ones, in order: LSNs never go back, a key stays in one
    partition, every update and delete carries the old row, the topics were written in transactions."""
    actual: dict[tuple[str, int], list[tuple[str, Any]]] = defaultdict(list)
    lsns: dict[tuple[str, int], list[int]] = defaultdict(list)
    partition_of: dict[tuple[str, int], set[int]] = defaultdict(set)
    for table in TABLES:
        for m in got[topic(table)]:
            key = json.loads(m.key())
            k = (table, int(key[KEYS[table]]))
            partition_of[k].add(m.partition())
            if m.value() is None:
                actual[k].append(("tombstone", None))
                continue
            env = json.loads(m.value())
            op = env["op"]
            actual[k].append((op, norm_row(env["after"])))
            lsns[k].append(int(env["source"]["lsn"]))
            if op in ("u", "d"):  # REPLICA IDENTITY FULL: the whole old row
                assert env["before"] is not None and env["before"][KEYS[table]] == k[1], env
    # records of one key are in one partition, in offset order (the order read above)
    assert all(len(p) == 1 for p in partition_of.values())
    # exactly-once sources: the records were written in transactions, whose commit markers take offsets of
    # their own (a topic written without transactions has no gaps between its records' offsets)
    for t in TABLES:
        offsets: dict[int, list[int]] = defaultdict(list)
        for m in got[topic(t)]:
            offsets[m.partition()].append(m.offset())
        assert any(o != list(range(o[0], o[0] + len(o))) for o in offsets.values()), f"{t}: no commit markers"
    for k, seq in lsns.items():
        assert seq == sorted(seq), f"{k}: LSNs go back: {seq}"
    missing = {k: v for k, v in expected.items() if actual.get(k) != v}
    extra = {k: v for k, v in actual.items() if k not in expected}
    detail = "\n".join(f"{k}: expected {expected[k]}\n   got {actual.get(k)}" for k in list(missing)[:5])
    assert not missing and not extra, f"{len(missing)} keys differ, {len(extra)} unexpected:\n{detail}\n{extra}"
    assert sum(len(v) for v in actual.values()) == sum(len(v) for v in expected.values())


def register_connectors(worker: Any, postgres: PostgresServer, replication_factor: int = 1) -> None:
    for name, tables in CONNECTORS.items():
        config = connect_peer.debezium_postgres_config(
            port=postgres.port, database=DATABASE, topic_prefix=PREFIXES[tables[0]], partitions=PARTITIONS,
            tables=[RetailWorkload.qualified(t) for t in tables], slot=name.replace("-", "_"),
            publication=f"{name.replace('-', '_')}_pub", replication_factor=replication_factor)
        worker.put_connector(name, config)


def new_worker(tmp_path: Path, name: str, bootstrap: str, replication_factor: int = 1) -> Any:
    return connect_peer.ConnectWorker(tmp_path / name, bootstrap, free_port(), group_id="cdc-connect",
                                      replication_factor=replication_factor, properties=WORKER_PROPERTIES, nice=10)


class KillableBrokers(Protocol):
    """The broker side of ``run_killed_mid_workload``: one Odradek broker, or one broker of a cluster."""

    @property
    def bootstrap(self) -> str: ...

    def kill(self) -> None: ...

    def start(self) -> object: ...


@pytest.mark.timeout(900)
def test_debezium_postgres_through_odradek(make_broker: BrokerFactory, postgres: PostgresServer,
                                           connect_jars: Path, tmp_path: Path) -> None:
    broker = make_broker()
    workload = RetailWorkload(seed=38)
    postgres.psql(workload.schema_sql(), DATABASE)
    seed_sql, seeded = workload.seed(customers=20, orders=30)
    postgres.psql(seed_sql, DATABASE)
    changes: list[Change] = workload.snapshot()  # what the connector's initial snapshot reads

    w1, w2 = new_worker(tmp_path, "w1", broker.bootstrap), new_worker(tmp_path, "w2", broker.bootstrap)
    try:
        w1.start()
        # Connect created its internal topics on Odradek, compacted (it refuses to start otherwise)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        internal = [f"cdc-connect-{s}" for s in ("configs", "offsets", "status")]
        described = admin.describe_configs([ConfigResource("TOPIC", t) for t in internal])
        for res, fut in described.items():
            assert fut.result(30)["cleanup.policy"].value == "compact", res

        register_connectors(w1, postgres)
        wait_until(lambda: placement(w1), 120, "the connectors and their tasks running on the first worker",
                   interval=0.5, detail=w1.last_error)
        wait_for_snapshot(broker.bootstrap, changes)

        script, done = workload.transactions(30)
        postgres.psql(script, DATABASE)
        changes += done
        # a column added to a captured table: the change events after it carry it
        postgres.psql(workload.schema_change(), DATABASE)

        # a second worker joins: the group rebalances (incremental cooperative, KIP-415: the leader revokes a
        # connector and a task from the first worker, then a second rebalance gives them to the second)
        w2.start()
        two_each = sorted([w1.worker_id, w1.worker_id, w2.worker_id, w2.worker_id])
        spread = wait_until(lambda: (p := placement(w2)) is not None and sorted(p.values()) == two_each and p, 120,
                            "the connectors and tasks spread over both workers", interval=0.5, detail=w2.last_error)
        script, done = workload.transactions(30)
        postgres.psql(script, DATABASE)
        changes += done

        # the first worker leaves: after scheduled.rebalance.max.delay.ms its work moves to the second
        assert w1.stop() in (0, 143), w1.last_error()
        wait_until(lambda: (p := placement(w2)) is not None and set(p.values()) == {w2.worker_id}, 120,
                   "the connectors and tasks all running on the second worker", interval=0.5, detail=w2.last_error)
        script, done = workload.transactions(30)
        postgres.psql(script, DATABASE)
        changes += done

        expected = expected_records(changes)
        want = {topic(t): sum(len(v) for (tt, _), v in expected.items() if tt == t) for t in TABLES}
        got = read_topics(broker.bootstrap, want)
    finally:
        w2.stop()
        w1.stop()

    check_records(got, expected)
    assert {spread["shop-cdc-0"], spread["shop-cdc-items-0"]} == {w1.worker_id, w2.worker_id}
    assert seeded and workload.rolled_back >= 9


class BackgroundWorkload(threading.Thread):
    """Batches of transactions committed one after another while the test kills things, until ``limit``
    batches are done (the test lowers it to end the workload)."""

    def __init__(self, workload: RetailWorkload, postgres: PostgresServer, per_batch: int, pause: float) -> None:
        super().__init__(daemon=True)
        self.workload, self.postgres = workload, postgres
        self.per_batch, self.pause = per_batch, pause
        self.limit = 10_000
        self.changes: list[Change] = []
        self.done = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.done < self.limit:
                script, done = self.workload.transactions(self.per_batch)
                self.postgres.psql(script, DATABASE)
                self.changes += done
                self.done += 1
                time.sleep(self.pause)
        except BaseException as e:  # re-raised by the test
            self.error = e

    def wait_batches(self, n: int, timeout: float = 120.0) -> None:
        wait_until(lambda: self.done >= n or self.error or not self.is_alive(), timeout,
                   f"{n} batches of the workload", interval=0.5)
        if self.error is not None:
            raise self.error


@pytest.mark.timeout(900)
@pytest.mark.parametrize("victim_kind", ["worker", "broker"])
def test_debezium_postgres_killed_mid_workload(make_broker: BrokerFactory, postgres: PostgresServer,
                                               connect_jars: Path, tmp_path: Path, victim_kind: str) -> None:
    """kill -9 mid-workload, then more changes, then every change must be there once (read_committed).

    ``worker``: the worker running a task dies; the group notices after its session timeout and, after
    scheduled.rebalance.max.delay.ms, the survivor takes the task. Its producer's InitProducerId fences the
    dead one's epoch and the broker aborts the transaction it left open (when it left one: usually, since
    changes stream all the time); the task resumes from the offsets committed with its last transaction. The
    dead worker then comes back and joins again.
    ``broker``: Odradek itself is killed and restarted on the same port and log directory while the workers run:
    the transactions open at the kill are aborted when their coordinator loads __transaction_state again (or
    by the producers' next InitProducerId), the workers reconnect and the tasks carry on."""
    run_killed_mid_workload(make_broker(), postgres, tmp_path, victim_kind)


def run_killed_mid_workload(broker: KillableBrokers, postgres: PostgresServer, tmp_path: Path, victim_kind: str,
                            replication_factor: int = 1) -> None:
    workload = RetailWorkload(seed=61)
    postgres.psql(workload.schema_sql(), DATABASE)
    seed_sql, _ = workload.seed(customers=10, orders=10)
    postgres.psql(seed_sql, DATABASE)
    changes: list[Change] = workload.snapshot()
    workers = [new_worker(tmp_path, name, broker.bootstrap, replication_factor) for name in ("w1", "w2")]
    try:
        for w in workers:
            w.start()
        register_connectors(workers[0], postgres, replication_factor)
        spread = wait_until(lambda: (p := placement(workers[0])) is not None and len(set(p.values())) == 2 and p,
                            180, "the connectors and tasks spread over both workers", interval=0.5,
                            detail=workers[0].last_error)
        wait_for_snapshot(broker.bootstrap, changes)
        background = BackgroundWorkload(workload, postgres, per_batch=4, pause=0.3)
        background.start()
        background.wait_batches(5)
        if victim_kind == "worker":
            victim = next(w for w in workers if w.worker_id == spread["shop-cdc-0"])
            survivor = next(w for w in workers if w is not victim)
            victim.kill()
            wait_until(lambda: (p := placement(survivor)) is not None and set(p.values()) == {survivor.worker_id},
                       180, "everything running on the surviving worker", interval=0.5, detail=survivor.last_error)
            killed_at = background.done
            victim.start()  # it comes back and joins again while the workload still runs
        else:
            broker.kill()
            killed_at = background.done
            broker.start()
            background.wait_batches(killed_at + 5)
            wait_until(lambda: placement(workers[0]), 180, "everything running again", interval=0.5,
                       detail=workers[0].last_error)
        background.limit = background.done + 10
        background.join(300)
        assert not background.is_alive()
        if background.error is not None:
            raise background.error
        assert background.done > killed_at >= 5, (killed_at, background.done)
        changes += background.changes
        expected = expected_records(changes)
        want = {topic(t): sum(len(v) for (tt, _), v in expected.items() if tt == t) for t in TABLES}
        got = read_topics(broker.bootstrap, want)
    finally:
        for w in workers:
            w.stop()
    check_records(got, expected)


class ClusterLeaderVictim:
    """Three Odradek brokers in cluster mode (tests/cluster): ``kill`` is kill -9 of the broker leading
    partition 0 of the order items' topic (a Debezium topic written in transactions), ``start`` brings it
    back."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.victim: int | None = None

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def kill(self) -> None:
        self.victim = self.cluster.leader(topic("order_items"), 0)
        assert self.victim in self.cluster.brokers, self.victim
        self.cluster.kill(self.victim)

    def start(self) -> object:
        assert self.victim is not None
        return self.cluster.brokers[self.victim].start()


@pytest.mark.timeout(900)
def test_debezium_postgres_cluster_leader_killed(postgres: PostgresServer, connect_jars: Path,
                                                 tmp_path: Path) -> None:
    """Three brokers, every topic with three replicas (Connect's internal topics, the Debezium topics,
    __transaction_state): kill -9 of the leader of a Debezium partition mid-workload. Its partitions, and the
    transaction coordinators it held, move to the others; the transactions it coordinated are completed or
    aborted by their new coordinator; every change is still there once."""
    zk = Ensemble(tmp_path / "zk", 1).start()
    cluster = Cluster(tmp_path / "brokers", zk, 3, FAST).start()
    try:
        run_killed_mid_workload(ClusterLeaderVictim(cluster), postgres, tmp_path, "broker", replication_factor=3)
    finally:
        cluster.stop()
        zk.stop()
