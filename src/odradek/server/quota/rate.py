"""Sampled rates and token buckets as Kafka's metrics measure quotas — pure, clock passed in.

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledTotal``: ``samples`` windows
(``quota.window.num``, default 11) of ``window_ms`` each (``quota.window.size.seconds``, default
1 s). A value is added to the current sample; a sample is complete once ``window_ms`` passed
since it started, and the next one reuses the oldest slot. Samples older than
``samples * window_ms`` are reset before measuring. The rate is the sum of the samples over the
window size, which is the time since the oldest sample started, stretched to at least
``samples - 1`` full windows (so a new client is not measured over a few milliseconds), and at
least 1 ms (Kafka's ``Rate.windowSize``).

:class:`SimpleRate` is Kafka's ``SimpleRate``, the rate of the remote log manager's quotas (KIP-956,
``RLMQuotaManager``): the same samples, measured over the time since the oldest sample started, at
least one window (no stretching to ``samples - 1`` windows: the first segment copied counts in full).

:class:`SampledAvgMax` is a sensor with Kafka's ``Avg`` and ``Max`` stats over the same kind of
samples (NaN while no sample holds a value, as Kafka's), e.g. the remote log manager's
``remote-copy-throttle-time-avg`` / ``-max``.

:class:`TokenBucket` is Kafka's ``TokenBucket`` stat (KIP-599, controller mutations): tokens
refill at ``quota`` per second up to a burst of ``quota * samples * window_s``; a record takes
tokens and may leave them negative.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0  # the sum of the values recorded in it
    count: int = 0  # how many were recorded
    max: float = 0.0  # the largest (meaningful when count > 0)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0
        self.count = 0
        self.max = 0.0


class SampledRate:
    """Units per second over the sampled window (Kafka's Rate with a SampledTotal)."""

    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a sampled rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
            self._current = 0
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            s = _Sample(now_ms)
            self._samples.append(s)
            return s
        s = self._samples[self._current]
        s.reset(now_ms)
        return s

    def record(self, value: float, now_ms: int) -> None:
        s = self._current_sample(now_ms)
        if now_ms - s.start_ms >= self.window_ms:
            s = self._advance(now_ms)
        s.value += value
        s.max = value if s.count == 0 else max(s.max, value)
        s.count += 1

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.start_ms >= expire_age:
                s.reset(now_ms)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: purge, then the time since the oldest sample started,
        stretched to ``samples - 1`` full windows, at least 1 ms."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate in units per second."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


class SimpleRate(SampledRate):
    """Kafka's SimpleRate: the window is the time since the oldest sample started, at least one window."""

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(now_ms - oldest, self.window_ms)


class SampledAvgMax:
    """Kafka's Avg and Max stats of one sensor over ``samples`` windows of ``window_ms``: the average
    and the largest of the values recorded in the samples not expired; NaN when none holds one."""

    __slots__ = ("_stat",)

    def __init__(self, samples: int = 2, window_ms: int = 30_000) -> None:
        self._stat = SampledRate(samples, window_ms)

    def record(self, value: float, now_ms: int) -> None:
        self._stat.record(value, now_ms)

    def _live(self, now_ms: int) -> list[_Sample]:
        stat = self._stat
        stat._purge(now_ms)
        return [s for s in stat._samples if s.count]

    def avg(self, now_ms: int) -> float:
        live = self._live(now_ms)
        n = sum(s.count for s in live)
        return sum(s.value for s in live) / n if n else float("nan")

    def max(self, now_ms: int) -> float:
        live = self._live(now_ms)
        return max(s.max for s in live) if live else float("nan")


class TokenBucket:
    """Kafka's TokenBucket stat: ``measure`` is the tokens left (negative when overdrawn)."""

    __slots__ = ("quota", "burst", "tokens", "last_ms")

    def __init__(self, quota: float, samples: int = 11, window_ms: int = 1000, now_ms: int = 0) -> None:
        self.quota = quota
        self.burst = quota * samples * window_ms / 1000.0
        self.tokens = self.burst
        self.last_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        elapsed_s = max(now_ms - self.last_ms, 0) / 1000.0
        self.tokens = min(self.burst, self.tokens + self.quota * elapsed_s)
        self.last_ms = max(now_ms, self.last_ms)

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= value

    def measure(self, now_ms: int) -> float:
        self._refill(now_ms)
        return self.tokens

    def throttle_time_ms(self, now_ms: int) -> int:
        """Kafka's ControllerMutationQuotaManager.throttleTime: the time to earn back a deficit."""
        tokens = self.measure(now_ms)
        if tokens >= 0 or self.quota <= 0:
            return 0
        return round(-tokens / self.quota * 1000)
