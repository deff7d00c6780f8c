"""Kafka's own perf tools (Java, Kafka 4.4, from peers/kafka_peer.py) as a bench client.

The load generator Kafka's project measures Kafka with, run against either broker:
``kafka-producer-perf-test`` (produce), ``kafka-consumer-perf-test`` (consume) and
``kafka-e2e-latency`` (end-to-end latency). Each tool's output is parsed here into the dict
``odradek perf --json`` prints (``records``, ``bytes``, ``elapsed_s``, ``records_per_sec``,
``mb_per_sec`` with MB = 2**20 B as the tools count it, ``latency_ms``), so bench/run.py reports it
beside the other clients. Every tool is its own JVM (kafka-run-class.sh's options, -Xmx256M); its CPU
seconds come from wait4.

Producer: the Java producer's defaults (linger.ms=5, batch.size=16384, the built-in sticky
partitioner), ``acks`` as the workload asks, no throttle (``--throughput -1``). The summary line::

    50000 records sent, 13234.515617 records/sec (12.92 MB/sec), 1397.32 ms avg latency, 1982.00 ms max
    latency, 1450 ms 50th, 1926 ms 95th, 1966 ms 99th, 1979 ms 99.9th.

(latency: send() to acknowledgement, per record). Its records/sec and MB/sec are over the whole run,
JVM warm-up included (no ``--warmup-records``, as rdkafka_performance has none).

Consumer: subscribes to the topic with a new group, from the earliest offset, until ``--num-records``;
it prints a header and one CSV line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

``mb_per_sec`` is ``fetch.MB.sec``: the fetching time only, without the group's join (rebalance.time.ms),
which W3 (assign, from the beginning) does not have; ``whole_run_mb_per_sec`` is ``MB.sec``.

End-to-end: ``kafka-e2e-latency`` sends one record at a time and waits until its consumer receives it
before the next (serial round trips: not W4's paced stream), then prints::

    Avg latency: 6.6090 ms
    Percentiles: 50th = 4, 99th = 33, 99.9th = 218

(percentiles in whole milliseconds, as the tool prints them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

MB = 1024.0 * 1024.0
_NUM = r"(\d+(?:\.\d+)?)"
PRODUCED = re.compile(
    rf"(\d+) records sent, {_NUM} records/sec \({_NUM} MB/sec\), {_NUM} ms avg latency, {_NUM} ms max latency"
    rf", {_NUM} ms 50th, {_NUM} ms 95th, {_NUM} ms 99th, {_NUM} ms 99\.9th")
E2E_AVG = re.compile(rf"Avg latency: {_NUM} ms")
E2E_PCT = re.compile(rf"Percentiles: 50th = {_NUM}, 99th = {_NUM}, 99\.9th = {_NUM}")
CONSUMER_COLUMNS = ("start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg", "nMsg.sec",
                    "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec")


def _kafka_peer() -> Any:
    peers = str(Path(__file__).resolve().parents[1] / "peers")
    if peers not in sys.path:
        sys.path.insert(0, peers)
    import kafka_peer

    return kafka_peer


def parse_produce(stdout: str, record_size: int) -> dict[str, Any]:
    """kafka-producer-perf-test's last summary line (the one with percentiles)."""
    found = list(PRODUCED.finditer(stdout))
    if not found:
        return {"error": "no summary line from kafka-producer-perf-test", "stdout_tail": stdout[-800:]}
    g = found[-1].groups()
    records = int(g[0])
    rps, mbps, avg, mx, p50, p95, p99, p999 = (float(x) for x in g[1:])
    return {
        "mode": "produce", "client": "kafka-perf", "record_size": record_size, "records": records,
        "bytes": records * record_size, "elapsed_s": round(records / rps, 3) if rps else None,
        "records_per_sec": rps, "mb_per_sec": mbps,
        "latency_ms": {"avg": avg, "max": mx, "p50": p50, "p95": p95, "p99": p99, "p99_9": p999},
    }


