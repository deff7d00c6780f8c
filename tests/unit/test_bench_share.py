"""bench/share_bench.py: the workers' lines tallied into the figures (rates from the first subscribe, duplicates
and redeliveries), the offsets' range encoding, the comparison table and the alternation. The sessions themselves
start real brokers and share consumers (tests/integration/test_bench_smoke.py runs one against Odradek)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import share_bench  # noqa: E402


def line(**kw: object) -> str:
    return json.dumps(kw)


def test_ranges_round_trip() -> None:
    assert share_bench.to_ranges([5, 1, 2, 3, 7, 8, 2]) == [[1, 3], [5, 5], [7, 8]]
    assert share_bench.to_ranges([]) == []
    assert list(share_bench.from_ranges([[1, 3], [5, 5], [7, 8]])) == [1, 2, 3, 5, 7, 8]


def test_tally_times_from_the_first_subscribe_to_the_last_acknowledgement() -> None:
    t = share_bench.Tally(4)
    t.feed(line(sub=100.5))
    t.feed(line(sub=100.0))
    t.feed(line(d=[[0, 1]], n=2, r=0, t=101.0))
    t.feed(line(d=[[2, 3]], n=2, r=0, t=101.5))
    t.feed(line(a=[[0, 1]], t=101.6))
    assert not t.done.is_set()
    # offsets 2 and 3 again (their lock expired), delivery count 2, then acknowledged
    t.feed(line(d=[[2, 3]], n=2, r=2, t=103.0))
    t.feed(line(a=[[2, 3]], t=104.0))
    assert t.done.is_set()
    t.feed(line(a=[[3, 3]], t=109.0))  # a second acknowledgement of a record does not move the end
    t.feed(line(cpu=0.5))
    t.feed(line(cpu=1.25))
    s = t.summary()
    assert (s["delivered"], s["acked"], s["deliveries"], s["redelivered"], s["duplicates"]) == (4, 4, 6, 2, 2)
    assert s["elapsed_s"] == 4.0 and s["acked_rps"] == 1.0 and s["acked_after_first_rps"] == round(4 / 3.0, 1)
    assert s["delivered_s"] == 1.5 and s["delivered_rps"] == round(4 / 1.5, 1) and s["first_delivery_s"] == 1.0
    assert (s["consumer_cpu_s"], s["consumer_cpu_max_s"], s["consumers_reported"]) == (1.75, 1.25, 2)
    assert s["ack_errors"] == 0 and s["foreign_offsets"] == 0


def test_tally_counts_failures_and_unexpected_offsets() -> None:
    t = share_bench.Tally(2)
    t.feed(line(sub=1.0))
    t.feed(line(d=[[0, 2]], n=3, r=0, t=2.0))  # offset 2 is beyond the records produced
    t.feed(line(ae=2, t=2.5, e="INVALID_RECORD_STATE"))
    t.feed(line(err="broker: boom"))
    t.feed("%7|librdkafka| not json\n")
    s = t.summary()
    assert (s["delivered"], s["acked"], s["foreign_offsets"], s["ack_errors"]) == (2, 0, 1, 2)
    assert "elapsed_s" not in s and not t.done.is_set()
    assert t.errors == ["INVALID_RECORD_STATE", "broker: boom", "unexpected output: %7|librdkafka| not json"]


def test_compare_lines_medians_and_ratio() -> None:
    def run(broker: str, k: int, rps: float, **kw: object) -> dict[str, object]:
        return {"broker": broker, "consumers": k, "acked_rps": rps, "broker_cpu_s": rps / 1000, **kw}

    results = [run("odradek", 1, 3000), run("kafka", 1, 1000), run("kafka", 1, 2000), run("odradek", 1, 5000),
               run("odradek", 1, 9000, error="TimeoutError: x"), run("odradek", 5, 100), run("kafka", 5, 0)]
    lines = share_bench.compare_lines(results)
    assert lines[0] == "K=1 share consumer:"
    acked = next(ln for ln in lines if "records/s acknowledged" in ln)
    assert "odradek 3,000 5,000 - -> 4,000" in acked and "kafka 1,000 2,000 -> 1,500" in acked
    assert acked.endswith("O/K 2.67x")
    assert next(ln for ln in lines if "broker CPU s" in ln).endswith("O/K 2.67x")
    assert next(ln for ln in lines if "redeliveries" in ln).endswith("O/K n/a")  # no figure
    k5 = lines.index("K=5 share consumers:")
    assert lines[k5 + 1].endswith("O/K n/a")  # Kafka's median 0: no ratio
    assert len(lines) == 2 * (1 + len(share_bench.ROWS))


def test_arguments() -> None:
    assert share_bench.parse_consumers("1,5,20") == [1, 5, 20]
    assert share_bench.parse_brokers("kafka,odradek") == ["kafka", "odradek"]
    for bad in ("0", "", "a"):
        with pytest.raises((ValueError, share_bench.argparse.ArgumentTypeError)):
            share_bench.parse_consumers(bad)
    with pytest.raises(share_bench.argparse.ArgumentTypeError):
        share_bench.parse_brokers("tansu")
    assert share_bench.session_order(["odradek", "kafka"], 0) == ["odradek", "kafka"]
    assert share_bench.session_order(["odradek", "kafka"], 1) == ["kafka", "odradek"]
    assert share_bench.session_order(["odradek"], 1) == ["odradek"]


def test_session_line() -> None:
    ok = share_bench.session_line({"broker": "kafka", "consumers": 5, "rep": 1, "acked_rps": 12345.6,
                                   "delivered_rps": 20000, "elapsed_s": 1.5, "redelivered": 3, "duplicates": 4,
                                   "broker_cpu_s": 2.25, "consumer_cpu_s": 1.0})
    assert ok.startswith("K=5   rep 2 kafka") and "12,346 rec/s acked" in ok and "redelivered 3" in ok
    bad = share_bench.session_line({"broker": "odradek", "consumers": 1, "error": "RuntimeError: no"})
    assert bad.endswith("ERROR RuntimeError: no")
