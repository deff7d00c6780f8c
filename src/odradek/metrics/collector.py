"""``/metrics``: the broker's counters and gauges under the names Strimzi's JMX-exporter rules
(examples/metrics/kafka-metrics.yaml, ``lowercaseOutputName: true``) give Kafka's MBeans, so
dashboards made for a Kafka broker read an Odradek broker unchanged. docs/metrics.md lists them.

Everything is read when Prometheus scrapes (a prometheus_client custom Collector): the hot paths
only increment ints in the broker's own objects (odradek.metrics.stats, ReplicaManager's ISR
counters, ClientQuotaManager's throttle times). The scrape runs on the broker's event loop, so it
reads a consistent state; with 10,000 partitions it is a few tens of milliseconds.

MBean -> name (Strimzi's generic rules):

* ``kafka.server<type=BrokerTopicMetrics, name=XPerSec, topic=T><>Count`` ->
  ``kafka_server_brokertopicmetrics_x_total{topic="T"}`` (no label: all topics)
* ``kafka.network<type=RequestMetrics, name=RequestsPerSec, request=R, version=V><>Count`` ->
  ``kafka_network_requestmetrics_requests_total{request="R",version="V"}``
* ``kafka.network<type=RequestMetrics, name=ErrorsPerSec, request=R, error=E><>Count`` ->
  ``kafka_network_requestmetrics_errors_total{request="R",error="E"}`` (E: Kafka's Errors name, NONE included)
* ``kafka.network<type=RequestMetrics, name=TotalTimeMs, request=R><>99thPercentile`` ->
  ``kafka_network_requestmetrics_totaltimems{request="R",quantile="0.99"}``, ``..._count``
* ``kafka.server<type=ReplicaManager, name=X><>Value`` -> ``kafka_server_replicamanager_x``
* ``kafka.controller<type=KafkaController, name=X><>Value`` -> ``kafka_controller_kafkacontroller_x``
* ``kafka.log<type=Log, name=Size, topic=T, partition=P><>Value`` -> ``kafka_log_log_size{topic,partition}``
* tiered storage (KIP-405, KIP-963; only with remote.log.storage.system.enable, as Kafka registers them):
  ``kafka.server<type=BrokerTopicMetrics, name=RemoteCopyBytesPerSec, topic=T><>Count`` ->
  ``kafka_server_brokertopicmetrics_remotecopybytes_total{topic="T"}`` and the other meters;
  ``kafka.server<type=BrokerTopicMetrics, name=RemoteCopyLagBytes, topic=T><>Value`` ->
  ``kafka_server_brokertopicmetrics_remotecopylagbytes{topic="T"}`` and the other gauges (no label: all topics);
  ``kafka.log.remote<type=RemoteStorageThreadPool, name=N><>Value`` ->
  ``kafka_log_remote_remotestoragethreadpool_n`` (Strimzi's generic rules match a one-word domain after
  ``kafka.``: a rule for ``kafka.log.remote`` in the same form gives these names);
  Kafka's own metrics of the copy and fetch quotas (KIP-956, RLMQuotaMetrics, no ``name=`` key), under the JMX
  exporter's default naming: ``kafka.server<type=RemoteLogManager><>remote-copy-throttle-time-avg`` ->
  ``kafka_server_remotelogmanager_remote_copy_throttle_time_avg`` (and ``-max``, and the fetch pair); the quota
  sensors ``kafka.server<type=RLMCopy|RLMFetch><>byte-rate`` -> ``kafka_server_rlmcopy_byte_rate``, ``..._rlmfetch_...``
* share groups (KIP-932, KIP-1103): ``kafka.server<type=BrokerTopicMetrics,
  name=TotalShareAcknowledgementRequestsPerSec, topic=T><>Count`` ->
  ``kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total{topic="T"}`` (and Failed..., and
  the ShareFetch pair);
  ``kafka.server<type=ShareGroupMetrics, name=RecordAcknowledgementsPerSec, ackType=A><>Count`` ->
  ``kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="A"}``; the histogram
  ``kafka.server<type=ShareGroupMetrics, name=PartitionLoadTimeMs>`` as the request latencies, with its Mean and
  Max as ``..._mean``, ``..._max``; Kafka's own metrics (no ``name=`` key) under the JMX exporter's default
  naming, as ``socket-server-metrics`` above: ``kafka.server<type=group-coordinator-metrics, state=S><>share-group-count``
  -> ``kafka_server_group_coordinator_metrics_share_group_count{state="S"}``,
  ``kafka.server<type=share-coordinator-metrics><>partition-load-time-avg`` ->
  ``kafka_server_share_coordinator_metrics_partition_load_time_avg``
* quota sensors ``kafka.server<type=Produce|Fetch|Request, user=U, client-id=C><>throttle-time`` ->
  ``kafka_server_quota_throttle_time{resource,user,clientId}`` (the jmx-exporter quota rule)
* consumer group lag: Kafka has no broker MBean for it; the names are kafka_exporter's (which
  Strimzi deploys for lag): ``kafka_consumergroup_lag{consumergroup,topic,partition}`` = high
  watermark - committed offset, ``kafka_consumergroup_current_offset``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from odradek.metrics.share_stats import ACK_TYPES, LoadTimes, ShareGroupStats
from odradek.metrics.stats import (
    FETCH_CONSUMER,
    FETCH_FOLLOWER,
    PHASES,
    BrokerTopicStats,
    RequestStats,
    WorkerPoolStats,
)
from odradek.protocol import errors as _errors

# Kafka's Errors enum names by code (odradek.protocol.errors holds them as module constants)
_ERROR_NAMES: dict[int, str] = {v: k for k, v in vars(_errors).items() if k.isupper() and isinstance(v, int)}

_TOPIC_METRICS = (  # (Kafka's BrokerTopicMetrics name, lower-cased as Strimzi's rule does; counter attribute)
    ("messagesin", "messages_in", "MessagesInPerSec: records appended"),
    ("bytesin", "bytes_in", "BytesInPerSec: record bytes appended by producers"),
    ("bytesout", "bytes_out", "BytesOutPerSec: record bytes sent to consumers"),
    ("replicationbytesin", "replication_bytes_in", "ReplicationBytesInPerSec: record bytes appended as a follower"),
    ("replicationbytesout", "replication_bytes_out", "ReplicationBytesOutPerSec: record bytes sent to followers"),
    ("totalproducerequests", "total_produce", "TotalProduceRequestsPerSec: partition appends asked"),
    ("failedproducerequests", "failed_produce", "FailedProduceRequestsPerSec: partition appends failed"),
    ("totalfetchrequests", "total_fetch", "TotalFetchRequestsPerSec: partition reads asked"),
    ("failedfetchrequests", "failed_fetch", "FailedFetchRequestsPerSec: partition reads failed"),
)

_REMOTE_METERS = (  # Kafka's RemoteStorageMetrics meters in BrokerTopicMetrics (KIP-405, KIP-963)
    ("remotecopybytes", "remote_copy_bytes", "RemoteCopyBytesPerSec: bytes of the segments copied to the remote store"),
    ("remotecopyrequests", "remote_copy_requests", "RemoteCopyRequestsPerSec: segment copies to the remote store"),
    ("remotecopyerrors", "remote_copy_errors", "RemoteCopyErrorsPerSec: segment copies failed"),
    ("remotefetchbytes", "remote_fetch_bytes", "RemoteFetchBytesPerSec: record bytes read from the remote store"),
    ("remotefetchrequests", "remote_fetch_requests", "RemoteFetchRequestsPerSec: partition reads from the remote tier"),
    ("remotefetcherrors", "remote_fetch_errors", "RemoteFetchErrorsPerSec: partition reads from the remote tier failed"),
    ("remotedeleterequests", "remote_delete_requests", "RemoteDeleteRequestsPerSec: remote segments deleted"),
    ("remotedeleteerrors", "remote_delete_errors", "RemoteDeleteErrorsPerSec: remote segment deletions failed"),
    ("buildremotelogauxstaterequests", "build_remote_log_aux_state_requests",
     "BuildRemoteLogAuxStateRequestsPerSec: follower states built from the remote tier"),
    ("buildremotelogauxstateerrors", "build_remote_log_aux_state_errors",
     "BuildRemoteLogAuxStateErrorsPerSec: follower states from the remote tier failed"),
)

_REMOTE_GAUGES = (  # Kafka's RemoteStorageMetrics gauges in BrokerTopicMetrics: sums over the partitions led here
    ("remotecopylagbytes", "copy_lag_bytes", "RemoteCopyLagBytes: bytes of closed local segments not copied yet"),
    ("remotecopylagsegments", "copy_lag_segments", "RemoteCopyLagSegments: closed local segments not copied yet"),
    ("remotedeletelagbytes", "delete_lag_bytes", "RemoteDeleteLagBytes: bytes of remote segments being deleted"),
    ("remotedeletelagsegments", "delete_lag_segments", "RemoteDeleteLagSegments: remote segments being deleted"),
    ("remotelogsizebytes", "log_size_bytes", "RemoteLogSizeBytes: bytes of the remote segments"),
    ("remotelogmetadatacount", "metadata_count", "RemoteLogMetadataCount: remote segments (any state but deleted)"),
    ("remotelogsizecomputationtime", "size_computation_time_ms",
     "RemoteLogSizeComputationTime: ms the remote log size took to compute"),
)


class PartitionState(Protocol):
    """What the collector reads of a hosted replica (replication.partition.Partition)."""

    topic: str
    index: int
    replicas: list[int]
    isr: list[int]
    leader: int

    def is_leader(self, broker_id: int) -> bool: ...


class LogState(Protocol):
    topic: str
    partition: int

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def number_of_segments(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...


class TopicState(Protocol):
    name: str
    partitions: Any  # list of (index, replicas, leader, leader_epoch, isr) records


class GcPauseState(Protocol):
    """What the collector reads of the garbage collector's pauses (server.gc_tuning.GcPauses)."""

    buckets: list[list[int]]  # per generation: pauses per bucket of ``bounds``, the last one +Inf
    count: list[int]
    seconds: list[float]
    longest: list[float]
    collected: list[int]


