"""The CDC → ODS job end to end: ``odradek pipeline run`` as a process (real Spark, real broker, real chDB).

Generated Debezium streams for two tables (inserts, updates, deletes, re-inserts, duplicates, stale
re-deliveries arriving after newer versions and after deletes, tombstones, malformed records) are
loaded; the job is killed with SIGKILL mid-run and run again with --available-now; then the ODS must
equal the truth computed here independently (latest version per key, deleted keys absent), every
malformed record must be in ods.quarantine, and nothing else.

The run after the kill (``run_available_now``) is the CLI's ``Job`` in this process on the tests' Spark
session: a new driver of the query all the same (it recovers from the killed one's checkpoint and opens the
warehouse afresh), without a second JVM's start, the larger part of such a run. ``odradek pipeline run
--available-now`` as a process of its own is run by test_standalone.py and test_sasl_ssl.py.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from integration.broker import Broker

CUSTOMER_COLUMNS = {"id": "Int64", "name": "String", "city": "Nullable(String)", "age": "Nullable(Int32)",
                    "balance": "Nullable(Decimal(12, 2))"}
ORDER_COLUMNS = {"order_id": "Int64", "customer_id": "Int64", "status": "String", "amount": "Float64"}
PAYMENT_COLUMNS = {"payment_id": "Int64", "customer_id": "Int64", "amount": "Decimal(12, 2)", "day": "Int32"}
CITIES = [None, "Lyon", "Porto", "Kraków", "Osaka", "Recife"]


def cols(d: dict[str, str]) -> str:
    """An ``[ods.columns]`` body."""
    return "\n".join(f'{k} = "{v}"' for k, v in d.items())


def job_section(bootstrap: str, max_per_trigger: int, warm_up: bool = False) -> str:
    """The broker, warehouse and Spark settings every job of these tests shares. The warm-up (up to 20 s of
    synthetic micro-batches per start, odradek.pipeline.warm_up) only makes the first batches faster: it is
    left out but where a test is about it (tests/pipeline/test_warm_up.py, and the standalone cluster's)."""
    return f"""
[broker]
bootstrap_servers = "{bootstrap}"
[warehouse]
path = "./warehouse"
checkpoint_dir = "./checkpoints"
[spark]
master = "local[2]"
max_offsets_per_trigger = {max_per_trigger}
warm_up = {str(warm_up).lower()}
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""


def config_text(bootstrap: str, customers: str, orders: str, max_per_trigger: int, warm_up: bool = False) -> str:
    return job_section(bootstrap, max_per_trigger, warm_up) + f"""
[[ods]]
table = "customers"
topics = ["{customers}"]
key = ["id"]
version = "source.lsn"
[ods.columns]
{cols(CUSTOMER_COLUMNS)}

[[ods]]
table = "orders"
topics = ["{orders}"]
key = ["order_id"]
version = "source.lsn"
[ods.columns]
{cols(ORDER_COLUMNS)}

[[dw.history]]
name = "order_history"
ods = "orders"
columns = ["customer_id", "status", "amount"]

[[dw.summing]]
name = "sales_by_status"
history = "order_history"
key = {{ status = "status" }}
sums = {{ orders = "sign", revenue = "amount * sign" }}
"""


Event = tuple[bytes | None, bytes | None]  # (key, value)


class CdcStream:
    """Debezium-style events for one table; ``truth`` is computed from the valid events alone."""

    def __init__(self, table: str, key: str, rnd: random.Random) -> None:
        self.table = table
        self.key = key
        self.rnd = rnd
        self.lsn = 0
        self.state: dict[int, dict[str, Any]] = {}
        self.history: list[tuple[int, Event]] = []  # (key, event) of valid events, for re-deliveries

    def _event(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, k: int) -> Event:
        self.lsn += 1
        value = {"op": op, "before": before, "after": after,
                 "source": {"db": "shop", "table": self.table, "lsn": self.lsn}, "ts_ms": 1_700_000_000_000 + self.lsn}
        ev = (json.dumps({self.key: k}).encode(), json.dumps(value).encode())
        self.history.append((k, ev))
        return ev

    def change(self, make_row: Callable[[int], dict[str, Any]], keys: int) -> Event:
        k = self.rnd.randrange(1, keys + 1)
        if k in self.state and self.rnd.random() < 0.2:
            before = self.state.pop(k)
            return self._event("d", before, None, k)
        row = make_row(k)
        op = "u" if k in self.state else self.rnd.choice(["c", "c", "r"])
        before = self.state.get(k)
        self.state[k] = row
        return self._event(op, before, row, k)

    def stale(self) -> Event:
        """An exact re-delivery of an earlier event (a duplicate, or stale once newer ones exist)."""
        return self.rnd.choice(self.history[: max(1, len(self.history) - 1)])[1]


def truth(events: list[Event], key: str, columns: dict[str, str]) -> dict[int, dict[str, Any]]:
    """Latest version per key among the valid events (in any order; tombstones skipped); deletes
    remove the key. Independent of the job."""
    best: dict[int, tuple[int, dict[str, Any] | None]] = {}
    for _k, v in events:
        if v is None:
            continue
        e = json.loads(v)
        lsn = e["source"]["lsn"]
        img = e["before"] if e["op"] == "d" else e["after"]
        k = img[key]
        if k not in best or lsn > best[k][0]:
            best[k] = (lsn, None if e["op"] == "d" else img)
    return {k: {c: row.get(c) for c in columns} for k, (_lsn, row) in best.items() if row is not None}


def customer_row(rnd: random.Random) -> Callable[[int], dict[str, Any]]:
    def make(k: int) -> dict[str, Any]:
        return {"id": k, "name": f"customer-{k}-{rnd.randrange(1000)}", "city": rnd.choice(CITIES),
                "age": rnd.choice([None, rnd.randrange(18, 90)]),
                "balance": rnd.choice([None, f"{rnd.randrange(-10000, 1000000) / 100:.2f}"])}
    return make


def order_row(rnd: random.Random) -> Callable[[int], dict[str, Any]]:
    def make(k: int) -> dict[str, Any]:
        return {"order_id": k, "customer_id": rnd.randrange(1, 60), "status": rnd.choice(["new", "paid", "shipped"]),
                "amount": round(rnd.uniform(1, 500), 2)}
    return make


def malformed(rnd: random.Random, table: str, key: str) -> list[tuple[Event, str]]:
    """(event, expected reason prefix)."""
    env = {"op": "c", "before": None, "source": {"db": "shop", "table": table, "lsn": 10**9}, "ts_ms": 1}
    good_after = {"id": 1, "name": "x"} if key == "id" else {"order_id": 1, "customer_id": 1, "status": "new", "amount": 1.0}
    out: list[tuple[Event, str]] = [
        ((b'{"%s": 1}' % key.encode(), b"this is not json"), "not a JSON object"),
        ((b'{"%s": 1}' % key.encode(), b"[1, 2, 3]"), "not a JSON object"),
        ((b'{"%s": 1}' % key.encode(), json.dumps({**env, "op": "z", "after": good_after}).encode()), "unknown op"),
        ((b'{"%s": 1}' % key.encode(), json.dumps({k: v for k, v in env.items() if k != "op"}).encode()), "missing op"),
        ((None, json.dumps({**env, "after": {k: v for k, v in good_after.items() if k != key}}).encode()),
         "missing key field"),
        ((b'{"%s": 1}' % key.encode(), json.dumps({**env, "after": {**good_after, key: "one"}}).encode()),
         "wrong type for key field"),
        ((b'{"%s": 1}' % key.encode(), json.dumps({**env, "source": {"lsn": "late"}, "after": good_after}).encode()),
         "missing or non-integer version"),
    ]
    if key == "id":
        out.append(((b'{"id": 1}', json.dumps({**env, "after": {"id": 1, "name": "x", "age": "old"}}).encode()),
                    "wrong type for 'age'"))
        out.append(((b'{"id": 1}', json.dumps({**env, "after": {"id": 1, "city": "x"}}).encode()),
                    "missing required field 'name'"))
    else:
        out.append(((b'{"order_id": 1}', json.dumps({**env, "after": {**good_after, "amount": "lots"}}).encode()),
                    "wrong type for 'amount'"))
    rnd.shuffle(out)
    return out


class Feed:
    """Produces a table's events to its topic, partitioned by key like Debezium, and remembers where
    malformed records landed."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.bad: dict[tuple[str, int, int], str] = {}
        self.errors: list[str] = []

    def send(self, topic: str, ev: Event, reason: str | None = None) -> None:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            elif reason is not None:
                self.bad[(msg.topic(), msg.partition(), msg.offset())] = reason

        self.producer.produce(topic, key=ev[0], value=ev[1], on_delivery=cb)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0
        assert not self.errors, self.errors


def generate(rnd: random.Random, feed: Feed, topic: str, stream: CdcStream, make_row: Callable[[int], dict[str, Any]],
             n: int, keys: int, sent: list[Event], bad_every: int) -> None:
    """``n`` changes (some stale re-deliveries, tombstones after half the deletes) into ``sent``, and
    two malformed records every ``bad_every`` changes (not into ``sent``)."""
    for i in range(n):
        r = rnd.random()
        if r < 0.12 and stream.history:
            ev = stream.stale()
        else:
            ev = stream.change(make_row, keys)
            if json.loads(ev[1] or b"{}").get("op") == "d" and rnd.random() < 0.5:
                sent.append(ev)
                feed.send(topic, ev)
                ev = (ev[0], None)  # Debezium's tombstone after a delete
        sent.append(ev)
        feed.send(topic, ev)
        if bad_every and i % bad_every == bad_every - 1:
            for bad_ev, reason in malformed(rnd, stream.table, stream.key)[:2]:
                feed.send(topic, bad_ev, reason)


def generate_facts(rnd: random.Random, feed: Feed, topic: str, stream: CdcStream, n: int, sent: list[Event]) -> None:
    """An append-only stream (payments): each key created once, with exact re-deliveries of earlier
    events mixed in (duplicates at new offsets, in other batches)."""
    for _ in range(n):
        if stream.history and rnd.random() < 0.2:
            ev = stream.stale()
        else:
            k = len(stream.state) + 1
            row = {"payment_id": k, "customer_id": rnd.randrange(1, 50),
                   "amount": f"{rnd.randrange(1, 100000) / 100:.2f}", "day": rnd.randrange(4)}
            stream.state[k] = row
            ev = stream._event("c", None, row, k)
        sent.append(ev)
        feed.send(topic, ev)


def payments_config(bootstrap: str, topic: str, max_per_trigger: int) -> str:
    return job_section(bootstrap, max_per_trigger) + f"""
[[ods]]
table = "payments"
topics = ["{topic}"]
key = ["payment_id"]
version = "source.lsn"
[ods.columns]
{cols(PAYMENT_COLUMNS)}

[[dw.aggregating]]
name = "daily_payments"
ods = "payments"
key = {{ day = "day" }}
aggregates = {{ customers = "uniq(customer_id)", amount_q = "quantiles(0.5, 0.9, 0.99)(amount)", n = "count()" }}
"""


def pipeline_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek", "pipeline", *args]


def run_and_kill(cfg: Path, rnd: random.Random, while_running: Callable[[], None]) -> int:
    """``odradek pipeline run`` (continuous) in ``cfg``'s folder until its second micro-batch, then
    ``while_running()`` (more data, queries), a random pause, and SIGKILL: the micro-batches it reported."""
    work = cfg.parent
    log = open(work / "run1.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(pipeline_cmd("run", "--config", str(cfg)), stdout=subprocess.PIPE, stderr=log,
                            text=True, cwd=work, start_new_session=True)
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())

    def batches() -> int:
        return sum(1 for x in lines if x.startswith("batch "))

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 240  # Spark's first batch compiles the plan: slow on a loaded machine
        while batches() < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, "job exited early:\n" + "\n".join(lines) + (work / "run1.log").read_text()
            time.sleep(0.05)
        assert batches() >= 2, "\n".join(lines)
        while_running()
        time.sleep(rnd.uniform(0.0, 1.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        _reap(proc)
        log.close()
    return batches()


def run_available_now(spark: Any, cfg: Path) -> str:
    """What ``odradek pipeline run --config cfg --available-now`` runs (odradek.pipeline.job.Job: every record
    available when it starts, then it stops), here on the tests' Spark session (``spark``, which it reuses and
    leaves running); its output, asserted to report batches and a clean stop."""
    from odradek.pipeline.config import load
    from odradek.pipeline.job import Job

    assert spark is not None
    out = io.StringIO()
    rc = Job(load(cfg), available_now=True, out=out, stop_spark=False).run()
    assert rc == 0 and "batch " in out.getvalue() and "pipeline: stopped after" in out.getvalue(), out.getvalue()
    return out.getvalue()


def query(cfg: Path, sql: str) -> list[dict[str, Any]]:
    out = subprocess.run(pipeline_cmd("query", "--config", str(cfg), "--format", "jsonl", sql),
                         capture_output=True, text=True, timeout=120, cwd=cfg.parent)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.timeout(900)  # two Spark job runs and a kill, on a machine shared with other test workers
def test_cdc_to_ods_exactly_once_across_kill(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                                             tmp_path: Path) -> None:
    rnd = random.Random(20251122)
    customers_topic = new_topic(3, prefix="shop.customers")
    orders_topic = new_topic(2, prefix="shop.orders")
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(config_text(pipeline_broker.bootstrap, customers_topic, orders_topic, 150))
    feed = Feed(pipeline_broker.bootstrap)
    customers = CdcStream("customers", "id", rnd)
    orders = CdcStream("orders", "order_id", rnd)
    sent_c: list[Event] = []
    sent_o: list[Event] = []
    generate(rnd, feed, customers_topic, customers, customer_row(rnd), 900, 120, sent_c, bad_every=150)
    generate(rnd, feed, orders_topic, orders, order_row(rnd), 500, 80, sent_o, bad_every=125)
    feed.flush()

    # 1. a continuous run, killed with SIGKILL while batches are being loaded and more data arrives
    def while_running() -> None:
        # the running job answers queries for its warehouse
        live = query(cfg, "SELECT count() AS n FROM ods.customers_state")
        assert live and int(live[0]["n"]) > 0
        generate(rnd, feed, customers_topic, customers, customer_row(rnd), 300, 120, sent_c, bad_every=100)
        generate(rnd, feed, orders_topic, orders, order_row(rnd), 200, 80, sent_o, bad_every=100)
        feed.flush()

    batches_before_kill = run_and_kill(cfg, rnd, while_running)

    # 2. run again until everything available is processed (bigger batches: the limit may change)
    cfg.write_text(config_text(pipeline_broker.bootstrap, customers_topic, orders_topic, 2000))
    run_available_now(spark, cfg)

    check_against_truth(cfg, sent_c, sent_o, feed)
    assert batches_before_kill >= 2


def normalise(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c, t in columns.items():
        v = row.get(c)
        if v is None:
            out[c] = None
        elif "Decimal" in t:
            out[c] = Decimal(str(v)).quantize(Decimal("0.01"))
        elif "Int" in t:
            out[c] = int(v)
        elif "Float" in t:
            out[c] = round(float(v), 6)
        else:
            out[c] = str(v)
    return out


def _reap(proc: subprocess.Popen[str]) -> None:
    """The killed driver's JVM exits when its stdin closes; wait for the session, then clean up."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)


def check_against_truth(cfg: Path, sent_c: list[Event], sent_o: list[Event], feed: Feed) -> None:
    """The warehouse a job left under ``cfg`` against the truth computed from what was sent."""
    # 3. the ODS equals the truth
    for table, key, columns, sent in (("customers", "id", CUSTOMER_COLUMNS, sent_c),
                                      ("orders", "order_id", ORDER_COLUMNS, sent_o)):
        want = truth(sent, key, columns)
        rows = query(cfg, f"SELECT * FROM ods.{table} ORDER BY {key}")
        got = {int(r[key]): normalise(r, columns) for r in rows}
        assert len(rows) == len(got), f"ods.{table} has several rows for one key"
        want_n = {k: normalise(v, columns) for k, v in want.items()}
        missing = sorted(set(want_n) - set(got))
        extra = sorted(set(got) - set(want_n))
        wrong = sorted(k for k in set(want_n) & set(got) if want_n[k] != got[k])
        assert not (missing or extra or wrong), (
            f"ods.{table}: missing {missing[:10]}, extra {extra[:10]}, wrong "
            + "; ".join(f"{k}: want {want_n[k]} got {got[k]}" for k in wrong[:5]))

    # 4. warehouse facts (history → materialized view → SummingMergeTree) equal a recomputation from
    #    the ODS and from the truth: a replayed batch would have counted twice
    facts = {r["status"]: (int(r["n"]), round(float(r["revenue"]), 6)) for r in query(
        cfg, "SELECT status, sum(orders) AS n, sum(revenue) AS revenue FROM dw.sales_by_status GROUP BY status "
             "HAVING n != 0")}
    from_ods = {r["status"]: (int(r["n"]), round(float(r["revenue"]), 6)) for r in query(
        cfg, "SELECT status, count() AS n, sum(amount) AS revenue FROM ods.orders GROUP BY status")}
    want_orders = truth(sent_o, "order_id", ORDER_COLUMNS)
    from_truth: dict[str, tuple[int, float]] = {}
    for row in want_orders.values():
        n, rev = from_truth.get(row["status"], (0, 0.0))
        from_truth[row["status"]] = (n + 1, rev + row["amount"])
    from_truth = {k: (n, round(v, 6)) for k, (n, v) in from_truth.items()}
    assert facts == from_ods == from_truth
    live = query(cfg, "SELECT order_id FROM dw.order_history GROUP BY order_id HAVING sum(sign) != 0")
    assert sorted(int(r["order_id"]) for r in live) == sorted(want_orders)
    bad_sign = query(cfg, "SELECT order_id FROM dw.order_history GROUP BY order_id HAVING sum(sign) NOT IN (0, 1)")
    assert bad_sign == []

    # 5. every malformed record is in quarantine, with its reason and raw value, and nothing else
    bad = query(cfg, "SELECT table, topic, partition, offset, reason, value FROM ods.quarantine FINAL")
    got_bad = {(r["topic"], int(r["partition"]), int(r["offset"])): r["reason"] for r in bad}
    assert set(got_bad) == set(feed.bad), (len(got_bad), len(feed.bad))
    for where, reason in feed.bad.items():
        assert got_bad[where].startswith(reason), (where, got_bad[where], reason)
