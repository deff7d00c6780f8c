"""The remote log manager's copy and fetch quotas (KIP-956) as Kafka's RLMQuotaManager — pure but for a lock,
the clock passed in.

A quota bounds the bytes per second the broker as a whole copies to the remote store
(``remote.log.manager.copy.max.bytes.per.second``) or reads from it for consumers
(``remote.log.manager.fetch.max.bytes.per.second``); both default to Long.MAX_VALUE (no bound) and are dynamic
(cluster-wide or per broker, Kafka's DynamicRemoteLogConfig): the bound is read at each check. The rate is
Kafka's ``SimpleRate`` (:class:`odradek.server.quota.rate.SimpleRate`) over ``*.quota.window.num`` samples of
``*.quota.window.size.seconds`` (read-only).

:meth:`RLMQuotaManager.throttle_time_ms` is Kafka's ``getThrottleTimeMs``: 0 while the measured rate is within the
bound, else ``(rate - bound) / bound * window`` ms (Kafka's QuotaUtils.throttleTime). The callers (Kafka's):

- the copy task checks it before each segment copy and waits while it is positive, then records the segment's
  ``.log`` size (RLMCopyTask.copyLogSegmentsToRemote) — the wait comes before the copy, the bytes count as the
  copy starts;
- a consumer fetch below a tiered partition's local log start is not started while it is positive: the partition
  is answered with no records and no error, so the client fetches again (ReplicaManager.handleOffsetOutOfRangeError);
  a remote read's bytes are recorded when it ends (RemoteLogReader).

Each time a check finds the quota exceeded, the throttle time goes to the manager's throttle-time sensor
(:class:`ThrottleTimeSensor`, Kafka's RLMQuotaMetrics ``remote-copy-throttle-time`` / ``remote-fetch-throttle-time``:
avg and max over the broker's ``metrics.num.samples`` windows of ``metrics.sample.window.ms``).

The copy side is used on the event loop; the fetch side records on the remote reader threads and is checked on
the loop, so every call takes the manager's lock (Kafka's RLMQuotaManager holds a read-write lock too).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from odradek.server.quota.rate import SampledAvgMax, SimpleRate


class RLMQuotaManager:
    """One quota (copy or fetch): its bound, read at each check, and its measured rate."""

    def __init__(self, bound: Callable[[], int], now_ms: Callable[[], int], samples: int = 11,
                 window_s: int = 1) -> None:
        self.bound = bound  # bytes/s (a dynamic broker config)
        self.now_ms = now_ms
        self.rate = SimpleRate(samples, window_s * 1000)
        self._lock = threading.Lock()

    def throttle_time_ms(self) -> int:
        """Kafka's getThrottleTimeMs: how long until the measured rate is back within the bound (0: it is)."""
        bound = self.bound()
        now = self.now_ms()
        with self._lock:
            rate = self.rate.measure(now)
            if rate <= bound:
                return 0
            window = self.rate.window_size_ms(now)
        return round((rate - bound) / bound * window) if bound > 0 else window

    def record(self, value: int) -> None:
        if value > 0:
            now = self.now_ms()
            with self._lock:
                self.rate.record(float(value), now)

    def measured(self) -> float:
        """Bytes/s over the sampled window (Kafka's ``byte-rate`` metric of the quota sensor)."""
        now = self.now_ms()
        with self._lock:
            return self.rate.measure(now)


class ThrottleTimeSensor:
    """Kafka's RLMQuotaMetrics: the throttle times (ms) the checks found, their average and maximum."""

    def __init__(self, now_ms: Callable[[], int], samples: int = 2, window_ms: int = 30_000) -> None:
        self.now_ms = now_ms
        self._stat = SampledAvgMax(samples, window_ms)
        self._lock = threading.Lock()
        self.count = 0  # throttle times recorded since the start

    def record(self, throttle_ms: int) -> None:
        now = self.now_ms()
        with self._lock:
            self._stat.record(float(throttle_ms), now)
            self.count += 1

    def avg(self) -> float:
        now = self.now_ms()
        with self._lock:
            return self._stat.avg(now)

    def max(self) -> float:
        now = self.now_ms()
        with self._lock:
            return self._stat.max(now)