class ThrottleTimes(Protocol):
    """A sensor's Avg and Max (Kafka's RLMQuotaMetrics: server.quota.remote_log.ThrottleTimeSensor)."""

    def avg(self) -> float: ...

    def max(self) -> float: ...


class QuotaThrottles(Protocol):
    def throttle_time_avg_ms(self, now_ms: int) -> dict[tuple[str, str], float]: ...


@dataclass(frozen=True, slots=True)
class MetricsSources:
    """The broker's narrow edges the collector reads (each a callable, evaluated per scrape)."""

    node_id: int
    topic_stats: BrokerTopicStats
    request_stats: RequestStats | None
    api_names: Mapping[int, str]
    partitions: Callable[[], Iterable[PartitionState]]  # the replicas this broker hosts
    isr_changes: Callable[[], tuple[int, int]]  # (shrinks, expands)
    offline_replicas: Callable[[], int]
    min_isr: Callable[[str], int]
    logs: Callable[[], Iterable[LogState]]
    is_controller: Callable[[], bool]
    topics: Callable[[], Iterable[TopicState]]  # the metadata cache
    live_brokers: Callable[[], set[int]]
    committed_offsets: Callable[[], Iterable[tuple[str, str, int, int]]]  # (group, topic, partition, offset)
    connections: Callable[[], Mapping[str, int]]  # listener -> open connections
    quotas: Mapping[str, QuotaThrottles]  # Produce / Fetch / Request
    now_ms: Callable[[], int]
    spliced_bytes: Callable[[], int] = lambda: 0  # follower record bytes spliced into segment files
    # the fetch session cache (KIP-227): (sessions, partitions cached, sessions evicted so far)
    fetch_sessions: Callable[[], tuple[int, int, int]] = lambda: (0, 0, 0)
    # the cyclic garbage collector's pauses of this process, and the bounds of their histogram's buckets (seconds)
    gc_pauses: GcPauseState | None = None
    gc_pause_bounds: tuple[float, ...] = ()
    # tiered storage (KIP-405): the remote log manager's copy and reader pools; None: the broker does not tier
    remote_pools: Callable[[], tuple[WorkerPoolStats, WorkerPoolStats] | None] = lambda: None
    # KIP-956: the remote log manager's copy and fetch throttle-time sensors; None: the broker does not tier
    remote_throttles: Callable[[], tuple[ThrottleTimes, ThrottleTimes] | None] = lambda: None
    # KIP-956: the copy and fetch quotas' measured byte rates (bytes/s); None: the broker does not tier
    remote_byte_rates: Callable[[], tuple[float, float] | None] = lambda: None
    # share groups (KIP-932): the share-partition manager's counters, the share coordinator's partition loads and
    # the state of each share group coordinated here; None: the broker runs no share groups
    share_stats: ShareGroupStats | None = None
    share_coordinator_loads: LoadTimes | None = None
    share_group_states: Callable[[], Iterable[str]] = lambda: ()


