"""Smoke versions of the benchmarks (bench/run.py, bench/cluster_bench.py, bench/start_bench.py): each runs end to end on tiny
sizes with the Python client and reports a figure for every workload, so the tools the performance notes
quote keep working. The figures themselves are not judged here (speed is measured by the benches on a
quiet machine, not by timed tests); bench/partitions_bench.py's smoke version is test_many_partitions.py,
the C client's output parser is unit-tested (tests/unit/test_bench_rdkafka_perf.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(args: list[str], timeout: float) -> str:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def test_run_py_quick_reports_every_workload(tmp_path: Path) -> None:
    raw = tmp_path / "results.json"
    text = _run([str(BENCH / "run.py"), "--quick", "--client", "python", "--scale", "0.05",
                 "--dir", str(tmp_path), "--json-out", str(raw)], 600)
    data = json.loads(raw.read_text())
    ran = {r["workload"] for r in data["runs"]}
    assert ran == {"W1", "W2", "W3", "W4", "W5"}, ran
    for r in data["runs"]:
        assert "error" not in r, r
        assert r["metric"] > 0 and r["broker_peak_rss_mb"] > 0, r
    assert data["w6"], data.get("w6")
    for w in ("W1", "W2", "W3", "W4", "W5"):
        assert f"\n{w} " in text, text


def test_cluster_bench_reports_a_ratio() -> None:
    text = _run([str(BENCH / "cluster_bench.py"), "--client", "python", "--records", "3000", "--reps", "1"], 600)
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if line.startswith("rep 1")}
    assert set(lines) == {"rep 1 single", "rep 1 cluster"}, text
    assert all("MB/s" in line for line in lines.values()), text  # a figure, not an error
    assert all(re.search(r"broker CPU [\d.]+ s \(kernel [\d.]+\)", line) for line in lines.values()), text
    assert "kernel s" in text, text
    ratio = float(text.rsplit("ratio cluster/single MB/s:", 1)[1].split()[0])
    assert ratio > 0, text


def test_start_bench_times_the_first_acknowledged_produce() -> None:
    text = _run([str(BENCH / "start_bench.py"), "--reps", "1", "--idle-seconds", "0.5"], 300)
    line = next(ln for ln in text.splitlines() if ln.startswith("rep 1 odradek"))
    fresh = re.search(r"fresh: answer ([\d.]+) s, first ack ([\d.]+) s; idle RSS (\d+) MB", line)
    assert fresh, text
    assert 0 < float(fresh[1]) <= float(fresh[2]) and int(fresh[3]) > 0, line
    assert re.search(r"restart: answer [\d.]+ s, first ack [\d.]+ s", line), line
    assert "idle RSS after start" in text and "[" not in text.split("medians of 1")[1], text  # no peer: no ratio


def test_share_bench_acknowledges_every_record(tmp_path: Path) -> None:
    """bench/share_bench.py against Odradek alone: two share consumers in their own processes, every record
    delivered and acknowledged, the figures in the table and the raw results."""
    raw = tmp_path / "share.json"
    text = _run([str(BENCH / "share_bench.py"), "--brokers", "odradek", "--records", "2000", "--consumers", "2",
                 "--reps", "1", "--dir", str(tmp_path), "--json", str(raw), "--timeout", "120"], 300)
    (run,) = json.loads(raw.read_text())["runs"]
    assert "error" not in run, run
    assert (run["acked"], run["delivered"], run["consumers_reported"], run["share_version"]) == (2000, 2000, 2, 1)
    assert run["acked_rps"] > 0 and run["broker_cpu_s"] > 0 and run["consumer_cpu_s"] > 0, run
    assert re.search(r"records/s acknowledged\s+odradek [\d,]+ -> [\d,]+", text), text
