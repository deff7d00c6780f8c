"""Share groups' broker metrics (KIP-932, KIP-1103): the counters the share-partition manager and the share
coordinator keep, read by the collector (odradek.metrics.collector) when ``/metrics`` is scraped.

* :class:`ShareGroupStats` — owned by the share-partition manager (server.share_manager), as Kafka's
  SharePartitionManager owns its ShareGroupMetrics and marks the share meters of BrokerTopicStats:
  TotalShareFetchRequestsPerSec / FailedShareFetchRequestsPerSec per topic (once per topic of a ShareFetch's
  session partitions; failed once per topic with a partition answered with an error),
  TotalShareAcknowledgementRequestsPerSec / FailedShareAcknowledgementRequestsPerSec per topic (once per topic of
  an acknowledgement, a ShareAcknowledge or the acknowledgements a ShareFetch carries; failed once per topic with
  a partition that failed), RecordAcknowledgementsPerSec per ackType (records whose acknowledgement was applied:
  a batch with one type counts its whole offset range, one with a type per offset counts each offset but the
  gaps) and PartitionLoadTimeMs (a share-partition initialized from its persisted state).
* :class:`LoadTimes` — durations in ms: count, average and maximum since the start, and the percentiles of the
  recent ones (:class:`~odradek.metrics.stats.LatencyHistogram`); also the share coordinator's
  partition-load-time (loading a ``__share_group_state`` partition).

Everything runs on the broker's event loop: plain int additions, no locks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

from odradek.metrics.stats import LatencyHistogram, bucket_of

# Kafka's AcknowledgeType ids and the ackType tag ShareGroupMetrics gives them (capitalized); 0 (a gap) is none
ACK_TYPES: dict[int, str] = {1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}


class AckBatch(Protocol):
    """What is read of an AcknowledgementBatch (coordinator.share.share_partition.AcknowledgementBatch)."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def acknowledge_types(self) -> tuple[int, ...]: ...


class LoadTimes:
    """Durations in milliseconds: Kafka's Avg and Max (here over all the loads since the start; NaN before the
    first, as Kafka's stats without a sample) and the percentiles of a Yammer histogram (recent loads)."""

    __slots__ = ("count", "sum_ms", "max_ms", "histogram")

    def __init__(self) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self.max_ms = math.nan
        self.histogram = LatencyHistogram()  # µs buckets

    def record(self, ms: float) -> None:
        ms = max(float(ms), 0.0)
        self.count += 1
        self.sum_ms += ms
        self.max_ms = ms if math.isnan(self.max_ms) else max(self.max_ms, ms)
        self.histogram.current[bucket_of(int(ms * 1000))] += 1

    @property
    def avg_ms(self) -> float:
        return self.sum_ms / self.count if self.count else math.nan

    def rotate(self) -> None:
        self.histogram.rotate()


def _add(counts: dict[str, int], topics: Iterable[str]) -> None:
    for t in topics:
        counts[t] = counts.get(t, 0) + 1


class ShareGroupStats:
    """The share-partition manager's counters (see the module docstring)."""

    def __init__(self) -> None:
        self.ack_requests: dict[str, int] = {}  # topic -> TotalShareAcknowledgementRequestsPerSec's count
        self.failed_ack_requests: dict[str, int] = {}  # topic -> FailedShareAcknowledgementRequestsPerSec's
        self.removed_ack_requests = 0  # what deleted topics counted (the all-topics sums keep it)
        self.removed_failed_ack_requests = 0
        self.fetch_requests: dict[str, int] = {}  # topic -> TotalShareFetchRequestsPerSec's count
        self.failed_fetch_requests: dict[str, int] = {}  # topic -> FailedShareFetchRequestsPerSec's
        self.removed_fetch_requests = 0
        self.removed_failed_fetch_requests = 0
        self.record_acks: dict[str, int] = dict.fromkeys(ACK_TYPES.values(), 0)  # ackType -> records
        self.partition_load = LoadTimes()  # PartitionLoadTimeMs

    def acknowledgement(self, topics: Iterable[str], failed: Iterable[str]) -> None:
        """One acknowledgement (a ShareAcknowledge, or those of a ShareFetch) for each of ``topics`` (distinct),
        failed for each of ``failed`` (distinct)."""
        _add(self.ack_requests, topics)
        _add(self.failed_ack_requests, failed)

    def share_fetch(self, topics: Iterable[str], failed: Iterable[str]) -> None:
        """One ShareFetch reading ``topics`` (distinct), failed for each of ``failed`` (distinct)."""
        _add(self.fetch_requests, topics)
        _add(self.failed_fetch_requests, failed)

    def records_acknowledged(self, batches: Iterable[AckBatch]) -> None:
        """The acknowledgement batches of a share-partition, applied (Kafka counts them once they are)."""
        counts = self.record_acks
        for b in batches:
            types = b.acknowledge_types
            if len(types) == 1:
                name = ACK_TYPES.get(types[0])
                if name is not None:
                    counts[name] += b.last_offset - b.first_offset + 1
                continue
            for t in types:
                name = ACK_TYPES.get(t)
                if name is not None:
                    counts[name] += 1

    def partition_loaded(self, ms: float) -> None:
        self.partition_load.record(ms)

    def remove_topic(self, topic: str) -> None:
        """A deleted topic's series go (Kafka's BrokerTopicStats.removeMetrics); the all-topics sums keep them."""
        self.removed_ack_requests += self.ack_requests.pop(topic, 0)
        self.removed_failed_ack_requests += self.failed_ack_requests.pop(topic, 0)
        self.removed_fetch_requests += self.fetch_requests.pop(topic, 0)
        self.removed_failed_fetch_requests += self.failed_fetch_requests.pop(topic, 0)

    def all_ack_requests(self) -> int:
        return sum(self.ack_requests.values()) + self.removed_ack_requests

    def all_failed_ack_requests(self) -> int:
        return sum(self.failed_ack_requests.values()) + self.removed_failed_ack_requests

    def all_fetch_requests(self) -> int:
        return sum(self.fetch_requests.values()) + self.removed_fetch_requests

    def all_failed_fetch_requests(self) -> int:
        return sum(self.failed_fetch_requests.values()) + self.removed_failed_fetch_requests