def _le(bound: float) -> str:
    """A histogram bucket's ``le`` label as Prometheus writes it (``+Inf``, ``0.1``, ``1.0``)."""
    return "+Inf" if bound == float("inf") else repr(bound)


class KafkaCollector(Collector):
    def __init__(self, src: MetricsSources) -> None:
        self.src = src
        self._idle_mark: tuple[float, float] | None = None  # (wall, event-loop thread CPU) at the last scrape

    def collect(self) -> Iterator[Any]:
        yield from self._topic_metrics()
        yield from self._remote_storage()
        yield from self._request_metrics()
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._logs_and_lag()
        yield from self._quotas()
        yield from self._socket_server()
        yield from self._gc_pauses()
        yield from self._share_groups()

    # -- BrokerTopicMetrics
    def _topic_metrics(self) -> Iterator[Any]:
        stats = self.src.topic_stats
        topics = sorted(stats.merged_topics().items())
        total = stats.all_topics()
        for short, attr, doc in _TOPIC_METRICS:
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
            for name, c in topics:
                fam.add_metric([name], getattr(c, attr))
            # the all-topics MBean (no topic key): the same family without the label
            fam.samples.append(Sample(f"kafka_server_brokertopicmetrics_{short}_total", {}, getattr(total, attr)))
            yield fam

    # -- tiered storage: RemoteStorageMetrics (BrokerTopicMetrics, RemoteLogManager, RemoteStorageThreadPool)
    def _remote_storage(self) -> Iterator[Any]:
        pools = self.src.remote_pools()
        if pools is None:  # Kafka registers them only with remote.log.storage.system.enable
            return
        stats = self.src.topic_stats
        merged = stats.merged_topics()
        total = stats.all_topics()
        for short, attr, doc in _REMOTE_METERS:
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
            for name, c in sorted(merged.items()):
                fam.add_metric([name], getattr(c, attr))
            fam.samples.append(Sample(f"kafka_server_brokertopicmetrics_{short}_total", {}, getattr(total, attr)))
            yield fam
        per_topic = {name: stats.remote_topic(name) for name in sorted({*merged, *stats.remote})}
        all_remote = stats.all_remote()
        for short, attr, doc in _REMOTE_GAUGES:
            gauge = GaugeMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
            for name, g in per_topic.items():
                gauge.add_metric([name], getattr(g, attr))
            gauge.samples.append(Sample(f"kafka_server_brokertopicmetrics_{short}", {}, getattr(all_remote, attr)))
            yield gauge
        throttles = self.src.remote_throttles()
        if throttles is not None:  # kafka.server<type=RemoteLogManager><>remote-{copy,fetch}-throttle-time-{avg,max}
            for kind, what, sensor in zip(("copy", "fetch"), ("copies", "fetches"), throttles, strict=True):
                prefix = f"kafka_server_remotelogmanager_remote_{kind}_throttle_time"
                yield GaugeMetricFamily(prefix + "_avg", f"remote-{kind}-throttle-time-avg: the average time in "
                                        f"millis remote {what} were throttled (NaN: none lately)", value=sensor.avg())
                yield GaugeMetricFamily(prefix + "_max", f"remote-{kind}-throttle-time-max: the maximum time in "
                                        f"millis remote {what} were throttled (NaN: none lately)", value=sensor.max())
        rates = self.src.remote_byte_rates()
        if rates is not None:  # the quota sensors: kafka.server<type=RLMCopy|RLMFetch><>byte-rate
            for quota_type, rate in zip(("rlmcopy", "rlmfetch"), rates, strict=True):
                yield GaugeMetricFamily(f"kafka_server_{quota_type}_byte_rate", "byte-rate: the bytes per second the "
                                        f"remote {quota_type[3:]} quota measures (KIP-956)", value=rate)
        copy, readers = pools
        # kafka.log.remote<type=RemoteLogManager|RemoteStorageThreadPool, name=N><>Value
        yield GaugeMetricFamily("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent",
                                "RemoteLogManagerTasksAvgIdlePercent: share (0..1) of the copy and deletion threads "
                                "idle", value=copy.idle_ratio())
        yield GaugeMetricFamily("kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize",
                                "RemoteLogReaderTaskQueueSize: remote reads waiting for a reader thread",
                                value=readers.queue_size())
        yield GaugeMetricFamily("kafka_log_remote_remotestoragethreadpool_remotelogreaderavgidlepercent",
                                "RemoteLogReaderAvgIdlePercent: share (0..1) of the reader threads idle",
                                value=readers.idle_ratio())

    # -- share groups: BrokerTopicMetrics' share meters, ShareGroupMetrics, group-coordinator-metrics and
    # share-coordinator-metrics
    def _share_groups(self) -> Iterator[Any]:
        stats = self.src.share_stats
        if stats is None:
            return
        # a topic's series come together, as Kafka registers a topic's meters together (a failed count of 0 shows)
        fetch_topics = sorted({*stats.fetch_requests, *stats.failed_fetch_requests})
        ack_topics = sorted({*stats.ack_requests, *stats.failed_ack_requests})
        for short, topics, per_topic, total, doc in (
            ("totalsharefetchrequests", fetch_topics, stats.fetch_requests, stats.all_fetch_requests(),
             "TotalShareFetchRequestsPerSec: ShareFetch requests, once per topic of the share session"),
            ("failedsharefetchrequests", fetch_topics, stats.failed_fetch_requests, stats.all_failed_fetch_requests(),
             "FailedShareFetchRequestsPerSec: those with a partition of the topic answered with an error"),
            ("totalshareacknowledgementrequests", ack_topics, stats.ack_requests, stats.all_ack_requests(),
             "TotalShareAcknowledgementRequestsPerSec: acknowledgements (ShareAcknowledge, or carried by a "
             "ShareFetch), once per topic"),
            ("failedshareacknowledgementrequests", ack_topics, stats.failed_ack_requests, stats.all_failed_ack_requests(),
             "FailedShareAcknowledgementRequestsPerSec: those with a partition of the topic that failed"),
        ):
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
            for name in topics:
                fam.add_metric([name], per_topic.get(name, 0))
            fam.samples.append(Sample(f"kafka_server_brokertopicmetrics_{short}_total", {}, total))
            yield fam
        fam = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                                  "RecordAcknowledgementsPerSec: records acknowledged per acknowledgement type",
                                  labels=["ackType"])
        for ack_type in ACK_TYPES.values():
            fam.add_metric([ack_type], stats.record_acks[ack_type])
        yield fam
        load = stats.partition_load
        name = "kafka_server_sharegroupmetrics_partitionloadtimems"
        gauge = GaugeMetricFamily(name, "PartitionLoadTimeMs percentiles (recent share-partition loads)",
                                  labels=["quantile"])
        for label, v in load.histogram.percentiles_ms():
            gauge.add_metric([label], v)
        yield gauge
        yield UnknownMetricFamily(name + "_count", "PartitionLoadTimeMs: share-partitions loaded", value=load.count)
        yield GaugeMetricFamily(name + "_mean", "PartitionLoadTimeMs Mean (ms, since the start)",
                                value=load.avg_ms if load.count else 0.0)
        yield GaugeMetricFamily(name + "_max", "PartitionLoadTimeMs Max (ms, since the start)",
                                value=load.max_ms if load.count else 0.0)
        states = {"Empty": 0, "Stable": 0, "Dead": 0}
        for state in self.src.share_group_states():
            states[state] = states.get(state, 0) + 1
        gauge = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                  "share-group-count: share groups coordinated here per state", labels=["state"])
        for state, n in states.items():
            gauge.add_metric([state], n)
        yield gauge
        gauge = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                  "group-count: share groups coordinated here", labels=["protocol"])
        gauge.add_metric(["share"], sum(states.values()))
        yield gauge
        loads = self.src.share_coordinator_loads
        if loads is not None:
            yield GaugeMetricFamily("kafka_server_share_coordinator_metrics_partition_load_time_avg",
                                    "partition-load-time-avg: ms to load a __share_group_state partition "
                                    "(since the start; NaN before the first)", value=loads.avg_ms)
            yield GaugeMetricFamily("kafka_server_share_coordinator_metrics_partition_load_time_max",
                                    "partition-load-time-max: the longest such load (ms)", value=loads.max_ms)

    # -- RequestMetrics
    def _request_name(self, key: int) -> str:
        if key == FETCH_CONSUMER:
            return "FetchConsumer"
        if key == FETCH_FOLLOWER:
            return "FetchFollower"
        return self.src.api_names.get(key, str(key))

    def _request_metrics(self) -> Iterator[Any]:
        rs = self.src.request_stats
        if rs is None:
            return
        fam = CounterMetricFamily("kafka_network_requestmetrics_requests", "RequestsPerSec per request and version",
                                  labels=["request", "version"])
        for rv, n in sorted(rs.requests.items()):
            fam.add_metric([self._request_name(rv >> 8), str(rv & 0xFF)], n)
        yield fam
        fam = CounterMetricFamily("kafka_network_requestmetrics_errors", "ErrorsPerSec: error codes in the responses "
                                  "per request (NONE included)", labels=["request", "error"])
        for (key, code), n in sorted(rs.errors.items()):
            fam.add_metric([self._request_name(key), _ERROR_NAMES.get(code, str(code))], n)
        yield fam
        for i, phase in enumerate(PHASES):
            name = f"kafka_network_requestmetrics_{phase.lower()}"
            gauge = GaugeMetricFamily(name, f"{phase} percentiles (recent requests)", labels=["request", "quantile"])
            count = UnknownMetricFamily(name + "_count", f"{phase}: requests measured", labels=["request"])
            for key, hs in sorted(rs.latency.items()):
                request = self._request_name(key)
                h = hs[i]
                for label, value in h.percentiles_ms():
                    gauge.add_metric([request, label], value)
                count.add_metric([request], rs.measured.get(key, 0))
            yield gauge
            yield count

    # -- ReplicaManager
    def _replica_manager(self) -> Iterator[Any]:
        node = self.src.node_id
        hosted = leaders = under = under_min = at_min = 0
        for p in self.src.partitions():
            hosted += 1
            if not p.is_leader(node):
                continue
            leaders += 1
            isr = len(p.isr)
            if isr < len(p.replicas):
                under += 1
            min_isr = self.src.min_isr(p.topic)
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
        shrinks, expands = self.src.isr_changes()
        g = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(g + "partitioncount", "replicas hosted by this broker", value=hosted)
        yield GaugeMetricFamily(g + "leadercount", "partitions this broker leads", value=leaders)
        yield GaugeMetricFamily(g + "underreplicatedpartitions", "led partitions whose ISR is smaller than the "
                                "replica set", value=under)
        yield GaugeMetricFamily(g + "underminisrpartitioncount", "led partitions with fewer in sync replicas than "
                                "min.insync.replicas", value=under_min)
        yield GaugeMetricFamily(g + "atminisrpartitioncount", "led partitions exactly at min.insync.replicas",
                                value=at_min)
        yield GaugeMetricFamily(g + "offlinereplicacount", "replicas in offline log directories",
                                value=self.src.offline_replicas())
        yield CounterMetricFamily(g + "isrshrinks", "IsrShrinksPerSec: ISR shrinks committed by this leader",
                                  value=shrinks)
        yield CounterMetricFamily(g + "isrexpands", "IsrExpandsPerSec: ISR expansions committed by this leader",
                                  value=expands)
        sessions, cached, evictions = self.src.fetch_sessions()
        f = "kafka_server_fetchsessioncache_"
        yield GaugeMetricFamily(f + "numincrementalfetchsessions", "incremental fetch sessions (KIP-227) cached",
                                value=sessions)
        yield GaugeMetricFamily(f + "numincrementalfetchpartitionscached", "partitions of the cached incremental "
                                "fetch sessions", value=cached)
        yield CounterMetricFamily(f + "incrementalfetchsessionevictions", "IncrementalFetchSessionEvictionsPerSec: "
                                  "sessions evicted to make room for new ones", value=evictions)
        yield CounterMetricFamily("odradek_replica_fetcher_spliced_bytes", "record bytes this broker's replica "
                                  "fetchers moved from their sockets into segment files with splice(2) (Odradek's own)",
                                  value=self.src.spliced_bytes())

    # -- KafkaController
    def _controller(self) -> Iterator[Any]:
        active = self.src.is_controller()
        topics = partitions = offline = 0
        if active:  # Kafka's controller gauges are non-zero on the active controller only
            live = self.src.live_brokers()
            for t in self.src.topics():
                topics += 1
                for p in t.partitions:
                    partitions += 1
                    if p.leader < 0 or p.leader not in live:
                        offline += 1
        c = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(c + "activecontrollercount", "1 on the active controller", value=int(active))
        yield GaugeMetricFamily(c + "offlinepartitionscount", "partitions without a live leader", value=offline)
        yield GaugeMetricFamily(c + "globaltopiccount", "topics in the cluster", value=topics)
        yield GaugeMetricFamily(c + "globalpartitioncount", "partitions in the cluster", value=partitions)

    # -- Log, consumer group lag
    def _logs_and_lag(self) -> Iterator[Any]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "bytes of the partition's log on this broker", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "log start offset", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "log end offset", labels=labels)
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "segments of the log", labels=labels)
        hw: dict[tuple[str, int], int] = {}
        for lg in self.src.logs():
            lab = [lg.topic, str(lg.partition)]
            size.add_metric(lab, lg.size_in_bytes)
            start.add_metric(lab, lg.log_start_offset)
            end.add_metric(lab, lg.log_end_offset)
            segs.add_metric(lab, lg.number_of_segments)
            hw[(lg.topic, lg.partition)] = lg.high_watermark
        yield from (size, start, end, segs)
        glabels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "high watermark - committed offset (groups this broker "
                                "coordinates, partitions it hosts)", labels=glabels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "committed offset", labels=glabels)
        for group, topic, partition, offset in self.src.committed_offsets():
            lab = [group, topic, str(partition)]
            current.add_metric(lab, offset)
            high = hw.get((topic, partition))
            if high is not None:
                lag.add_metric(lab, max(high - offset, 0))
        yield lag
        yield current

    # -- quotas
    def _quotas(self) -> Iterator[Any]:
        fam = GaugeMetricFamily("kafka_server_quota_throttle_time", "average throttle time (ms) over the quota window",
                                labels=["resource", "user", "clientId"])
        now = self.src.now_ms()
        for resource, q in self.src.quotas.items():
            for (user, client), avg in sorted(q.throttle_time_avg_ms(now).items()):
                fam.add_metric([resource, user, client], avg)
        yield fam

    # -- SocketServer
    def _socket_server(self) -> Iterator[Any]:
        fam = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "open connections",
                                labels=["listener", "networkProcessor"])
        for listener, n in sorted(self.src.connections().items()):
            fam.add_metric([listener, "0"], n)
        yield fam
        # the event loop is the one network processor: its idle share since the previous scrape
        wall, cpu = time.monotonic(), time.thread_time()
        idle = 1.0
        if self._idle_mark is not None and wall > self._idle_mark[0]:
            idle = 1.0 - min(max((cpu - self._idle_mark[1]) / (wall - self._idle_mark[0]), 0.0), 1.0)
        self._idle_mark = (wall, cpu)
        yield GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidle_percent",
                                "share of time the event loop's thread was not on the CPU (0..1)", value=idle)


    # -- the garbage collector (Odradek's own: the JVM's GC MBeans have no counterpart here)
    def _gc_pauses(self) -> Iterator[Any]:
        gcp = self.src.gc_pauses
        if gcp is None:
            return
        hist = HistogramMetricFamily("odradek_gc_pause_seconds", "how long each collection of Python's cyclic garbage "
                                     "collector held the process (and its event loop), per generation",
                                     labels=["generation"])
        for gen, counts in enumerate(gcp.buckets):
            cumulative, running = [], 0
            for bound, n in zip((*self.src.gc_pause_bounds, float("inf")), counts, strict=True):
                running += n
                cumulative.append((_le(bound), running))
            hist.add_metric([str(gen)], cumulative, gcp.seconds[gen])
        yield hist
        longest = GaugeMetricFamily("odradek_gc_pause_max_seconds", "the longest pause of each generation since the "
                                    "broker started", labels=["generation"])
        collected = CounterMetricFamily("odradek_gc_collected_objects", "unreachable objects the collections freed",
                                        labels=["generation"])
        for gen in range(len(gcp.buckets)):
            longest.add_metric([str(gen)], gcp.longest[gen])
            collected.add_metric([str(gen)], gcp.collected[gen])
        yield longest
        yield collected
