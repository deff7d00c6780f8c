"""``odradek perf produce|consume|e2e`` against a real broker: small runs, JSON output checked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from .broker import Broker, free_port

PERF = [sys.executable, "-m", "odradek", "perf"]
SHARED_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def perf(mode: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PERF, mode, *args], capture_output=True, text=True, timeout=timeout)


def perf_json(mode: str, broker: Broker, topic: str, *args: str) -> dict[str, Any]:
    out = perf(mode, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--json", "--timeout", "40", *args)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, f"--json must print exactly one line on stdout, got: {out.stdout!r}"
    result: dict[str, Any] = json.loads(lines[0])
    assert result["mode"] == mode
    assert "error" not in result
    return result


def test_produce_consume_e2e(shared_broker: Broker) -> None:
    broker = shared_broker
    produced = perf_json("produce", broker, "perf-a", "--num-records", "5000", "--record-size", "200",
                         "--partitions", "3", "--acks", "all", "--producer-props", "linger.ms=2")
    assert produced["records"] == 5000
    assert produced["bytes"] == 5000 * 200
    assert produced["partitions"] == 3
    assert produced["errors"] == 0 and produced["undelivered"] == 0 and not produced["timed_out"]
    assert produced["records_per_sec"] > 0 and produced["mb_per_sec"] > 0
    lat = produced["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
    assert lat["avg"] <= lat["max"]

    consumed = perf_json("consume", broker, "perf-a", "--num-records", "5000", "--record-size", "200")
    assert consumed["records"] == 5000
    assert consumed["bytes"] == 5000 * 200
    assert consumed["partitions"] == 3
    assert consumed["mb_per_sec"] > 0
    assert consumed["fetch"]["fetch_requests"] >= 1

    e2e = perf_json("e2e", broker, "perf-e2e", "--num-records", "300", "--record-size", "512",
                    "--throughput", "500", "--producer-props", "linger.ms=0",
                    "--consumer-props", "fetch.wait.max.ms=100")
    assert e2e["records"] == 300 and e2e["lost"] == 0 and e2e["duplicates"] == 0
    elat = e2e["latency_ms"]
    assert 0 < elat["p50"] <= elat["p99"] <= elat["max"] < 5000
    # throttled to 500 records/s: 300 records take about 0.6 s, not much less
    assert e2e["elapsed_s"] >= 0.5


def test_progress_lines_and_summary(shared_broker: Broker) -> None:
    broker = shared_broker
    out = perf("produce", "--bootstrap-server", broker.bootstrap, "--topic", "perf-b", "--num-records", "3000",
               "--record-size", "100", "--throughput", "2000", "--reporting-interval", "0.5")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) >= 2, out.stdout  # at least one progress line before the summary
    assert all(" records sent, " in ln and "records/sec" in ln and "MB/sec" in ln for ln in lines)
    assert "ms avg latency" in lines[0] and "ms max latency." in lines[0]
    assert "99.9th." in lines[-1]
    assert lines[-1].startswith("3000 records sent")


def test_unreachable_broker_fails_fast() -> None:
    port = free_port()  # nothing listens here
    for mode in ("produce", "consume", "e2e"):
        t0 = time.monotonic()
        out = perf(mode, "--bootstrap-server", f"127.0.0.1:{port}", "--topic", "t", "--num-records", "10",
                   "--json", timeout=30)
        assert out.returncode == 1
        assert time.monotonic() - t0 < 15
        assert "Error:" in out.stderr
        assert json.loads(out.stdout)["error"]


def test_bad_props_is_an_error() -> None:
    out = perf("produce", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--topic", "t", "--num-records", "1",
               "--producer-props", "novalue")
    assert out.returncode == 1
    assert "KEY=VALUE" in out.stderr


def test_throttler_and_percentiles() -> None:
    from odradek.perf.common import Throttler, latency_summary, percentile

    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    t = Throttler(1000.0, start=0.0, clock=lambda: now[0], sleep=sleep)
    t.pause(10)  # 10 records at t=0: 10 ms ahead of a 1,000/s schedule
    assert slept == [0.01]
    now[0] = 1.0
    t.pause(500)  # behind schedule: no sleep
    assert slept == [0.01]
    assert not Throttler(-1).active
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 1001)], 0.999) == 999.0
    s = latency_summary([5.0, 1.0, 3.0])
    assert s["max"] == 5.0 and s["p50"] == 3.0 and s["avg"] == 3.0


def test_progress_line_on_stderr_keeps_json_stdout(shared_broker: Broker) -> None:
    out = perf("produce", "--bootstrap-server", shared_broker.bootstrap, "--topic", "perf-p", "--num-records",
               "2000", "--record-size", "100", "--json", "--progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] == 2000  # stdout: the one JSON object
    assert "produce: 2000/2000 (100%)" in out.stderr, out.stderr
    out = perf("consume", "--bootstrap-server", shared_broker.bootstrap, "--topic", "perf-p", "--num-records",
               "2000", "--json", "--progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] == 2000
    assert "consume: 2000/2000 (100%)" in out.stderr, out.stderr
