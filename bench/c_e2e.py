"""End-to-end latency with librdkafka in C: our rate-paced producer (bench/lat_producer.c,
bench/paced_producer.py) stamps ``LATENCY:<wall clock µs>`` into each payload and
``rdkafka_performance -C -l -A FILE`` (librdkafka's perf tool), started first over every partition
from the end, writes ``now - stamp`` per record to FILE. Used by bench/latency_bench.py and by
bench/run.py's W4 with ``--client c``.

The producer's warm-up sends one untimed record per partition first (no stamp: the consumer counts
it but adds no latency), so the consumer waits for ``records + partitions`` records. Should it
start late and miss a warm-up record, it is stopped with SIGINT (its latency file is then closed
cleanly) once the producer is done and ``grace_s`` passed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import paced_producer


def e2e_summary(values_us: list[int]) -> dict[str, float]:
    """records, p50/p99/p99.9 (``p999``), max and avg in ms of per-record latencies in µs."""
    if not values_us:
        return {}
    v = sorted(values_us)

    def q(x: float) -> float:
        return round(v[min(int(x * len(v)), len(v) - 1)] / 1000.0, 3)

    return {"records": len(v), "p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": round(v[-1] / 1000.0, 3),
            "avg": round(sum(v) / len(v) / 1000.0, 3)}


def perf_form(summary: dict[str, float]) -> dict[str, float]:
    """An :func:`e2e_summary` in ``odradek perf e2e``'s ``latency_ms`` keys (p99.9 as ``p99_9``)."""
    return {("p99_9" if k == "p999" else k): v for k, v in summary.items() if k != "records"}


class Consumer:
    """rdkafka_performance -C -l over every partition from the end; its CPU seconds from wait4."""

    def __init__(self, binary: Path, bootstrap: str, topic: str, partitions: int, records: int,
                 workdir: Path, props: dict[str, str]) -> None:
        self.lat_file = workdir / "e2e.txt"
        cmd = [str(binary), "-C", "-b", bootstrap, "-t", topic, "-c", str(records), "-o", "end", "-l",
               "-A", str(self.lat_file), "-q"]
        for p in range(partitions):
            cmd += ["-p", str(p)]
        for k, v in {"client.id": "odradek-bench-e2e", **props}.items():
            cmd += ["-X", f"{k}={v}"]
        self.command = " ".join(cmd)
        self.out = (workdir / "consumer.out").open("w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.cpu_s = 0.0
        self.exit_code: int | None = None
        self.stopped_early = False

    def wait(self, timeout_s: float, grace_s: float | None = None) -> None:
        """Until it exits; after ``grace_s`` (when given) it is asked to stop (SIGINT), after
        ``timeout_s`` killed."""
        killer = threading.Timer(timeout_s, self.proc.kill)
        killer.start()
        stopper = None
        if grace_s is not None:
            def stop() -> None:
                if self.proc.poll() is None:
                    self.stopped_early = True
                    self.proc.send_signal(signal.SIGINT)
            stopper = threading.Timer(grace_s, stop)
            stopper.start()
        _, status, usage = os.wait4(self.proc.pid, 0)
        killer.cancel()
        if stopper is not None:
            stopper.cancel()
        self.proc.returncode = self.exit_code = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.out.close()

    def latencies_us(self) -> list[int]:
        return [int(x) for x in self.lat_file.read_text().split()] if self.lat_file.exists() else []


def run_w4(consumer_binary: Path, producer_binary: Path, bootstrap: str, topic: str, records: int, record_size: int,
           rate: int, partitions: int, workdir: Path, *, acks: str = "1", linger_ms: int = 5,
           fetch_wait_max_ms: int = 100, timeout_s: float = 300.0) -> tuple[dict[str, Any], float]:
    """W4 with the C clients: (a result in ``odradek perf e2e``'s form, producer + consumer CPU s)."""
    workdir.mkdir(parents=True, exist_ok=True)
    consumer = Consumer(consumer_binary, bootstrap, topic, partitions, records + partitions, workdir,
                        {"fetch.wait.max.ms": str(fetch_wait_max_ms)})
    time.sleep(2.0)  # the consumer has resolved the end offsets (no metrics endpoint on a peer to ask)
    t0 = time.monotonic()
    produced, producer_cpu = paced_producer.run(
        producer_binary, bootstrap, topic, records, record_size, rate, acks=acks, warmup_partitions=partitions,
        props={"linger.ms": str(linger_ms)}, timeout_s=timeout_s)
    consumer.wait(timeout_s=60.0, grace_s=5.0)
    elapsed = time.monotonic() - t0
    lat = consumer.latencies_us()
    result: dict[str, Any] = {
        "mode": "e2e", "client": "c", "topic": topic, "partitions": partitions, "record_size": record_size,
        "records": len(lat), "records_requested": records, "elapsed_s": round(elapsed, 4),
        "records_per_sec": produced.get("records_per_sec"), "mb_per_sec": produced.get("mb_per_sec"),
        "throughput_target": rate, "latency_ms": perf_form(e2e_summary(lat)),
        "produce_ack_ms": produced.get("ack_ms", {}), "behind_max_ms": produced.get("behind_max_ms"),
        "producer_command": produced.get("command"), "consumer_command": consumer.command,
    }
    if "error" in produced:
        result["error"] = f"producer: {produced['error']}"
    elif len(lat) < records:
        result["error"] = f"{len(lat)} of {records} latencies (consumer exit {consumer.exit_code})"
    return result, producer_cpu + consumer.cpu_s
