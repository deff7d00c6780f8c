"""The counters the broker keeps on its hot paths: plain ints in plain objects, read at scrape time.

Nothing here calls prometheus_client; :mod:`odradek.metrics.collector` turns these into Kafka's
metric names when ``/metrics`` is scraped. Each object belongs to the event loop that updates it
(the scrape runs on that loop too), so no locks.

* :class:`BrokerTopicStats` — Kafka's BrokerTopicMetrics per topic: MessagesIn, BytesIn, BytesOut,
  ReplicationBytesIn, ReplicationBytesOut, TotalProduceRequests, FailedProduceRequests, TotalFetchRequests,
  FailedFetchRequests (counted per partition, as Kafka's ReplicaManager marks them). The all-topics
  values are the sums, made at scrape time.
* :class:`RequestStats` — Kafka's RequestMetrics: requests per (request, version) and the
  latency of each phase of a request (RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs,
  ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs) per request name, measured by the
  connection (server.connection), and ErrorsPerSec: the error codes of the responses per request
  (api key; a Fetch is one request here, as in Kafka). Latencies go into :class:`LatencyHistogram`
  buckets.
"""

from __future__ import annotations

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
                 "failed_produce", "total_fetch", "failed_fetch")

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


class BrokerTopicStats:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.removed = TopicCounters()  # what deleted topics counted (the all-topics sums keep it)

    def topic(self, name: str) -> TopicCounters:
        c = self.topics.get(name)
        if c is None:
            c = self.topics[name] = TopicCounters()
        return c

    def remove(self, name: str) -> None:
        """A deleted topic's metrics go (Kafka's BrokerTopicStats.removeMetrics); the all-topics sums keep them."""
        c = self.topics.pop(name, None)
        if c is not None:
            for k in TopicCounters.__slots__:
                setattr(self.removed, k, getattr(self.removed, k) + getattr(c, k))

    def all_topics(self) -> TopicCounters:
        total = TopicCounters()
        for c in [*self.topics.values(), self.removed]:
            for k in TopicCounters.__slots__:
                setattr(total, k, getattr(total, k) + getattr(c, k))
        return total


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
