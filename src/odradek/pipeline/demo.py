"""``odradek pipeline demo``: a small shop's CDC streams through Spark into the ODS and the warehouse.

Two operational sources: a CRM database (``crm.customers``) and a shop database (``shop.customers``,
``shop.orders``, ``shop.order_items``, ``shop.payments``), each with its own increasing LSN. The
generator mixes inserts, updates, deletes, exact duplicates, stale re-deliveries (old versions sent
again after newer ones, also after deletes), tombstones and malformed records. The demo starts an
embedded broker unless one is given, writes ``pipeline.toml`` into its directory, produces the streams,
runs the job with Trigger.AvailableNow and prints a summary: ODS row counts, quarantine reasons, the
integrated customer entity, daily sales, daily payments (AggregatingMergeTree, read with -Merge), and
whether the warehouse facts equal a recomputation from the ODS.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

TOPICS = ["crm.customers", "shop.customers", "shop.orders", "shop.order_items", "shop.payments"]

CONFIG = """\
[broker]
bootstrap_servers = "{bootstrap}"

[warehouse]
path = "./warehouse"
checkpoint_dir = "./checkpoints"

[spark]
master = "{master}"
max_offsets_per_trigger = 5000
conf = {{ "spark.sql.shuffle.partitions" = "2" }}

[[ods]]
table = "crm_customers"
topics = ["crm.customers"]
key = ["id"]
version = "source.lsn"
[ods.columns]
id = "Int64"
name = "String"
email = "Nullable(String)"
city = "Nullable(String)"

[[ods]]
table = "shop_customers"
topics = ["shop.customers"]
key = ["customer_id"]
version = "source.lsn"
[ods.columns]
customer_id = "Int64"
full_name = "String"
email = "Nullable(String)"
phone = "Nullable(String)"

[[ods]]
table = "orders"
topics = ["shop.orders"]
key = ["order_id"]
version = "source.lsn"
[ods.columns]
order_id = "Int64"
customer_id = "Int64"
status = "LowCardinality(String)"
amount = "Decimal(12, 2)"
created_at = "DateTime64(3)"

[[ods]]
table = "order_items"
topics = ["shop.order_items"]
key = ["item_id"]
version = "source.lsn"
[ods.columns]
item_id = "Int64"
order_id = "Int64"
sku = "String"
qty = "Int32"
price = "Decimal(10, 2)"

[[ods]]
table = "payments"
topics = ["shop.payments"]
key = ["payment_id"]
version = "source.lsn"
[ods.columns]
payment_id = "Int64"
order_id = "Int64"
amount = "Decimal(12, 2)"
method = "LowCardinality(String)"
paid_at = "Nullable(DateTime64(3))"

# integration: one customer entity from both sources, matched on the normalised e-mail
[[dw.entity]]
name = "customer"
match = "lower(trim(email))"
sources = [
  {{ ods = "crm_customers", columns = {{ name = "name", email = "email", city = "city" }} }},
  {{ ods = "shop_customers", columns = {{ name = "full_name", email = "email", phone = "phone" }} }},
]

# order status history: VersionedCollapsingMergeTree(sign, version)
[[dw.history]]
name = "order_status_history"
ods = "orders"
columns = ["customer_id", "status", "amount", "created_at"]

# daily sales fact: SummingMergeTree fed by a materialized view on the history
[[dw.summing]]
name = "daily_sales"
history = "order_status_history"
key = {{ day = "toDate(created_at)" }}
sums = {{ orders = "sign", revenue = "amount * sign" }}
where = "status != 'cancelled'"

