"""librdkafka's C perf tool (``rdkafka_performance``, built by bench/build_rdkafka.sh) as a bench client.

The broker rather than a Python client loop is measured: the tool produces or consumes with
librdkafka's own threads and prints a summary line, parsed here into the dict ``odradek perf --json``
prints (``records``, ``bytes``, ``elapsed_s``, ``records_per_sec``, ``mb_per_sec`` with MB = 2**20 B,
``latency_ms``), so bench/run.py and bench/cluster_bench.py report both clients alike.

Producer (``-P``): the table of ``-u -i 100`` (a row every 100 ms) and the summary line are read;
MB/s and msgs/s count from the first row with deliveries to the end (see :func:`parse_produce`).
``-l -A <file>`` writes each message's delivery latency (produce call to delivery
report, in microseconds) to a file, summarised into ``latency_ms``. The payload then starts with
``LATENCY:<timestamp>``; the record size stays the one asked for. Each message goes to a random
partition (``sticky.partitioning.linger.ms=0``) with ``linger.ms=1`` (see :func:`run`).

Consumer (``-C``): every partition named with ``-p``, from the beginning, exits after ``-c`` messages.

    the produce summary:  % 200000 messages produced (204800000 bytes), 200000 delivered (offset 33, 0 failed)
                          in 171ms: 1169590 msgs/s and 1197.66 MB/s, 0 produce failures, 0 in queue, no compression
    the consume summary:  % 200000 messages (204800000 bytes) consumed in 171ms: 1169590 msgs/s (1197.66 MB/s)
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build_rdkafka.sh"
MB = 1024.0 * 1024.0

PRODUCED = re.compile(
    r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset -?\d+, (\d+) failed\) in (\d+)ms")
CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms")
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))


def ensure_built() -> Path:
    """The rdkafka_performance binary ($RDKAFKA_PERFORMANCE, else built into bench/.rdkafka)."""
    given = os.environ.get("RDKAFKA_PERFORMANCE")
    if given:
        return Path(given)
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"bench/build_rdkafka.sh failed: {out.stderr[-1500:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def latency_summary_us(values_us: list[int]) -> dict[str, float]:
    if not values_us:
        return {"avg": 0.0, "max": 0.0, **{name: 0.0 for name, _ in PERCENTILES}}
    v = sorted(values_us)
    out = {"avg": sum(v) / len(v) / 1000.0, "max": v[-1] / 1000.0}
    for name, q in PERCENTILES:
        out[name] = v[min(int(q * len(v)), len(v) - 1)] / 1000.0
    return {k: round(x, 3) for k, x in out.items()}


def table_rows(stdout: str) -> list[tuple[int, int]]:
    """(elapsed ms, delivered) of each row of the producer's table (``-u``)."""
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].isdigit() and cells[4].isdigit():
            rows.append((int(cells[0]), int(cells[4])))
    return rows


def parse_produce(stdout: str, record_size: int, latencies_us: list[int]) -> dict[str, Any]:
    """The producer's result from its table (``-u``; the summary line when there is no table).

    MB/s and msgs/s are those of the bulk of the run: from the first table row with deliveries to
    the first row with 99% of the records delivered. librdkafka at times holds its first batches up
    to a second while the connection to the partition leader comes up (the bootstrap connection is
    dropped, KIP-899), and its last partial batch of one partition up to a second (the broker
    answers it within milliseconds once sent; seen with ``-d protocol``): client timers, not the
    broker. ``whole_run_mb_per_sec`` is the figure with both; latencies are those of the records
    delivered in the bulk window."""
    rows = table_rows(stdout)
    if rows:
        ms, delivered = rows[-1]
        failed = table_errors(stdout)
        sent = delivered + failed
    else:
        found = list(PRODUCED.finditer(stdout))
        if not found:
            return {"error": "no produce summary from rdkafka_performance", "stdout_tail": stdout[-800:]}
        sent, _, delivered, failed, ms = (int(x) for x in found[-1].groups())
    elapsed = max(ms, 1) / 1000.0
    first = next(((t, d) for t, d in rows if d > 0), None)
    bulk = next(((t, d) for t, d in rows if d >= 0.99 * delivered), None)
    if first is not None and bulk is not None and bulk[0] > first[0] and bulk[1] > first[1]:
        window_s, window_n, lo, hi = (bulk[0] - first[0]) / 1000.0, bulk[1] - first[1], first[1], bulk[1]
    else:
        window_s, window_n, lo, hi = elapsed, delivered, 0, delivered
    result: dict[str, Any] = {
        "mode": "produce", "client": "c", "record_size": record_size, "records": delivered,
        "records_sent": sent, "bytes": delivered * record_size, "elapsed_s": elapsed,
        "records_per_sec": round(window_n / window_s, 1),
        "mb_per_sec": round(window_n * record_size / MB / window_s, 3),
        "whole_run_mb_per_sec": round(delivered * record_size / MB / elapsed, 3),
        "bulk_window": {"from_ms": first[0] if first else 0, "to_ms": bulk[0] if bulk else ms,
                        "records": window_n},
        "latency_ms": latency_summary_us(latencies_us[lo:hi]), "errors": failed,
    }
    if failed:
        result["error"] = f"{failed} messages failed"
    return result


