"""The CDC → ODS → warehouse job on a Spark standalone cluster (a master and two workers on this
machine, started and stopped by the test with pyspark's own spark-daemon.sh): the warehouse equals the
truth computed from what was sent (as the job on local[2] does in test_ods.py), and executors ran on both
workers (the source's tasks scale out on the engine)."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from integration.broker import Broker
from waiting import wait_until

from .standalone import StandaloneCluster
from .test_ods import (
    CdcStream,
    Feed,
    check_against_truth,
    config_text,
    customer_row,
    generate,
    order_row,
    pipeline_cmd,
    query,
)

CHECKS = (
    "SELECT * FROM ods.customers ORDER BY id",
    "SELECT * FROM ods.orders ORDER BY order_id",
    "SELECT status, sum(orders) AS n, sum(revenue) AS revenue FROM dw.sales_by_status GROUP BY status "
    "HAVING n != 0 ORDER BY status",
    "SELECT topic, partition, offset, reason FROM ods.quarantine FINAL ORDER BY topic, partition, offset",
)


def run_job(cfg_text: str, workdir: Path, master: str) -> list[list[dict[str, object]]]:
    workdir.mkdir()
    cfg = workdir / "pipeline.toml"
    cfg.write_text(cfg_text)
    out = subprocess.run(pipeline_cmd("run", "--config", str(cfg), "--available-now", "--master", master),
                         capture_output=True, text=True, timeout=420, cwd=workdir)
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    assert f"master {master}" in out.stdout and "batch " in out.stdout, out.stdout
    # the warm-up's synthetic source runs on the cluster's executors too (not skipped)
    assert "rounds on synthetic events" in out.stdout, out.stdout
    return [[_rounded(row) for row in query(cfg, sql)] for sql in CHECKS]


def _rounded(row: dict[str, object]) -> dict[str, object]:
    """Float sums depend on the order rows were added in (which differs between two executors and one): compare
    them to 1e-6."""
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}


@pytest.mark.timeout(1200)
def test_pipeline_on_standalone_cluster_equals_local(pipeline_broker: Broker, new_topic: Callable[..., str],
                                                     tmp_path: Path) -> None:
    rnd = random.Random(99)
    customers_topic = new_topic(3, prefix="shop.customers")
    orders_topic = new_topic(2, prefix="shop.orders")
    feed = Feed(pipeline_broker.bootstrap)
    sent_c: list[tuple[bytes | None, bytes | None]] = []
    sent_o: list[tuple[bytes | None, bytes | None]] = []
    generate(rnd, feed, customers_topic, CdcStream("customers", "id", rnd), customer_row(rnd), 400, 80, sent_c,
             bad_every=100)
    generate(rnd, feed, orders_topic, CdcStream("orders", "order_id", rnd), order_row(rnd), 300, 60, sent_o,
             bad_every=100)
    feed.flush()
    cfg_text = config_text(pipeline_broker.bootstrap, customers_topic, orders_topic, 250, warm_up=True)

    cluster = StandaloneCluster(tmp_path / "spark-cluster", workers=2)
    try:
        cluster.start()
        assert len(cluster.alive_workers()) == 2
        on_cluster = run_job(cfg_text, tmp_path / "cluster", cluster.url)
        apps = cluster.status().get("completedapps")
        assert isinstance(apps, list) and any(a.get("name") == "odradek-pipeline" for a in apps), apps
        # both workers ran an executor of the job
        for i in (1, 2):
            assert list((tmp_path / "spark-cluster" / f"worker-{i}").glob("app-*/*/stderr")), \
                f"worker {i} ran no executor:\n{cluster.logs()}"
    finally:
        cluster.stop()
    # spark-daemon.sh stop signals the daemons; on a loaded machine the master may answer a little longer
    wait_until(lambda: not cluster.alive_workers(), 60, "the standalone cluster to stop", interval=1,
               detail=cluster.logs)
    assert all(on_cluster), on_cluster  # every check has rows
    # the warehouse two executors built equals the truth computed from what was sent (the same check as the
    # job on local[2] in test_ods.py: running it here again cost a minute of Spark on CI's two cores)
    check_against_truth(tmp_path / "cluster" / "pipeline.toml", sent_c, sent_o, feed)