# daily payments: AggregatingMergeTree of -State combinators, fed by a materialized view on the first
# version of each payment (payments are append-only), read with -Merge (dw.daily_payments_merged)
[[dw.aggregating]]
name = "daily_payments"
ods = "payments"
key = {{ day = "toDate(paid_at)" }}
aggregates = {{ orders = "uniq(order_id)", amount_quantiles = "quantiles(0.5, 0.9, 0.99)(amount)" }}
where = "paid_at IS NOT NULL"
"""


class ShopGenerator:
    """Debezium events for the two sources; each source has its own LSN sequence."""

    def __init__(self, seed: int = 7) -> None:
        self.rnd = random.Random(seed)
        self.lsn = {"crm": 0, "shop": 0}
        self.state: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in TOPICS}
        self.sent: dict[str, list[tuple[bytes | None, bytes | None]]] = {t: [] for t in TOPICS}
        self.events: list[tuple[str, bytes | None, bytes | None]] = []
        self.malformed = 0
        self.t0 = datetime(2025, 11, 1, tzinfo=UTC)

    def _emit(self, topic: str, key_name: str, op: str, before: Any, after: Any, k: int) -> None:
        db, table = topic.split(".")
        self.lsn[db] += 1
        value = {"op": op, "before": before, "after": after,
                 "source": {"db": db, "table": table, "lsn": self.lsn[db]}, "ts_ms": 1_762_000_000_000 + self.lsn[db]}
        ev = (json.dumps({key_name: k}).encode(), json.dumps(value).encode())
        self.sent[topic].append(ev)
        self.events.append((topic, *ev))
        if op == "d" and self.rnd.random() < 0.5:
            self.events.append((topic, ev[0], None))  # tombstone

    def _upsert(self, topic: str, key_name: str, k: int, row: dict[str, Any]) -> None:
        st = self.state[topic]
        before = st.get(k)
        op = "u" if before is not None else "c"
        st[k] = row
        self._emit(topic, key_name, op, before, row, k)

    def _delete(self, topic: str, key_name: str, k: int) -> None:
        before = self.state[topic].pop(k)
        self._emit(topic, key_name, "d", before, None, k)

    def _ts(self) -> str:
        return (self.t0 + timedelta(minutes=self.rnd.randrange(0, 14 * 24 * 60))).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def generate(self, n: int) -> None:
        r = self.rnd
        first = ["Ada", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun"]
        last = ["Ng", "Okafor", "Silva", "Kowalski", "Sato", "Moreau", "Haddad", "Berg"]
        cities = ["Lyon", "Porto", "Kraków", "Osaka", "Recife", None]
        people = [(f"{r.choice(first)} {r.choice(last)}", f"user{i}@example.com") for i in range(1, 200)]
        next_item = 1
        next_payment = 1
        for _ in range(n):
            x = r.random()
            if x < 0.15:  # CRM customer change
                i = r.randrange(1, 150)
                if i in self.state["crm.customers"] and r.random() < 0.1:
                    self._delete("crm.customers", "id", i)
                else:
                    name, email = people[i]
                    self._upsert("crm.customers", "id", i, {"id": i, "name": name, "email": email.upper() if r.random() < 0.3
                                                             else email, "city": r.choice(cities)})
            elif x < 0.3:  # shop customer change (overlapping people, other ids)
                i = r.randrange(50, 199)
                name, email = people[i]
                self._upsert("shop.customers", "customer_id", 1000 + i,
                             {"customer_id": 1000 + i, "full_name": name, "email": f" {email} ",
                              "phone": f"+33 6 {r.randrange(10**7, 10**8)}"})
            elif x < 0.6:  # order lifecycle
                oid = r.randrange(1, 400)
                cur = self.state["shop.orders"].get(oid)
                if cur is None:
                    row = {"order_id": oid, "customer_id": 1000 + r.randrange(50, 199), "status": "new",
                           "amount": f"{r.randrange(500, 50000) / 100:.2f}", "created_at": self._ts()}
                    self._upsert("shop.orders", "order_id", oid, row)
                    for _ in range(r.randrange(1, 4)):
                        self._upsert("shop.order_items", "item_id", next_item,
                                     {"item_id": next_item, "order_id": oid, "sku": f"SKU-{r.randrange(100)}",
                                      "qty": r.randrange(1, 5), "price": f"{r.randrange(100, 9000) / 100:.2f}"})
                        next_item += 1
                elif cur["status"] in ("new", "paid") and r.random() < 0.9:
                    nxt = {"new": r.choice(["paid", "paid", "cancelled"]), "paid": "shipped"}[cur["status"]]
                    self._upsert("shop.orders", "order_id", oid, {**cur, "status": nxt})
                    if nxt == "paid":
                        self._upsert("shop.payments", "payment_id", next_payment,
                                     {"payment_id": next_payment, "order_id": oid, "amount": cur["amount"],
                                      "method": r.choice(["card", "transfer", "wallet"]), "paid_at": self._ts()})
                        next_payment += 1
                elif r.random() < 0.2:
                    self._delete("shop.orders", "order_id", oid)
            elif x < 0.9:  # re-delivery of an earlier event: duplicate or stale
                topic = r.choice(TOPICS)
                if self.sent[topic]:
                    k, v = r.choice(self.sent[topic])
                    self.events.append((topic, k, v))
            else:  # malformed
                topic = r.choice(TOPICS)
                self.malformed += 1
                self.events.append((topic, b'{"id": 1}', r.choice([
                    b"<html>oops</html>", b'{"op": "x", "after": {}}', b'{"op": "c", "after": null}',
                    b'{"op": "c", "after": {"amount": "lots"}, "source": {"lsn": 1}}',
                ])))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_broker(workdir: Path, out: TextIO) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    data = workdir / "broker-data"
    log = open(workdir / "broker.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data}", "--override", "num.partitions=3"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the embedded broker exited with code {proc.returncode}; see {workdir / 'broker.log'}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    out.write(f"demo: embedded broker on 127.0.0.1:{port} (pid {proc.pid}, data in {data})\n")
    return proc, f"127.0.0.1:{port}"


def _produce(bootstrap: str, gen: ShopGenerator) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=10).topics)
    new = [NewTopic(t, 3, 1) for t in TOPICS if t not in existing]
    if new:
        for f in admin.create_topics(new).values():
            f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for topic, k, v in gen.events:
        while True:
            try:
                p.produce(topic, key=k, value=v)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(60):
        raise RuntimeError("some demo events were not delivered")


def run_demo(workdir: Path, bootstrap: str | None, events: int, master: str, out: TextIO = sys.stdout) -> int:
    from odradek.pipeline.config import load
    from odradek.pipeline.job import Job
    from odradek.pipeline.sink import ChdbSink

    workdir.mkdir(parents=True, exist_ok=True)
    broker = None
    if bootstrap is None:
        broker, bootstrap = _start_broker(workdir, out)
    try:
        cfg_path = workdir / "pipeline.toml"
        cfg_path.write_text(CONFIG.format(bootstrap=bootstrap, master=master))
        gen = ShopGenerator()
        gen.generate(events)
        _produce(bootstrap, gen)
        out.write(f"demo: produced {len(gen.events)} events to {', '.join(TOPICS)} "
                  f"({gen.malformed} malformed); config {cfg_path}\n")
        cfg = load(cfg_path)
        rc = Job(cfg, available_now=True, out=out).run()
        if rc != 0:
            return rc
        sink = ChdbSink(cfg.warehouse_path)
        sink.open()
        try:
            _summary(sink, cfg, out)
        finally:
            sink.close()
        out.write(f"demo: query it with: odradek pipeline query --config {cfg_path} \"SELECT * FROM dw.customer LIMIT 5\"\n")
        return 0
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                broker.kill()


def _summary(sink: Any, cfg: Any, out: TextIO) -> None:
    def show(title: str, sql: str) -> None:
        out.write(f"\n{title}\n{sink.query(sql, 'table').decode()}")

    counts = " UNION ALL ".join(f"SELECT '{t.table}' AS ods_table, count() AS live_rows FROM ods.`{t.table}`"
                                for t in cfg.ods)
    show("ODS (one row per live key, latest version):", counts + " ORDER BY ods_table")
    show("Quarantine:", "SELECT topic, reason, count() AS records FROM ods.quarantine FINAL "
                        "GROUP BY topic, reason ORDER BY topic, reason")
    show("Integrated customer entity (CRM + shop, matched on lower(trim(email))):",
         "SELECT countIf(notEmpty(crm_customers_ids) AND notEmpty(shop_customers_ids)) AS in_both, "
         "countIf(empty(shop_customers_ids)) AS crm_only, countIf(empty(crm_customers_ids)) AS shop_only, "
         "count() AS customers FROM dw.customer")
    show("Daily sales (SummingMergeTree via a materialized view on the VersionedCollapsingMergeTree history):",
         "SELECT day, sum(orders) AS orders, sum(revenue) AS revenue FROM dw.daily_sales GROUP BY day "
         "HAVING orders != 0 ORDER BY day LIMIT 7")
    facts = sink.query("SELECT day, sum(orders) AS n, sum(revenue) AS r FROM dw.daily_sales GROUP BY day "
                       "HAVING n != 0 ORDER BY day", "CSV")
    recomputed = sink.query("SELECT toDate(created_at) AS day, count() AS n, sum(amount) AS r FROM ods.orders "
                            "WHERE status != 'cancelled' GROUP BY day ORDER BY day", "CSV")
    out.write(f"\nwarehouse facts equal a recomputation from the ODS: {'yes' if facts == recomputed else 'NO'}\n")
    from odradek.pipeline import warehouse

    for a in warehouse.parse(cfg).aggregatings:
        show(f"{a.name} (AggregatingMergeTree: -State columns via a materialized view, read with -Merge):",
             warehouse.aggregating_merged_sql(a) + " LIMIT 7")
        same = sink.query(warehouse.aggregating_merged_sql(a), "CSV") == sink.query(
            warehouse.aggregating_recompute_sql(a), "CSV")
        out.write(f"\n{a.name} equals the same aggregates recomputed from the ODS: {'yes' if same else 'NO'}\n")
