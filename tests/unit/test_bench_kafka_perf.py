"""bench/kafka_perf.py: the output of Kafka 4.4's perf tools (kafka-producer-perf-test,
kafka-consumer-perf-test, kafka-e2e-latency) parsed into the result `odradek perf --json` gives; and
bench/run.py's --client list. The tools themselves (Java, peers/kafka_peer.py) run outside the suite."""

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kafka_perf  # noqa: E402
import run  # noqa: E402

PRODUCER_OUT = """\
24576 records sent, 4912.2 records/sec (4.80 MB/sec), 1512.4 ms avg latency, 2893.0 ms max latency.
50000 records sent, 13234.515617 records/sec (12.92 MB/sec), 1397.32 ms avg latency, 1982.00 ms max latency, \
1450 ms 50th, 1926 ms 95th, 1966 ms 99th, 1979 ms 99.9th.
"""

CONSUMER_OUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-12-06 20:08:17:577, 2026-12-06 20:08:19:497, 48.8281, 25.4313, 50000, 26041.6667, 1064, 856, 57.0422, 58411.2150
"""

E2E_OUT = """\
0\t218.310389
Avg latency: 6.6090 ms
Percentiles: 50th = 4, 99th = 33, 99.9th = 218
"""


def test_produce_summary_line_with_percentiles() -> None:
    r = kafka_perf.parse_produce(PRODUCER_OUT, 1024)
    assert "error" not in r and r["client"] == "kafka-perf"
    assert r["records"] == 50000 and r["bytes"] == 50000 * 1024
    assert r["records_per_sec"] == 13234.515617 and r["mb_per_sec"] == 12.92
    assert r["latency_ms"] == {"avg": 1397.32, "max": 1982.0, "p50": 1450.0, "p95": 1926.0, "p99": 1966.0,
                               "p99_9": 1979.0}
    assert abs(r["elapsed_s"] - 50000 / 13234.515617) < 1e-3
    assert run.metric_of(r, "records_per_sec") == 13234.515617


def test_produce_progress_lines_alone_are_an_error() -> None:
    r = kafka_perf.parse_produce(PRODUCER_OUT.splitlines()[0] + "\n", 1024)
    assert "error" in r


def test_consume_csv_line() -> None:
    r = kafka_perf.parse_consume(CONSUMER_OUT, 1024)
    assert "error" not in r
    assert r["records"] == 50000 and r["bytes"] == 50000 * 1024
    assert r["mb_per_sec"] == 57.0422 and r["whole_run_mb_per_sec"] == 25.4313
    assert r["records_per_sec"] == 58411.2150 and r["rebalance_ms"] == 1064.0 and r["elapsed_s"] == 0.856


def test_consume_header_alone_is_an_error() -> None:
    assert "error" in kafka_perf.parse_consume(CONSUMER_OUT.splitlines()[0] + "\n", 1024)
    assert "error" in kafka_perf.parse_consume("", 1024)


def test_e2e_summary() -> None:
    r = kafka_perf.parse_e2e(E2E_OUT, 1024, 300)
    assert r["latency_ms"] == {"avg": 6.609, "p50": 4.0, "p99": 33.0, "p99_9": 218.0}
    assert run.metric_of(r, "latency_ms.p99") == 33.0
    assert "error" in kafka_perf.parse_e2e("0\t218.3\n", 1024, 300)


def test_client_list() -> None:
    assert run.parse_clients("c") == ["c"]
    assert run.parse_clients("both") == ["python", "c"]
    assert run.parse_clients("kafka-perf,c") == ["c", "kafka-perf"]
    assert run.parse_clients("all") == ["python", "c", "kafka-perf"]
    with pytest.raises(argparse.ArgumentTypeError):
        run.parse_clients("java")
