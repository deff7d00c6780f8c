"""Sampled rates and token buckets as Kafka's metrics measure quotas — pure, clock passed in.

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledTotal``: ``samples`` windows
(``quota.window.num``, default 11) of ``window_ms`` each (``quota.window.size.seconds``, default
1 s). A value is added to the current sample; a sample is complete once ``window_ms`` passed
since it started, and the next one reuses the oldest slot. Samples older than
``samples * window_ms`` are reset before measuring. The rate is the sum of the samples over the
window size, which is the time since the oldest sample started, stretched to at least
``samples - 1`` full windows (so a new client is not measured over a few milliseconds), and at
least 1 ms (Kafka's ``Rate.windowSize``).

:class:`TokenBucket` is Kafka's ``TokenBucket`` stat (KIP-599, controller mutations): tokens
refill at ``quota`` per second up to a burst of ``quota * samples * window_s``; a record takes
tokens and may leave them negative.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0


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
