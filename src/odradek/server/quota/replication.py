"""Replication quotas (KIP-73) as Kafka's ReplicationQuotaManager — pure, the clock passed in.

A replication quota bounds the bytes per second replication of *throttled* replicas may move:

- which replicas are throttled is a topic config, ``leader.replication.throttled.replicas`` on the
  sending side and ``follower.replication.throttled.replicas`` on the fetching side: ``*`` (every
  partition of the topic) or ``partition:broker`` pairs; a broker throttles the partitions listed
  with its own id (Kafka's TopicConfigHandler.parseThrottledPartitions);
- the bound is the broker's dynamic ``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` (unbounded by default);
- the rate is Kafka's sampled ``Rate`` over ``replication.quota.window.num`` samples of
  ``replication.quota.window.size.seconds`` (:class:`odradek.server.quota.rate.SampledRate`).

Leader side (Kafka's ReplicaManager.shouldLeaderThrottle): a follower fetch of a throttled
partition by a follower *outside the ISR* gets no records while the measured rate exceeds the
bound (its fetch state still moves); the bytes sent for every throttled partition (in the ISR or
not) are recorded once the response is built (KafkaApis.sizeOfThrottledPartitions). A follower
in the ISR is never held back, so throttling a reassignment cannot shrink the ISR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from odradek.server.quota.rate import SampledRate

ALL = "*"
TP = tuple[str, int]


def parse_throttled(listed: Sequence[str] | str, broker_id: int) -> frozenset[int] | str:
    """The partitions a broker throttles under a ``*.replication.throttled.replicas`` value:
    :data:`ALL` or the partitions listed with ``broker_id``."""
    items = [x.strip() for x in (listed.split(",") if isinstance(listed, str) else listed) if x.strip()]
    if ALL in items:
        return ALL
    out = set()
    for item in items:
        p, sep, b = item.partition(":")
        if sep and p.strip().isdigit() and b.strip().isdigit() and int(b) == broker_id:
            out.add(int(p))
    return frozenset(out)


class ReplicationQuotaManager:
    """One side's (leader or follower) throttled partitions, bound and measured rate."""

    def __init__(self, broker_id: int, bound: Callable[[], int], throttled_config: Callable[[str], str],
                 now_ms: Callable[[], int], samples: int = 11, window_s: int = 1) -> None:
        self.broker_id = broker_id
        self.bound = bound  # bytes/s, read at each check (a dynamic broker config)
        self.throttled_config = throttled_config  # topic -> its *.replication.throttled.replicas text
        self.now_ms = now_ms
        self.rate = SampledRate(samples, window_s * 1000)
        self._parsed: dict[str, tuple[str, frozenset[int] | str]] = {}

    def is_throttled(self, tp: TP) -> bool:
        raw = self.throttled_config(tp[0])
        if not raw:
            return False
        hit = self._parsed.get(tp[0])
        if hit is None or hit[0] != raw:
            if len(self._parsed) > 100_000:
                self._parsed.clear()
            hit = self._parsed[tp[0]] = (raw, parse_throttled(raw, self.broker_id))
        parts = hit[1]
        return parts == ALL or tp[1] in parts

    def is_quota_exceeded(self) -> bool:
        """Kafka's isQuotaExceeded: the measured rate is above the bound."""
        return self.rate.measure(self.now_ms()) > self.bound()

    def record(self, value: int) -> None:
        if value > 0:
            self.rate.record(float(value), self.now_ms())

    def measured(self) -> float:
        """Bytes/s over the sampled window (Kafka's byte-rate metric of the quota)."""
        return self.rate.measure(self.now_ms())
