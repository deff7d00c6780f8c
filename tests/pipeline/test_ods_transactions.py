"""The CDC → ODS job reads committed transactions only (read_committed by default). Helpers in test_ods.py; the
jobs run with ``--available-now`` in this process on the tests' Spark session (``run_available_now``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from integration.broker import Broker

from .test_ods import (
    CUSTOMER_COLUMNS,
    CdcStream,
    Event,
    config_text,
    customer_row,
    normalise,
    query,
    run_available_now,
    truth,
)


@pytest.mark.timeout(900)
def test_ods_reads_committed_transactions_only(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                                               tmp_path: Path) -> None:
    """The job reads with isolation.level=read_committed by default: CDC events of an aborted
    transaction never reach the ODS; those of committed transactions do."""
    rnd = random.Random(7)
    customers_topic = new_topic(2, prefix="shop.customers")
    orders_topic = new_topic(1, prefix="shop.orders")
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(config_text(pipeline_broker.bootstrap, customers_topic, orders_topic, 1000))
    stream = CdcStream("customers", "id", rnd)
    make = customer_row(rnd)
    p = Producer({"bootstrap.servers": pipeline_broker.bootstrap, "transactional.id": f"cdc-{customers_topic}"})
    p.init_transactions(30)
    committed: list[Event] = []
    for txn in range(6):
        p.begin_transaction()
        events = [stream.change(make, 40) for _ in range(15)]
        for k, v in events:
            p.produce(customers_topic, key=k, value=v)
        if txn % 3 == 1:
            assert p.flush(30) == 0  # the aborted records reach the log (abort alone purges unsent ones)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += events
    run_available_now(spark, cfg)
    want = {k: normalise(v, CUSTOMER_COLUMNS) for k, v in truth(committed, "id", CUSTOMER_COLUMNS).items()}
    rows = query(cfg, "SELECT * FROM ods.customers ORDER BY id")
    got = {int(r["id"]): normalise(r, CUSTOMER_COLUMNS) for r in rows}
    assert got == want
    # the same job told to read uncommitted data loads the aborted changes too
    everything = {k: normalise(v, CUSTOMER_COLUMNS)
                  for k, v in truth([ev for _k, ev in stream.history], "id", CUSTOMER_COLUMNS).items()}
    assert everything != want
    other = tmp_path / "uncommitted"
    other.mkdir()
    cfg2 = other / "pipeline.toml"
    cfg2.write_text(cfg.read_text().replace(f'bootstrap_servers = "{pipeline_broker.bootstrap}"',
                                            f'bootstrap_servers = "{pipeline_broker.bootstrap}"\n'
                                            'options = { "isolation.level" = "read_uncommitted" }'))
    run_available_now(spark, cfg2)
    rows = query(cfg2, "SELECT * FROM ods.customers ORDER BY id")
    assert {int(r["id"]): normalise(r, CUSTOMER_COLUMNS) for r in rows} == everything
