"""Shared pieces of ``odradek perf``: options, statistics, throttling, progress output, broker checks.

Units follow Kafka's perf tools: "MB" is 2**20 bytes, latencies are in milliseconds.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from odradek.progress import Progress
from odradek.progress import enabled as progress_enabled

MB = 1024.0 * 1024.0
REPORT_INTERVAL = 5.0
METADATA_TIMEOUT = 5.0
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p99_9", 0.999))


class PerfError(Exception):
    """A failure reported as ``Error: ...`` with exit code 1."""


@dataclass
class PerfOptions:
    bootstrap: str
    topic: str
    num_records: int
    record_size: int
    throughput: float = -1.0
    acks: str = "1"
    partitions: int | None = None
    # --command-config: the client's security settings, for every client of the run (admin, producer, consumer)
    client_props: dict[str, str] = field(default_factory=dict)
    producer_props: dict[str, str] = field(default_factory=dict)
    consumer_props: dict[str, str] = field(default_factory=dict)
    json: bool = False
    timeout: float = 300.0
    idle_timeout: float = 10.0
    group: str | None = None
    report_interval: float = REPORT_INTERVAL
    verbose: bool = False
    progress: bool | None = None  # a progress line on stderr: None = when stderr is a terminal

    def progress_line(self, label: str) -> Progress:
        return Progress(label, self.num_records, show=progress_enabled(self.progress, sys.stderr))

    @property
    def out(self) -> TextIO:
        """Where progress lines go: stdout, or stderr when stdout carries the JSON object."""
        return sys.stderr if self.json else sys.stdout


def parse_props(items: Iterable[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise PerfError(f"{what} expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------------------------------------- statistics


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 when empty)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    rank = max(1, math.ceil(q * n))
    return float(sorted_values[min(rank, n) - 1])


def latency_summary(values_ms: Sequence[float]) -> dict[str, float]:
    """avg, max and the standard percentiles of latencies in ms."""
    if not values_ms:
        return {"avg": 0.0, "max": 0.0, **{name: 0.0 for name, _ in PERCENTILES}}
    ordered = sorted(values_ms)
    out = {"avg": sum(ordered) / len(ordered), "max": float(ordered[-1])}
    for name, q in PERCENTILES:
        out[name] = percentile(ordered, q)
    return {k: round(v, 3) for k, v in out.items()}


class LatencyRecorder:
    """Collects latencies (seconds, as librdkafka reports them) and prints a progress line every interval.

    The hot path is ``add``/``array.append``; windows are summarised from slices when a line is due.
    """

    def __init__(self, out: TextIO, record_size: int, verb: str, interval: float = REPORT_INTERVAL,
                 scale: float = 1000.0) -> None:
        self.values = array("d")
        self.out = out
        self.record_size = record_size
        self.verb = verb
        self.interval = interval
        self.scale = scale  # multiplier from stored unit to ms
        self.window_start = time.monotonic()
        self.window_index = 0
        self.next_report = self.window_start + interval

    def maybe_report(self, now: float) -> None:
        if now >= self.next_report:
            self.report(now)

    def report(self, now: float) -> None:
        window = self.values[self.window_index:]
        n = len(window)
        elapsed = max(now - self.window_start, 1e-9)
        rate = n / elapsed
        mb = rate * self.record_size / MB
        avg = (sum(window) / n * self.scale) if n else 0.0
        mx = (max(window) * self.scale) if n else 0.0
        print(f"{n} records {self.verb}, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
              f"{avg:.1f} ms avg latency, {mx:.1f} ms max latency.", file=self.out, flush=True)
        self.window_index = len(self.values)
        self.window_start = now
        self.next_report = now + self.interval

    def summary_ms(self) -> dict[str, float]:
        return latency_summary([v * self.scale for v in self.values])


def summary_line(count: int, elapsed: float, record_size: int, lat: dict[str, float], verb: str) -> str:
    rate = count / elapsed if elapsed > 0 else 0.0
    mb = rate * record_size / MB
    return (f"{count} records {verb}, {rate:.1f} records/sec ({mb:.2f} MB/sec), {lat['avg']:.2f} ms avg latency, "
            f"{lat['max']:.2f} ms max latency, {lat['p50']:.2f} ms 50th, {lat['p95']:.2f} ms 95th, "
            f"{lat['p99']:.2f} ms 99th, {lat['p99_9']:.2f} ms 99.9th.")


# ---------------------------------------------------------------------------------------------- throttling


class Throttler:
    """Keeps a sender at ``rate`` records/s on average: the n-th record is due at start + n / rate.

    A sender that is ahead of that schedule by more than ``min_sleep`` seconds sleeps until the record is
    due; one that is behind catches up without sleeping. A rate <= 0 means no limit.
    """

    def __init__(self, rate: float, start: float | None = None, min_sleep: float = 0.001,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.start = clock() if start is None else start
        self.min_sleep = min_sleep

    @property
    def active(self) -> bool:
        return self.rate > 0

    def check_every(self) -> int:
        """How many records may be sent between calls to ``pause`` without sleeping much coarser than 1 ms."""
        if not self.active:
            return 1000
        return max(1, min(1000, int(self.rate / 1000)))

    def pause(self, sent: int, now: float | None = None) -> None:
        if self.rate <= 0:
            return
        due = self.start + sent / self.rate
        ahead = due - (self.clock() if now is None else now)
        if ahead >= self.min_sleep:
            self.sleep(ahead)


# ---------------------------------------------------------------------------------------------- clients


def librdkafka_logger(verbose: bool) -> logging.Logger:
    logger = logging.getLogger("odradek.perf.librdkafka")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("librdkafka: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR + 10)  # quiet unless --verbose
    return logger


def base_config(opts: PerfOptions) -> dict[str, Any]:
    return {**opts.client_props, "bootstrap.servers": opts.bootstrap, "logger": librdkafka_logger(opts.verbose)}


def _endpoints(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise PerfError(f"--bootstrap-server expects HOST:PORT, got {item!r}")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return out


def check_reachable(opts: PerfOptions, timeout: float = METADATA_TIMEOUT) -> Any:
    """Connect and fetch metadata within ``timeout`` seconds; returns an AdminClient. Raises PerfError."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors = []
    for host, port in _endpoints(opts.bootstrap):
        try:
            with socket.create_connection((host, port), timeout=min(timeout, 3.0)):
                break
        except OSError as e:
            errors.append(f"{host}:{port}: {e.strerror or e}")
    else:
        raise PerfError(f"cannot connect to the broker at {opts.bootstrap} ({'; '.join(errors)})")
    # no short socket.timeout.ms here: the same client creates topics, which may take a broker a while
    admin = AdminClient(base_config(opts))
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise PerfError(f"no metadata from the broker at {opts.bootstrap} within {timeout:.0f} s: {e}") from None
    return admin


