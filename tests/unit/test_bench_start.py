"""bench/start_bench.py: its summary (each repetition, medians, the ratios against Kafka and the issue's
targets) from runs' results. The runs themselves start real brokers (Odradek, Kafka's JVM), outside the suite."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import start_bench  # noqa: E402


def run(kind: str, fresh: float, restart: float, rss: float) -> dict[str, object]:
    return {"broker": kind, "fresh": {"answer_s": fresh / 2, "first_ack_s": fresh},
            "restart": {"answer_s": restart / 2, "first_ack_s": restart}, "idle_rss_mb": rss}


def test_value_is_dotted_and_none_when_missing() -> None:
    r = run("odradek", 1.0, 2.0, 40.0)
    assert start_bench.value(r, "fresh.first_ack_s") == 1.0
    assert start_bench.value(r, "idle_rss_mb") == 40.0
    assert start_bench.value({"broker": "kafka", "error": "x"}, "fresh.first_ack_s") is None
    assert start_bench.value(r, "format_s") is None


def test_summary_medians_ratios_and_targets() -> None:
    results = [run("odradek", 1.0, 1.0, 40.0), run("kafka", 20.0, 4.0, 400.0),
               run("kafka", 24.0, 6.0, 380.0), run("odradek", 3.0, 2.0, 50.0),
               {"broker": "kafka", "error": "TimeoutError: x"}]
    lines = start_bench.summarise(results, ("odradek", "kafka"))
    ack = [ln for ln in lines if ln.startswith("fresh start: first acknowledged produce")]
    assert ack[0].split()[-4:] == ["3.00", "->", "2.00", "s"] and "odradek" in ack[0]
    assert ack[1].split()[-5:] == ["24.00", "-", "->", "22.00", "s"] and "kafka" in ack[1]  # the failed rep: '-'
    assert "[PASS] start to first acknowledged produce <= 1/5 of Kafka's: 0.091x (2 vs 22)" in lines
    assert "[FAIL] restart to first acknowledged produce <= 1/5 of Kafka's: 0.300x (1.5 vs 5)" in lines
    assert "[PASS] idle RSS <= 1/4 of Kafka's: 0.115x (45 vs 390)" in lines
    assert not any(ln.startswith("kafka-storage format") for ln in lines)  # no run measured it


def test_summary_without_peer_or_with_a_failed_peer() -> None:
    lines = start_bench.summarise([run("odradek", 1.0, 1.0, 40.0)], ("odradek",))
    assert not any(ln.startswith("[") for ln in lines)
    lines = start_bench.summarise([run("odradek", 1.0, 1.0, 40.0), {"broker": "kafka", "error": "e"}],
                                  ("odradek", "kafka"))
    assert "[n/a ] idle RSS <= 1/4 of Kafka's: n/a" in lines
