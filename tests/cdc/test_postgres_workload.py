"""The PostgreSQL of the CDC tests and the retail workload's model, against a real server (no Connect).

The model of ``RetailWorkload`` is what the Debezium test compares the topics with, so it must be what
PostgreSQL holds after the scripts ran: foreign-key cascades, primary-key changes, multi-row statements and
rolled-back transactions included.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from odradek.devcluster.cdc_workload import KEYS, TABLES, RetailWorkload
from odradek.devcluster.postgres import PostgresServer

COLUMNS = {
    "customers": ("customer_id", "full_name", "email", "phone", "loyalty_tier"),
    "orders": ("order_id", "customer_id", "status", "amount", "created_at"),
    "order_items": ("item_id", "order_id", "sku", "qty", "price"),
}


def table_rows(pg: PostgresServer, table: str) -> dict[int, tuple[str, ...]]:
    cols = COLUMNS[table]
    select = ", ".join(f"extract(epoch from {c})::bigint::text" if c == "created_at" else f"{c}::text" for c in cols)
    rows = pg.query(f"SELECT {select} FROM shop.{table} ORDER BY {KEYS[table]}")
    return {int(r[0]): tuple(r) for r in rows}


def model_rows(workload: RetailWorkload, table: str) -> dict[int, tuple[str, ...]]:
    out: dict[int, tuple[str, ...]] = {}
    for key, row in workload.rows[table].items():
        values = []
        for c in COLUMNS[table]:
            v = row[c]
            if c == "created_at":
                values.append(str(int(v.timestamp())))  # type: ignore[attr-defined]
            elif isinstance(v, Decimal):
                values.append(f"{v:.2f}")
            else:
                values.append("" if v is None else str(v))
        out[key] = tuple(values)
    return out


def test_postgres_runs_for_logical_decoding(postgres: PostgresServer) -> None:
    assert postgres.query("SHOW wal_level") == [["logical"]]
    assert int(postgres.query("SHOW max_replication_slots")[0][0]) >= 2
    assert postgres.query("SHOW listen_addresses") == [["127.0.0.1"]]
    # as root, the server runs as the unprivileged postgres user (PostgreSQL refuses root)
    assert postgres.proc is not None
    uid = int(Path(f"/proc/{postgres.proc.pid}/status").read_text().split("Uid:")[1].split()[1])
    assert (uid != 0) if os.geteuid() == 0 else uid == os.geteuid()


def test_workload_model_equals_the_database(postgres: PostgresServer) -> None:
    workload = RetailWorkload(seed=5)
    postgres.psql(workload.schema_sql())
    script, seeded = workload.seed(customers=10, orders=15)
    postgres.psql(script)
    script, changes = workload.transactions(100)
    postgres.psql(script)
    postgres.psql(workload.schema_change())
    script, more = workload.transactions(100)
    postgres.psql(script)
    changes += more
    for table in TABLES:
        assert table_rows(postgres, table) == model_rows(workload, table), table
    ops = {c.op for c in changes}
    assert ops == {"c", "u", "d"}
    # primary-key changes, multi-row updates, cascading deletes and rollbacks all happened
    assert workload.rolled_back == 2 * (100 // 9)
    assert any(c.after and c.after.get("loyalty_tier") for c in more)
    for kind in ("item_pk", "customer_pk", "reprice", "delete_order", "delete_customer"):
        assert workload.statements[kind] > 0, workload.statements
    assert len(seeded) > 25
