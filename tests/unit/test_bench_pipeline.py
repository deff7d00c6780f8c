"""bench/pipeline_bench.py --jvm-connector: the ratio of the project's Spark source to Spark's JVM Kafka
connector, per minPartitions setting. The reads themselves need Spark and a broker, outside the suite."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import pipeline_bench  # noqa: E402

JVM = pipeline_bench.JVM_CONNECTOR


def test_connector_ratios_pair_the_same_min_partitions() -> None:
    rates = {
        "odradek source, reader=wire, minPartitions=default (3 tasks)": 300_000.0,
        "odradek source, reader=librdkafka, minPartitions=default (3 tasks)": 100_000.0,
        "odradek source, reader=wire, minPartitions=4 (4 tasks)": 320_000.0,
        f"{JVM}, minPartitions=default (3 tasks)": 200_000.0,
        f"{JVM}, minPartitions=4 (4 tasks)": 400_000.0,
    }
    assert pipeline_bench.connector_ratios(rates) == [
        "ratio odradek source (reader=wire, minPartitions=default) / JVM connector rows/s: 1.50",
        "ratio odradek source (reader=librdkafka, minPartitions=default) / JVM connector rows/s: 0.50",
        "ratio odradek source (reader=wire, minPartitions=4) / JVM connector rows/s: 0.80",
    ]


def test_no_ratio_without_the_jvm_connector() -> None:
    assert pipeline_bench.connector_ratios({"odradek source, reader=wire, minPartitions=default (3 tasks)": 1.0}) == []
