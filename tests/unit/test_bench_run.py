"""bench/run.py: the workload titles name the record counts each workload runs with, at any --scale and
with --quick (a scaled run used to print the standard sizes' titles)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import run  # noqa: E402


def test_count_label() -> None:
    assert [run.count_label(n) for n in (100, 999, 1000, 2500, 20_000, 200_000, 1_000_000, 10_000_000, 12_345)] == [
        "100", "999", "1k", "2.5k", "20k", "200k", "1M", "10M", "12.3k"]


def test_standard_titles() -> None:
    w = run.workloads(False)
    assert w["W1"].title == "1M x 100 B acks=1, 1 partition"
    assert w["W2"].title == "200k x 1 KB acks=all, 6 partitions"
    assert w["W5"].title == "100k x 1 KB over 1,000 partitions, acks=all"
    assert w["W4"].title.endswith("(50k)")


def test_scaled_titles_name_the_scaled_counts() -> None:
    w = run.workloads(False, 10)
    assert (w["W1"].records, w["W2"].records, w["W3"].records, w["W5"].records) == (
        10_000_000, 2_000_000, 2_000_000, 1_000_000)
    assert w["W1"].title.startswith("10M x 100 B")
    assert w["W2"].title.startswith("2M x 1 KB")
    assert w["W4"].title.endswith("(500k)")
    assert w["W5"].title.startswith("1M x 1 KB over 1,000 partitions")


def test_quick_titles() -> None:
    w = run.workloads(True, 0.05)
    assert w["W1"].records == 5000 and w["W1"].title.startswith("5k x 100 B")
    assert w["W2"].title.startswith("1k x 1 KB")
