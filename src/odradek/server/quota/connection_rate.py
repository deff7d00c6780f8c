"""Connection creation rate quotas (KIP-612) as Kafka's ConnectionQuotas applies them — pure,
the clock passed in.

- Broker-wide, ``max.connection.creation.rate`` (connections/s, default Int.MaxValue: none): each
  accepted connection is recorded; over the rate the acceptor holds the new connection (and
  accepts nothing else) for the throttle time before it is served. The inter-broker listener is
  exempt when the broker has other listeners (Kafka's protectedListener).
- Per listener, ``listener.name.<listener>.max.connection.creation.rate``: the same, for that
  listener's connections (the inter-broker listener included); the longer hold of the two applies.
- Per address, the ``connection_creation_rate`` quota of an ``ip`` entity or of the default ip
  entity (``odradek configs --entity-type ips``): a connection over the address's rate is not
  counted and is closed once the throttle time has passed (Kafka's ConnectionThrottledException
  and DelayedCloseSocket), so the client does not reconnect at once.

Rates are Kafka's sampled ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds``; the throttle time is QuotaUtils.boundedThrottleTime, at most one
window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from odradek.server.quota.rate import SampledRate

INT_MAX = 2**31 - 1


class ConnectionRateQuotas:
    def __init__(self, broker_rate: Callable[[], int], ip_rates: Callable[[], Mapping[str | None, float]],
                 samples: int = 11, window_s: int = 1) -> None:
        self.broker_rate = broker_rate  # max.connection.creation.rate, read at each connection
        self.ip_rates = ip_rates  # address (None: the default entity) -> connection_creation_rate
        self.samples = samples
        self.window_ms = window_s * 1000
        self._broker = SampledRate(samples, self.window_ms)
        self._listeners: dict[str, SampledRate] = {}
        self._ips: dict[str, tuple[float, SampledRate]] = {}

    def _throttle_ms(self, rate: SampledRate, bound: float, now_ms: int) -> int:
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            return self.window_ms
        return min(round((measured - bound) / bound * rate.window_size_ms(now_ms)), self.window_ms)

    def record_broker(self, now_ms: int) -> int:
        """Record a new connection against the broker-wide rate; the ms to hold it (0: none)."""
        bound = self.broker_rate()
        if bound >= INT_MAX:
            return 0
        self._broker.record(1.0, now_ms)
        return self._throttle_ms(self._broker, float(bound), now_ms)

    def record_listener(self, listener: str, bound: int, now_ms: int) -> int:
        """Record a new connection on ``listener`` against its own rate ``bound``; the ms to hold it."""
        if bound >= INT_MAX:
            return 0
        rate = self._listeners.get(listener)
        if rate is None:
            rate = self._listeners[listener] = SampledRate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        return self._throttle_ms(rate, float(bound), now_ms)

    def ip_quota(self, ip: str) -> float | None:
        rates = self.ip_rates()
        if not rates:
            return None
        bound = rates.get(ip, rates.get(None))
        return None if bound is None or bound >= INT_MAX else bound

    def record_ip(self, ip: str, now_ms: int) -> int:
        """Record a new connection from ``ip``; over its quota the connection is taken back out
        of the rate and the ms after which it is closed are returned (0: accepted)."""
        bound = self.ip_quota(ip)
        if bound is None:
            if ip in self._ips:
                del self._ips[ip]
            return 0
        held = self._ips.get(ip)
        if held is None or held[0] != bound:
            if len(self._ips) > 100_000:
                self._ips.clear()
            held = self._ips[ip] = (bound, SampledRate(self.samples, self.window_ms))
        rate = held[1]
        rate.record(1.0, now_ms)
        throttle = self._throttle_ms(rate, bound, now_ms)
        if throttle > 0:
            rate.record(-1.0, now_ms)  # not accepted: not counted
        return throttle