def parse_consume(stdout: str, record_size: int) -> dict[str, Any]:
    """kafka-consumer-perf-test's CSV line (the last line with all ten columns after the header)."""
    row: list[str] | None = None
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(CONSUMER_COLUMNS) and cells[0] != CONSUMER_COLUMNS[0]:
            row = cells
    if row is None:
        return {"error": "no result line from kafka-consumer-perf-test", "stdout_tail": stdout[-800:]}
    try:
        v = {k: float(x) for k, x in zip(CONSUMER_COLUMNS[2:], row[2:], strict=True)}
    except ValueError:
        return {"error": f"unreadable result line from kafka-consumer-perf-test: {', '.join(row)}"}
    records = int(v["data.consumed.in.nMsg"])
    return {
        "mode": "consume", "client": "kafka-perf", "record_size": record_size, "records": records,
        # the tool prints MB to 4 decimals (about 100 bytes): the workload's record size counts exactly
        "bytes": records * record_size, "mb_consumed": v["data.consumed.in.MB"], "elapsed_s": round(v["fetch.time.ms"] / 1000.0, 3),
        "records_per_sec": v["fetch.nMsg.sec"], "mb_per_sec": v["fetch.MB.sec"],
        "whole_run_mb_per_sec": v["MB.sec"], "rebalance_ms": v["rebalance.time.ms"],
        "start_time": row[0], "end_time": row[1],
    }


def parse_e2e(stdout: str, record_size: int, records: int) -> dict[str, Any]:
    """kafka-e2e-latency's average and percentiles."""
    avg, pct = E2E_AVG.search(stdout), E2E_PCT.search(stdout)
    if avg is None or pct is None:
        return {"error": "no latency summary from kafka-e2e-latency", "stdout_tail": stdout[-800:]}
    p50, p99, p999 = (float(x) for x in pct.groups())
    return {"mode": "e2e", "client": "kafka-perf", "record_size": record_size, "records": records,
            "serial": True, "latency_ms": {"avg": float(avg.group(1)), "p50": p50, "p99": p99, "p99_9": p999}}


def command(mode: str, bootstrap: str, topic: str, records: int, record_size: int, *, acks: str = "1",
            props: dict[str, str] | None = None, timeout_ms: int = 30_000) -> list[str]:
    kp = _kafka_peer()
    if mode == "produce":
        conf = {"bootstrap.servers": bootstrap, "acks": acks, "client.id": "odradek-bench-kafka-perf", **(props or {})}
        return kp.tool_command("kafka-producer-perf-test", "--topic", topic, "--num-records", str(records),
                               "--record-size", str(record_size), "--throughput", "-1",
                               "--command-property", *(f"{k}={v}" for k, v in conf.items()))
    if mode == "consume":
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
                "--timeout", str(timeout_ms)]
        for k, v in (props or {}).items():
            args += ["--command-property", f"{k}={v}"]
        return kp.tool_command("kafka-consumer-perf-test", *args)
    if mode == "e2e":
        return kp.tool_command("kafka-e2e-latency", "--bootstrap-server", bootstrap, "--topic", topic,
                               "--num-records", str(records), "--producer-acks", acks, "--record-size", str(record_size))
    raise ValueError(f"no Kafka perf tool for {mode}")


def run(mode: str, bootstrap: str, topic: str, records: int, record_size: int, *, acks: str = "1",
        props: dict[str, str] | None = None, timeout_s: float = 300.0) -> tuple[dict[str, Any], float]:
    """Run the tool once; (the result dict, the tool's CPU seconds)."""
    cmd = command(mode, bootstrap, topic, records, record_size, acks=acks, props=props)
    with tempfile.TemporaryDirectory(prefix="kafkaperf-") as tmp:
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        with out_path.open("w") as fout, err_path.open("w") as ferr:
            proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, stdin=subprocess.DEVNULL)
            killer = threading.Timer(timeout_s, proc.kill)
            killer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    if mode == "produce":
        result = parse_produce(out, record_size)
    elif mode == "consume":
        result = parse_consume(out, record_size)
    else:
        result = parse_e2e(out, record_size, records)
    if "error" not in result and mode != "e2e" and result.get("records", 0) < records:
        result["error"] = f"{result.get('records')} of {records} records"
    if proc.returncode != 0:
        result.setdefault("error", f"{cmd[cmd.index('-cp') + 2]} exit code {proc.returncode}")
    if "error" in result:
        result["stderr_tail"] = err[-800:]
        result.setdefault("stdout_tail", out[-800:])
    result["command"] = " ".join(cmd[cmd.index("-cp") + 2:])  # the main class and its arguments
    return result, cpu
