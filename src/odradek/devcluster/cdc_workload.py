"""A change workload on the retail shape of ``odradek pipeline demo`` (``shop.customers``, ``shop.orders``,
``shop.order_items``) for a real PostgreSQL, with the changes a CDC connector must report.

``RetailWorkload`` keeps a model of the three tables and writes SQL against it: ``schema_sql()`` creates
the schema (foreign keys: an order's customer, ON UPDATE CASCADE; an item's order, ON DELETE CASCADE; every
table ``REPLICA IDENTITY FULL``, so that updates and deletes carry the whole old row), ``seed(...)``
inserts rows before a connector starts (its snapshot reads them: ``snapshot()`` gives them as ``r``
changes), and ``transactions(n)`` a script of ``n`` transactions mixing:

* inserts (a customer; an order with one to four items in one multi-row INSERT),
* updates (a status, an amount, an e-mail, a multi-row price change of an order's items),
* primary-key changes (an item renumbered; a customer renumbered, which PostgreSQL cascades to the
  customer's orders: each of those is an update too),
* deletes (an item; an order, cascading to its items; a customer without orders),
* transactions of several statements, and transactions that end in ROLLBACK (whose changes must never
  be reported);

and ``schema_change()`` adds a column to ``shop.customers`` between two scripts.

Each script comes with the committed changes in commit order (``Change``: table, key, op, the row after).
The SQL is run by whoever holds the database (``PostgresServer.psql``): the model assumes each script is
committed whole and in order on one session, which psql with ON_ERROR_STOP does. A primary-key change is
``("d", old key)`` then ``("c", new key)``, as Debezium reports one (a delete event and tombstone for the
old key, a create event for the new one).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

SCHEMA = "shop"
TABLES = ("customers", "orders", "order_items")
KEYS = {"customers": "customer_id", "orders": "order_id", "order_items": "item_id"}
TIERS = ("bronze", "silver", "gold")
STATUSES = ("new", "paid", "shipped", "delivered", "cancelled")
SKUS = tuple(f"SKU-{i:04d}" for i in range(1, 60))
BASE_TIME = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

Row = dict[str, object]


@dataclass(frozen=True)
class Change:
    """One committed row change as a CDC connector reports it: ``op`` is ``r`` (read by a snapshot),
    ``c``, ``u`` or ``d``; ``after`` is the row after the change (None for a delete)."""

    table: str
    key: int
    op: str
    after: Row | None
    txn: int


def _int(v: object) -> int:
    assert isinstance(v, int), v
    return v


def _lit(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int | Decimal):
        return str(v)
    if isinstance(v, datetime):
        return f"'{v.isoformat()}'::timestamptz"
    return "'" + str(v).replace("'", "''") + "'"


class RetailWorkload:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.rows: dict[str, dict[int, Row]] = {t: {} for t in TABLES}
        self.next_id = {t: 1 for t in TABLES}
        self.txn = 0
        self.rolled_back = 0
        self.statements: Counter[str] = Counter()  # committed statements by kind ("item_pk", "reprice", ...)
        self.loyalty = False  # schema_change() ran: customers have a loyalty_tier column

    # ------------------------------------------------------------------ schema

    @staticmethod
    def schema_sql() -> str:
        return f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE {SCHEMA}.customers (
  customer_id bigint PRIMARY KEY,
  full_name text NOT NULL,
  email text,
  phone text
);
CREATE TABLE {SCHEMA}.orders (
  order_id bigint PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES {SCHEMA}.customers (customer_id) ON UPDATE CASCADE,
  status text NOT NULL,
  amount numeric(12, 2) NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE TABLE {SCHEMA}.order_items (
  item_id bigint PRIMARY KEY,
  order_id bigint NOT NULL REFERENCES {SCHEMA}.orders (order_id) ON DELETE CASCADE,
  sku text NOT NULL,
  qty integer NOT NULL,
  price numeric(10, 2) NOT NULL
);
ALTER TABLE {SCHEMA}.customers REPLICA IDENTITY FULL;
ALTER TABLE {SCHEMA}.orders REPLICA IDENTITY FULL;
ALTER TABLE {SCHEMA}.order_items REPLICA IDENTITY FULL;
"""

    @staticmethod
    def qualified(table: str) -> str:
        return f"{SCHEMA}.{table}"

    # ------------------------------------------------------------------ model helpers

    def _new_id(self, table: str) -> int:
        n = self.next_id[table]
        self.next_id[table] = n + 1
        return n

    def _insert(self, table: str, row: Row, out: list[Change], sql: list[str]) -> None:
        cols = list(row)
        values = ", ".join(_lit(row[c]) for c in cols)
        sql.append(f"INSERT INTO {SCHEMA}.{table} ({', '.join(cols)}) VALUES ({values});")
        key = _int(row[KEYS[table]])
        self.rows[table][key] = dict(row)
        out.append(Change(table, key, "c", dict(row), self.txn))

    def _update(self, table: str, key: int, changes: Row, out: list[Change], sql: list[str]) -> None:
        sets = ", ".join(f"{c} = {_lit(v)}" for c, v in changes.items())
        sql.append(f"UPDATE {SCHEMA}.{table} SET {sets} WHERE {KEYS[table]} = {key};")
        self.rows[table][key].update(changes)
        out.append(Change(table, key, "u", dict(self.rows[table][key]), self.txn))

    def _delete(self, table: str, key: int, out: list[Change]) -> None:
        del self.rows[table][key]
        out.append(Change(table, key, "d", None, self.txn))

    def _customer(self) -> Row:
        n = self._new_id("customers")
        row: Row = {"customer_id": n, "full_name": f"Customer {n}", "email": f"c{n}@example.com",
                    "phone": None if n % 3 == 0 else f"+49-30-{n:06d}"}
        if self.loyalty:
            row["loyalty_tier"] = self.rng.choice(TIERS)
        return row

    def schema_change(self) -> str:
        """``ALTER TABLE shop.customers ADD COLUMN loyalty_tier text``: existing rows read NULL there (and no
        change is reported for them); later inserts set it, and e-mail updates set it too. No row changes."""
        self.loyalty = True
        for row in self.rows["customers"].values():
            row["loyalty_tier"] = None
        return f"ALTER TABLE {SCHEMA}.customers ADD COLUMN loyalty_tier text;\n"

    def _add_order(self, out: list[Change], sql: list[str]) -> None:
        customer = self.rng.choice(sorted(self.rows["customers"]))
        order_id = self._new_id("orders")
        items: list[Row] = []
        amount = Decimal(0)
        for _ in range(self.rng.randint(1, 4)):
            qty, price = self.rng.randint(1, 5), Decimal(self.rng.randint(100, 9999)) / 100
            amount += qty * price
            items.append({"item_id": self._new_id("order_items"), "order_id": order_id,
                          "sku": self.rng.choice(SKUS), "qty": qty, "price": price})
        amount = amount.quantize(Decimal("0.01"))
        self._insert("orders", {"order_id": order_id, "customer_id": customer, "status": "new", "amount": amount,
                                "created_at": BASE_TIME + timedelta(minutes=order_id)}, out, sql)
        # one multi-row INSERT for the order's items
        cols = ["item_id", "order_id", "sku", "qty", "price"]
        values = ", ".join("(" + ", ".join(_lit(i[c]) for c in cols) + ")" for i in items)
        sql.append(f"INSERT INTO {SCHEMA}.order_items ({', '.join(cols)}) VALUES {values};")
        for i in items:
            item_id = _int(i["item_id"])
            self.rows["order_items"][item_id] = dict(i)
            out.append(Change("order_items", item_id, "c", dict(i), self.txn))

    # ------------------------------------------------------------------ scripts

    def seed(self, customers: int = 20, orders: int = 30) -> tuple[str, list[Change]]:
        """Rows inserted before the connector starts, in one transaction."""
        self.txn += 1
        out: list[Change] = []
        sql = ["BEGIN;"]
        for _ in range(customers):
            self._insert("customers", self._customer(), out, sql)
        for _ in range(orders):
            self._add_order(out, sql)
        sql.append("COMMIT;")
        return "\n".join(sql) + "\n", out

    def snapshot(self) -> list[Change]:
        """The rows as they are now, as a snapshot reports them (``r``)."""
        return [Change(t, k, "r", dict(row), 0) for t in TABLES for k, row in sorted(self.rows[t].items())]

    def _one_statement(self, out: list[Change], sql: list[str]) -> str:
        rng = self.rng
        kind = rng.choices(
            ["customer", "order", "status", "email", "item_qty", "reprice", "item_pk", "customer_pk",
             "delete_item", "delete_order", "delete_customer"],
            weights=[8, 14, 14, 6, 8, 5, 4, 3, 5, 4, 3])[0]
        customers, orders, items = self.rows["customers"], self.rows["orders"], self.rows["order_items"]
        if kind == "customer" or not customers:
            self._insert("customers", self._customer(), out, sql)
            kind = "customer"
        elif kind == "order" or not orders:
            self._add_order(out, sql)
            kind = "order"
        elif kind == "status":
            oid = rng.choice(sorted(orders))
            self._update("orders", oid, {"status": rng.choice(STATUSES)}, out, sql)
        elif kind == "email":
            cid = rng.choice(sorted(customers))
            changes: Row = {"email": f"c{cid}.{rng.randint(1, 999)}@example.org"}
            if self.loyalty:
                changes["loyalty_tier"] = rng.choice(TIERS)
            self._update("customers", cid, changes, out, sql)
        elif kind == "item_qty" and items:
            iid = rng.choice(sorted(items))
            self._update("order_items", iid, {"qty": rng.randint(1, 9)}, out, sql)
        elif kind == "reprice":
            # one multi-row UPDATE: every item of an order, in the order PostgreSQL visits them (by item id,
            # each row its own change: the model does not depend on that order across keys)
            oid = rng.choice(sorted(orders))
            mine = sorted(k for k, r in items.items() if r["order_id"] == oid)
            sql.append(f"UPDATE {SCHEMA}.order_items SET price = price + 1 WHERE order_id = {oid};")
            for k in mine:
                items[k]["price"] = Decimal(str(items[k]["price"])) + 1
                out.append(Change("order_items", k, "u", dict(items[k]), self.txn))
        elif kind == "item_pk" and items:
            old = rng.choice(sorted(items))
            new = self._new_id("order_items")
            sql.append(f"UPDATE {SCHEMA}.order_items SET item_id = {new} WHERE item_id = {old};")
            row = items.pop(old)
            row["item_id"] = new
            items[new] = row
            out.append(Change("order_items", old, "d", None, self.txn))
            out.append(Change("order_items", new, "c", dict(row), self.txn))
        elif kind == "customer_pk":
            old = rng.choice(sorted(customers))
            new = self._new_id("customers")
            sql.append(f"UPDATE {SCHEMA}.customers SET customer_id = {new} WHERE customer_id = {old};")
            row = customers.pop(old)
            row["customer_id"] = new
            customers[new] = row
            out.append(Change("customers", old, "d", None, self.txn))
            out.append(Change("customers", new, "c", dict(row), self.txn))
            for oid in sorted(k for k, r in orders.items() if r["customer_id"] == old):  # ON UPDATE CASCADE
                orders[oid]["customer_id"] = new
                out.append(Change("orders", oid, "u", dict(orders[oid]), self.txn))
        elif kind == "delete_item" and items:
            iid = rng.choice(sorted(items))
            sql.append(f"DELETE FROM {SCHEMA}.order_items WHERE item_id = {iid};")
            self._delete("order_items", iid, out)
        elif kind == "delete_order":
            oid = rng.choice(sorted(orders))
            sql.append(f"DELETE FROM {SCHEMA}.orders WHERE order_id = {oid};")
            for iid in sorted(k for k, r in items.items() if r["order_id"] == oid):  # ON DELETE CASCADE
                self._delete("order_items", iid, out)
            self._delete("orders", oid, out)
        elif kind == "delete_customer":
            free = sorted(set(customers) - {_int(r["customer_id"]) for r in orders.values()})
            if free:
                cid = rng.choice(free)
                sql.append(f"DELETE FROM {SCHEMA}.customers WHERE customer_id = {cid};")
                self._delete("customers", cid, out)
            else:
                self._insert("customers", self._customer(), out, sql)
                kind = "customer"
        else:
            self._add_order(out, sql)
            kind = "order"
        return kind

    def transactions(self, n: int, rollback_every: int = 9) -> tuple[str, list[Change]]:
        """A script of ``n`` transactions of one to five statements; every ``rollback_every``-th one ends in
        ROLLBACK and changes nothing (the model is restored). Returns the script and the committed changes."""
        script: list[str] = []
        changes: list[Change] = []
        for i in range(n):
            self.txn += 1
            out: list[Change] = []
            sql = ["BEGIN;"]
            rollback = rollback_every > 0 and i % rollback_every == rollback_every - 1
            saved = ({t: {k: dict(r) for k, r in rows.items()} for t, rows in self.rows.items()}, dict(self.next_id)) \
                if rollback else None
            kinds = [self._one_statement(out, sql) for _ in range(self.rng.randint(1, 5))]
            if saved is not None:
                sql.append("ROLLBACK;")
                self.rows, self.next_id = saved
                self.rolled_back += 1
            else:
                sql.append("COMMIT;")
                changes += out
                self.statements.update(kinds)
            script += sql
        return "\n".join(script) + "\n", changes
