"""[[dw.aggregating]] end to end: the -Merge of the states equals the ODS recomputation across a kill. Helpers in test_ods.py."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integration.broker import Broker

from .test_ods import (
    PAYMENT_COLUMNS,
    CdcStream,
    Event,
    Feed,
    generate_facts,
    payments_config,
    query,
    run_and_kill,
    run_available_now,
    truth,
)


@pytest.mark.timeout(900)
def test_aggregating_equals_ods_across_kill(spark: Any, pipeline_broker: Broker, new_topic: Callable[..., str],
                                           tmp_path: Path) -> None:
    """[[dw.aggregating]] end to end: an append-only stream with re-deliveries, the job killed with
    SIGKILL mid-run and run again; the -Merge of the AggregatingMergeTree's states equals the same
    aggregates computed from the ODS and from the events themselves."""
    rnd = random.Random(20261126)
    topic = new_topic(2, prefix="shop.payments")
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(payments_config(pipeline_broker.bootstrap, topic, 120))
    feed = Feed(pipeline_broker.bootstrap)
    payments = CdcStream("payments", "payment_id", rnd)
    sent: list[Event] = []
    generate_facts(rnd, feed, topic, payments, 700, sent)
    feed.flush()

    def while_running() -> None:
        generate_facts(rnd, feed, topic, payments, 300, sent)
        feed.flush()

    run_and_kill(cfg, rnd, while_running)
    cfg.write_text(payments_config(pipeline_broker.bootstrap, topic, 2000))
    run_available_now(spark, cfg)

    want = truth(sent, "payment_id", PAYMENT_COLUMNS)
    merged = query(cfg, "SELECT day, customers, amount_q, n FROM dw.daily_payments_merged ORDER BY day")
    recomputed = query(cfg, "SELECT day AS day, uniq(customer_id) AS customers, "
                            "quantiles(0.5, 0.9, 0.99)(amount) AS amount_q, count() AS n FROM ods.payments "
                            "GROUP BY day ORDER BY day")
    assert merged == recomputed
    by_day: dict[int, list[dict[str, Any]]] = {}
    for row in want.values():
        by_day.setdefault(int(row["day"]), []).append(row)
    assert {int(r["day"]): int(r["n"]) for r in merged} == {d: len(rs) for d, rs in by_day.items()}
    assert {int(r["day"]): int(r["customers"]) for r in merged} == {
        d: len({r["customer_id"] for r in rs}) for d, rs in by_day.items()}
    assert len(want) < len(sent)  # re-deliveries were sent, and none was counted twice