def ensure_topic(admin: Any, opts: PerfOptions, timeout: float = 30.0) -> int:
    """Create the topic with ``opts.partitions`` partitions if it is missing; returns its partition count."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    md = admin.list_topics(timeout=METADATA_TIMEOUT)
    existing = md.topics.get(opts.topic)
    if existing is not None and existing.error is None and existing.partitions:
        n = len(existing.partitions)
        if opts.partitions is not None and n != opts.partitions:
            print(f"Warning: topic {opts.topic} exists with {n} partitions, not {opts.partitions}",
                  file=sys.stderr)
        return n
    want = opts.partitions or 1
    fut = admin.create_topics([NewTopic(opts.topic, num_partitions=want, replication_factor=1)],
                              request_timeout=timeout)[opts.topic]
    try:
        fut.result(timeout)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if getattr(err, "name", lambda: "")() != "TOPIC_ALREADY_EXISTS":
            raise PerfError(f"cannot create topic {opts.topic}: {e}") from None
    # wait until metadata shows every partition with a leader
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=opts.topic, timeout=METADATA_TIMEOUT).topics.get(opts.topic)
        if t is not None and t.error is None and len(t.partitions) >= want and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return len(t.partitions)
        time.sleep(0.05)
    raise PerfError(f"topic {opts.topic} has no leaders for its {want} partitions after {timeout:.0f} s")


def emit_json(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def make_payload(size: int, seed: int = 0) -> bytes:
    """Printable filler like Kafka's perf tool (random letters), generated once."""
    import random

    rnd = random.Random(seed)
    return bytes(rnd.randrange(65, 91) for _ in range(size))