def table_errors(stdout: str) -> int:
    """dr_err of the table's last row."""
    last = 0
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0].isdigit() and cells[7].isdigit():
            last = int(cells[7])
    return last


def parse_consume(stdout: str, record_size: int) -> dict[str, Any]:
    found = list(CONSUMED.finditer(stdout))
    m = found[-1] if found else None
    if m is None:
        return {"error": "no consume summary from rdkafka_performance", "stdout_tail": stdout[-800:]}
    records, nbytes, ms = (int(x) for x in m.groups())
    elapsed = max(ms, 1) / 1000.0
    return {
        "mode": "consume", "client": "c", "record_size": record_size, "records": records, "bytes": nbytes,
        "elapsed_s": elapsed, "records_per_sec": round(records / elapsed, 1),
        "mb_per_sec": round(nbytes / MB / elapsed, 3),
    }


def run(binary: Path, mode: str, bootstrap: str, topic: str, records: int, record_size: int, *,
        acks: str = "all", partitions: int = 1, latency: bool = True, rate: int | None = None,
        props: dict[str, str] | None = None, timeout_s: float = 300.0,
        nice: int = 0) -> tuple[dict[str, Any], float]:
    """Run the tool once; (the result dict, the client's CPU seconds). ``nice``: the tool's niceness
    (its rate limiter spins between messages; a positive value lets brokers on the same cores go first)."""
    cmd = [str(binary), "-b", bootstrap, "-t", topic, "-c", str(records)]
    conf = {"client.id": "odradek-bench-c", **(props or {})}
    if mode == "produce":
        # every record to a random partition: with sticky partitioning (KIP-480, 10 ms) the records
        # queued before the first metadata arrive, and whatever follows within the window, all land
        # in one partition (seen: 200,000 of 200,000 in one of 6), so one leader takes all the load
        conf.setdefault("sticky.partitioning.linger.ms", "0")
        # librdkafka 2.15.0 at its default linger.ms=5 holds a partition's last batch up to a second
        # here (200,000 records: the last 2,594 a second late; the broker answers in milliseconds once
        # they are sent, seen with -d protocol); at 0-2 ms it does not
        conf.setdefault("linger.ms", "1")
    with tempfile.TemporaryDirectory(prefix="rdkperf-") as tmp:
        lat_file = Path(tmp) / "latency.txt"
        if mode == "produce":
            cmd[1:1] = ["-P"]
            cmd += ["-s", str(record_size), "-a", "-1" if acks == "all" else acks, "-u", "-i", "100"]
            if latency:
                cmd += ["-l", "-A", str(lat_file)]
            if rate:
                cmd += ["-r", str(rate)]
        elif mode == "consume":
            cmd[1:1] = ["-C"]
            cmd += ["-o", "beginning", "-e", "-q"]  # -q: the summary line only
            for p in range(partitions):
                cmd += ["-p", str(p)]
        else:
            raise ValueError(f"the C client runs produce and consume, not {mode}")
        for k, v in conf.items():
            cmd += ["-X", f"{k}={v}"]
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        with out_path.open("w") as fout, err_path.open("w") as ferr:
            proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, stdin=subprocess.DEVNULL,
                                    preexec_fn=(lambda: os.nice(nice)) if nice else None)
            killer = threading.Timer(timeout_s, proc.kill)
            killer.start()
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
        if mode == "produce":
            lats = [int(x) for x in lat_file.read_text().split()] if latency and lat_file.exists() else []
            result = parse_produce(out, record_size, lats)
        else:
            result = parse_consume(out, record_size)
            if result.get("records", 0) < records and "error" not in result:
                result["error"] = f"consumed {result.get('records')} of {records} records"
    if (proc.returncode == 1 and mode == "produce" and "error" not in result
            and result.get("records", 0) >= records and result.get("errors") == 0):
        # every record delivered without error, yet exit 1: the tool compares its produced count
        # (less a racy read of the queue length) with its delivered count (seen: 299,999 vs 300,000)
        result["tool_exit_code"] = proc.returncode
    elif proc.returncode != 0:
        result.setdefault("error", f"rdkafka_performance exit code {proc.returncode}")
    if "error" in result:
        result["stderr_tail"] = err[-800:]
        result["stdout_tail"] = out[-800:]
    result["command"] = " ".join(cmd)
    return result, cpu

