"""bench/rdkafka_perf.py: rdkafka_performance's output (as librdkafka 2.15.0 prints it) parsed into the
result `odradek perf --json` gives. The tool itself is built by bench/build_rdkafka.sh, outside the suite."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rdkafka_perf  # noqa: E402

ROW = "| {:>10} | {:>10} | {:>10} | {:>10} | {:>10} | {:>10} | {:>10.2f} | {:>10} | {:>10} | {:>10} | {:>10} "
HEADER = ("|    elapsed |       msgs |      bytes |        rtt |         dr |     dr_m/s |    dr_MB/s |     dr_err |"
          "     tx_err |       outq |     offset ")


def table(rows: list[tuple[int, int, int]], sent: int, size: int) -> str:
    lines = [HEADER]
    for ms, dr, err in rows:
        lines.append(ROW.format(ms, sent, sent * size, 0, dr, 0, 0.0, err, 0, sent - dr, dr))
    return "% Sending 1000 messages of size 1024 bytes\n" + "\n".join(lines) + "\n"


def test_produce_bulk_window_skips_client_stalls() -> None:
    # first deliveries after 1,000 ms (librdkafka's connection to the leader), then 900 records in
    # 100 ms, then the last 100 after another second (one partition's last batch held by the client)
    out = table([(100, 0, 0), (1000, 10, 0), (1100, 910, 0), (1200, 990, 0), (2200, 1000, 0)], 1000, 1024)
    lat = [5000] * 10 + [2000] * 980 + [900_000] * 10
    r = rdkafka_perf.parse_produce(out, 1024, lat)
    assert r["records"] == 1000 and r["bytes"] == 1024 * 1000 and "error" not in r
    assert r["bulk_window"] == {"from_ms": 1000, "to_ms": 1200, "records": 980}
    assert r["records_per_sec"] == 980 / 0.2
    assert abs(r["whole_run_mb_per_sec"] - 1000 * 1024 / 2**20 / 2.2) < 1e-3
    assert r["latency_ms"]["p99"] == 2.0 and r["latency_ms"]["max"] == 2.0


def test_produce_failures_are_errors() -> None:
    out = table([(100, 500, 3), (200, 997, 3)], 1000, 1024)
    r = rdkafka_perf.parse_produce(out, 1024, [])
    assert r["errors"] == 3 and "3 messages failed" in r["error"]


def test_produce_summary_line_without_table() -> None:
    out = ("% 200000 messages produced (204800000 bytes), 200000 delivered (offset 33, 0 failed) in 2000ms: "
           "100000 msgs/s and 102.40 MB/s, 0 produce failures, 0 in queue, no compression\n")
    r = rdkafka_perf.parse_produce(out, 1024, [])
    assert r["records"] == 200000 and r["records_per_sec"] == 100000.0


def test_consume_summary() -> None:
    out = "% 100345 messages (102753280 bytes) consumed in 220ms: 456113 msgs/s (467.06 MB/s)\n"
    r = rdkafka_perf.parse_consume(out, 1024)
    assert r["records"] == 100345 and r["bytes"] == 102753280
    assert abs(r["mb_per_sec"] - 102753280 / 2**20 / 0.22) < 1e-2


def test_no_output_is_an_error() -> None:
    assert "error" in rdkafka_perf.parse_produce("", 1024, [])
    assert "error" in rdkafka_perf.parse_consume("% Waiting\n", 1024)
