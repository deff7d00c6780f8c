"""bench/partitions_bench.py --peer kafka: the comparison table of create and restart times. The runs
themselves start real brokers (Odradek, Kafka's JVM) with thousands of partitions, outside the suite."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import partitions_bench  # noqa: E402


def test_compare_lines() -> None:
    results = [
        {"broker": "odradek", "create_s": 1.0, "logs_s": 1.0, "clean": {"answer_s": 0.5, "last_s": 0.6, "all_s": 2.0},
         "kill9": {"answer_s": 0.7, "last_s": 0.8, "all_s": 3.0}},
        {"broker": "kafka", "create_s": 2.0, "logs_s": 10.0, "clean": {"answer_s": 5.0, "last_s": 6.0, "all_s": 8.0},
         "kill9": {"answer_s": 9.0, "last_s": 9.5, "all_s": 12.0}},
        {"broker": "kafka", "error": "TimeoutError: x", "create_s": 4.0},
        {"broker": "odradek", "create_s": 3.0, "logs_s": 3.0, "clean": {"answer_s": 0.5, "last_s": 0.6, "all_s": 2.0},
         "kill9": {"answer_s": 0.9, "last_s": 1.0, "all_s": 3.0}},
    ]
    lines = {ln.split("  ")[0]: ln for ln in partitions_bench.compare_lines(results)}
    create = lines["create: CreateTopics answered"]
    assert "odradek 1.00 3.00 -> 2.00" in create and "kafka 2.00 4.00 -> 3.00" in create
    assert create.endswith("O/K 0.67x")
    assert lines["create: every log on disk"].endswith("O/K 0.20x")
    kill = lines["after kill -9: last partition acked"]
    assert "kafka 9.50 - -> 9.50" in kill and kill.endswith("O/K 0.09x")
    assert len(lines) == len(partitions_bench.PEER_ROWS)


def test_compare_lines_without_kafka_figures() -> None:
    lines = partitions_bench.compare_lines([{"broker": "odradek", "create_s": 1.0}, {"broker": "kafka", "error": "e"}])
    assert lines[0].endswith("O/K n/a")
