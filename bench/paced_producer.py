"""Our rate-paced C producer (bench/lat_producer.c, built by bench/build_rdkafka.sh next to
rdkafka_performance) as a bench client.

rdkafka_performance's rate limiter (``-r``) waits ``1/RATE`` after each message by polling with a
millisecond timeout, i.e. it spins below a millisecond: a whole core at 1,000 msg/s, and it cannot
reach 102,400 msg/s. lat_producer produces in ticks (every 1 ms: the messages due by then, then it
sleeps to the next tick's absolute time), stamps ``LATENCY:<wall clock µs>`` at the start of each
payload as rdkafka_performance -C -l expects, and prints one JSON line (see :func:`parse_output`).
With ``warmup_partitions`` it first sends one untimed message to each partition (connections to
every leader up before the timed messages); a consumer counting records must expect that many more.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import rdkafka_perf

KEYS = ("records", "delivered", "failed", "elapsed_s", "records_per_sec", "mb_per_sec", "behind_max_ms", "ack_ms")


def ensure_built() -> Path:
    """bench/.rdkafka/bin/lat_producer (or next to $RDKAFKA_PERFORMANCE), built when missing or stale."""
    return rdkafka_perf.ensure_built().parent / "lat_producer"


def parse_output(stdout: str) -> dict[str, Any]:
    """The last JSON line lat_producer printed, checked for its keys; ``error`` when none or when
    messages failed or were left undelivered."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        missing = [k for k in KEYS if k not in out]
        if missing:
            return {"error": f"lat_producer output lacks {', '.join(missing)}", "stdout_tail": stdout[-800:]}
        if out["failed"] or out["delivered"] < out["records"]:
            out["error"] = f"{out['delivered']} of {out['records']} delivered, {out['failed']} failed"
        return out
    return {"error": "no result line from lat_producer", "stdout_tail": stdout[-800:]}


def command(binary: Path, bootstrap: str, topic: str, records: int, record_size: int, rate: int, *,
            acks: str = "all", tick_us: int = 1000, warmup_partitions: int = 0,
            props: dict[str, str] | None = None) -> list[str]:
    cmd = [str(binary), "-b", bootstrap, "-t", topic, "-r", str(rate), "-c", str(records), "-s", str(record_size),
           "-a", acks, "-T", str(tick_us)]
    if warmup_partitions:
        cmd += ["-W", str(warmup_partitions)]
    # each record to a random partition (librdkafka's sticky partitioner would put a linger's worth in one)
    conf = {"client.id": "odradek-bench-paced", "sticky.partitioning.linger.ms": "0", "linger.ms": "1",
            **(props or {})}
    for k, v in conf.items():
        cmd += ["-X", f"{k}={v}"]
    return cmd


def run(binary: Path, bootstrap: str, topic: str, records: int, record_size: int, rate: int, *,
        acks: str = "all", tick_us: int = 1000, warmup_partitions: int = 0, props: dict[str, str] | None = None,
        timeout_s: float = 300.0, nice: int = 0) -> tuple[dict[str, Any], float]:
    """Run lat_producer once: (its parsed result, its CPU seconds from wait4, warm-up included)."""
    cmd = command(binary, bootstrap, topic, records, record_size, rate, acks=acks, tick_us=tick_us,
                  warmup_partitions=warmup_partitions, props=props)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, preexec_fn=(lambda: os.nice(nice)) if nice else None)
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    try:
        out, err = proc.communicate()
    finally:
        killer.cancel()
    result = parse_output(out)
    if proc.returncode != 0:
        result.setdefault("error", f"lat_producer exit code {proc.returncode}")
    if "error" in result:
        result["stderr_tail"] = err[-800:]
    result["command"] = " ".join(cmd)
    return result, float(result.get("cpu_s", 0.0))
