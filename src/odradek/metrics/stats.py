"""The counters the broker keeps on its hot paths: plain ints in plain objects, read at scrape time.

Nothing here calls prometheus_client; :mod:`odradek.metrics.collector` turns these into Kafka's
metric names when ``/metrics`` is scraped. Each object belongs to the event loop that updates it
(the scrape runs on that loop too), so no locks; a worker thread (tiered storage's readers) counts in
objects of its own that only it writes (``BrokerTopicStats.for_thread``, ``WorkerPoolStats``), summed at
scrape time.

* :class:`BrokerTopicStats` — Kafka's BrokerTopicMetrics per topic: MessagesIn, BytesIn, BytesOut,
  ReplicationBytesIn, ReplicationBytesOut, TotalProduceRequests, FailedProduceRequests, TotalFetchRequests,
  FailedFetchRequests (counted per partition, as Kafka's ReplicaManager marks them), and tiered storage's
  meters and gauges (Kafka's RemoteStorageMetrics, KIP-405 and KIP-963: RemoteCopyBytes ... RemoteLogSizeBytes,
  :class:`RemoteLogGauges` per partition). The all-topics values are the sums, made at scrape time.
* :class:`WorkerPoolStats` — Kafka's RemoteStorageThreadPool gauges (task queue size, idle share).
* :class:`RequestStats` — Kafka's RequestMetrics: requests per (request, version) and the
  latency of each phase of a request (RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs,
  ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs) per request name, measured by the
  connection (server.connection), and ErrorsPerSec: the error codes of the responses per request
  (api key; a Fetch is one request here, as in Kafka). Latencies go into :class:`LatencyHistogram`
  buckets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Kafka's RequestMetrics names for a Fetch: a consumer's and a follower's are kept apart
FETCH_CONSUMER = 1000
FETCH_FOLLOWER = 1001

PHASES = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs", "ResponseSendTimeMs",
          "TotalTimeMs")
# the percentiles Kafka's Yammer histograms publish (50thPercentile ... 999thPercentile)
QUANTILES = ((0.50, "0.50"), (0.75, "0.75"), (0.95, "0.95"), (0.98, "0.98"), (0.99, "0.99"), (0.999, "0.999"))

_SUB = 4  # buckets per power of two: a bucket's width is at most a quarter of its lower bound
_NBUCKETS = 40 * _SUB  # up to 2**40 µs (12 days)


class TopicCounters:
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "replication_bytes_in", "replication_bytes_out",
                 "total_produce",
                 "failed_produce", "total_fetch", "failed_fetch",
                 # tiered storage (KIP-405, KIP-963: Kafka's RemoteStorageMetrics in BrokerTopicMetrics)
                 "remote_copy_bytes", "remote_copy_requests", "remote_copy_errors",
                 "remote_fetch_bytes", "remote_fetch_requests", "remote_fetch_errors",
                 "remote_delete_requests", "remote_delete_errors",
                 "build_remote_log_aux_state_requests", "build_remote_log_aux_state_errors")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.total_produce = 0
        self.failed_produce = 0
        self.total_fetch = 0
        self.failed_fetch = 0
        self.remote_copy_bytes = 0
        self.remote_copy_requests = 0
        self.remote_copy_errors = 0
        self.remote_fetch_bytes = 0
        self.remote_fetch_requests = 0
        self.remote_fetch_errors = 0
        self.remote_delete_requests = 0
        self.remote_delete_errors = 0
        self.build_remote_log_aux_state_requests = 0
        self.build_remote_log_aux_state_errors = 0

    def add(self, other: TopicCounters) -> None:
        for k in TopicCounters.__slots__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


class RemoteLogGauges:
    """Kafka's per-partition remote storage gauges (BrokerTopicStats.recordRemoteCopyLagBytes and the
    others, KIP-963), which BrokerTopicMetrics sums per topic and over all topics. Set by the remote log
    manager on the event loop for the tiered partitions this broker leads."""

    __slots__ = ("copy_lag_bytes", "copy_lag_segments", "delete_lag_bytes", "delete_lag_segments",
                 "log_size_bytes", "metadata_count", "size_computation_time_ms")

    def __init__(self) -> None:
        self.copy_lag_bytes = 0  # RemoteCopyLagBytes: bytes of the closed local segments not copied yet
        self.copy_lag_segments = 0  # RemoteCopyLagSegments
        self.delete_lag_bytes = 0  # RemoteDeleteLagBytes: bytes of remote segments being deleted
        self.delete_lag_segments = 0  # RemoteDeleteLagSegments
        self.log_size_bytes = 0  # RemoteLogSizeBytes: bytes of the remote segments listed
        self.metadata_count = 0  # RemoteLogMetadataCount: remote segments listed (any state but deleted)
        self.size_computation_time_ms = 0  # RemoteLogSizeComputationTime

    def add(self, other: RemoteLogGauges) -> None:
        for k in RemoteLogGauges.__slots__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


class BrokerTopicStats:
    """The topic counters of one broker. ``topic`` belongs to the event loop; worker threads (the remote log
    manager's readers) count in their own counters, :meth:`for_thread`, each written by that thread only,
    so no update takes a lock or can be lost between two threads; a scrape adds them up
    (:meth:`merged_topics`)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.removed = TopicCounters()  # what deleted topics counted (the all-topics sums keep it)
        # per topic, per partition: the remote storage gauges (event loop only)
        self.remote: dict[str, dict[int, RemoteLogGauges]] = {}
        self._local = threading.local()
        self._threads: list[dict[str, TopicCounters]] = []  # each worker thread's own counters
        self._threads_lock = threading.Lock()  # taken once per thread, when it first counts

    def topic(self, name: str) -> TopicCounters:
        c = self.topics.get(name)
        if c is None:
            c = self.topics[name] = TopicCounters()
        return c

    def for_thread(self, name: str) -> TopicCounters:
        """Topic ``name``'s counters that only the calling thread writes (a worker thread's)."""
        mine: dict[str, TopicCounters] | None = getattr(self._local, "topics", None)
        if mine is None:
            mine = self._local.topics = {}
            with self._threads_lock:
                self._threads.append(mine)
        c = mine.get(name)
        if c is None:
            c = mine[name] = TopicCounters()
        return c

    def remote_partition(self, topic: str, partition: int) -> RemoteLogGauges:
        parts = self.remote.get(topic)
        if parts is None:
            parts = self.remote[topic] = {}
        g = parts.get(partition)
        if g is None:
            g = parts[partition] = RemoteLogGauges()
        return g

    def remove_remote_partition(self, topic: str, partition: int) -> None:
        """A partition no longer led here (Kafka resets its copy lag and drops its gauges)."""
        parts = self.remote.get(topic)
        if parts is not None:
            parts.pop(partition, None)

    def remote_topic(self, name: str) -> RemoteLogGauges:
        total = RemoteLogGauges()
        for g in list(self.remote.get(name, {}).values()):
            total.add(g)
        return total

    def remove(self, name: str) -> None:
        """A deleted topic's metrics go (Kafka's BrokerTopicStats.removeMetrics); the all-topics sums keep them."""
        self.remote.pop(name, None)
        gone = [self.topics.pop(name, None)]
        with self._threads_lock:
            threads = list(self._threads)
        gone += [mine.pop(name, None) for mine in threads]
        for c in gone:
            if c is not None:
                self.removed.add(c)

    def merged_topics(self) -> dict[str, TopicCounters]:
        """Per topic, the event loop's counters plus the worker threads' (the loop's own objects when no
        worker thread counted)."""
        with self._threads_lock:
            threads = [mine.copy() for mine in self._threads]  # a dict copy is atomic: no size change under us
        if not any(threads):
            return self.topics
        out: dict[str, TopicCounters] = {}
        for source in [self.topics.copy(), *threads]:
            for name, c in source.items():
                m = out.get(name)
                if m is None:
                    m = out[name] = TopicCounters()
                m.add(c)
        return out

    def all_topics(self) -> TopicCounters:
        total = TopicCounters()
        for c in [*self.merged_topics().values(), self.removed]:
            total.add(c)
        return total

    def all_remote(self) -> RemoteLogGauges:
        total = RemoteLogGauges()
        for name in list(self.remote):
            total.add(self.remote_topic(name))
        return total


class WorkerPoolStats:
    """Kafka's RemoteStorageThreadPool gauges of a pool of worker threads: TaskQueueSize (tasks waiting for a
    thread, from ``queued``: the pool's queue, where a cancelled task stays until a thread takes it, as in
    Java's) and AvgIdlePercent (1 - busy threads / threads). Each worker counts the tasks it started and
    finished in its own slot: no lock on the way, none lost between threads."""

    def __init__(self, threads: int, queued: Callable[[], int] = lambda: 0) -> None:
        self.threads = max(threads, 1)
        self.queued = queued
        self._local = threading.local()
        self._slots: list[list[int]] = []  # per worker thread: [started, finished]
        self._lock = threading.Lock()  # taken once per thread, when it first runs a task

    def _slot(self) -> list[int]:
        slot: list[int] | None = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = [0, 0]
            with self._lock:
                self._slots.append(slot)
        return slot

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` counted as busy while a worker runs it."""

        def run(*args: Any) -> T:
            slot = self._slot()
            slot[0] += 1
            try:
                return fn(*args)
            finally:
                slot[1] += 1

        return run

    def busy(self) -> int:
        with self._lock:
            slots = [(s[0], s[1]) for s in self._slots]
        return max(sum(s[0] - s[1] for s in slots), 0)

    def queue_size(self) -> int:
        return self.queued()

    def idle_ratio(self) -> float:
        return 1.0 - min(self.busy(), self.threads) / self.threads


def executor_queue(executor: Any) -> Callable[[], int]:
    """The number of tasks waiting in a ThreadPoolExecutor's queue (its ``_work_queue``; 0 if it has none)."""
    queue = getattr(executor, "_work_queue", None)
    return queue.qsize if queue is not None else lambda: 0


def bucket_of(us: int) -> int:
    """Bucket index of a duration in microseconds (log scale, ``_SUB`` buckets per octave)."""
    if us < _SUB * 2:
        return max(us, 0)
    b = us.bit_length()
    i = b * _SUB + ((us >> (b - 3)) & 3) - 2 * _SUB
    return i if i < _NBUCKETS else _NBUCKETS - 1


def bucket_upper_us(i: int) -> float:
    """The largest duration (µs) bucket ``i`` holds."""
    if i < _SUB * 2:
        return float(i)
    b = (i + 2 * _SUB) // _SUB
    frac = (i + 2 * _SUB) % _SUB
    return float((1 << (b - 1)) + (frac + 1) * (1 << (b - 3)) - 1)


_TABLE_US = 1 << 14  # bucket_of for durations below 16 ms, precomputed (most phases of most requests)
_TABLE = [bucket_of(us) for us in range(_TABLE_US)]


class LatencyHistogram:
    """Durations in log-scale buckets: percentiles within 25 % (a bucket's width), for the requests
    of the current and the previous window (:meth:`rotate` is called every ``WINDOW_S``; Kafka's
    histograms are biased to the last five minutes the same way)."""

    __slots__ = ("current", "previous")

    def __init__(self) -> None:
        self.current = [0] * _NBUCKETS
        self.previous = [0] * _NBUCKETS

    def rotate(self) -> None:
        self.previous = self.current
        self.current = [0] * _NBUCKETS

    def percentiles_ms(self) -> list[tuple[str, float]]:
        merged = [a + b for a, b in zip(self.current, self.previous, strict=True)]
        n = sum(merged)
        out: list[tuple[str, float]] = []
        for q, label in QUANTILES:
            if n == 0:
                out.append((label, 0.0))
                continue
            rank = q * n
            seen = 0
            value = 0.0
            for i, c in enumerate(merged):
                seen += c
                if c and seen >= rank:
                    value = bucket_upper_us(i) / 1000.0
                    break
            out.append((label, value))
        return out


class RequestStats:
    """RequestMetrics of one broker. ``record`` is called once per answered request with the
    phase boundaries as perf_counter_ns values."""

    WINDOW_S = 60.0

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}  # (key << 8 | version) -> count; key: api key or FETCH_*
        # key -> six histograms in PHASES order
        self.latency: dict[int, tuple[LatencyHistogram, ...]] = {}
        self.measured: dict[int, int] = {}  # key -> requests measured (each phase's Count)
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> occurrences (ErrorsPerSec)

    def record_errors(self, api_key: int, counts: dict[int, int]) -> None:
        """Kafka's RequestChannel.updateErrorMetrics: each error code a response carries, NONE included."""
        errors = self.errors
        for code, n in counts.items():
            k = (api_key, code)
            errors[k] = errors.get(k, 0) + n

    def record(self, key: int, version: int, received: int, started: int, local_done: int, completed: int,
               queued: int, sent: int) -> None:
        rv = key << 8 | version
        requests = self.requests
        requests[rv] = requests.get(rv, 0) + 1
        hs = self.latency.get(key)
        if hs is None:
            hs = self.latency[key] = tuple(LatencyHistogram() for _ in PHASES)
            self.measured[key] = 0
        self.measured[key] += 1
        table = _TABLE
        # unrolled over the six phases: this runs once per request
        us = (started - received) // 1000
        hs[0].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1
        us = (local_done - started) // 1000
        hs[1].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1
        us = (completed - local_done) // 1000
        hs[2].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1
        us = (queued - completed) // 1000
        hs[3].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1
        us = (sent - queued) // 1000
        hs[4].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1
        us = (sent - received) // 1000
        hs[5].current[table[us] if 0 <= us < _TABLE_US else bucket_of(us)] += 1

    def rotate(self) -> None:
        for hs in self.latency.values():
            for h in hs:
                h.rotate()
