"""odradek.metrics.stats: buckets, percentiles, windows, topic sums; the collector's exposition."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.metrics.collector import KafkaCollector, MetricsSources
from odradek.metrics.stats import (
    FETCH_CONSUMER,
    BrokerTopicStats,
    LatencyHistogram,
    RequestStats,
    WorkerPoolStats,
    bucket_of,
    bucket_upper_us,
    executor_queue,
)
from odradek.server.gc_tuning import PAUSE_BUCKETS, GcPauses


def test_buckets_are_contiguous_and_at_most_25_percent_wide() -> None:
    prev = -1
    for us in range(0, 200_000, 7):
        b = bucket_of(us)
        assert b >= prev
        prev = b
        upper = bucket_upper_us(b)
        assert us <= upper <= max(us * 1.25, us + 1), (us, b, upper)
        if b > 0:
            assert bucket_upper_us(b - 1) < us


def test_percentiles_over_the_current_and_previous_window() -> None:
    h = LatencyHistogram()
    for ms in range(1, 101):  # 1..100 ms
        h.current[bucket_of(ms * 1000)] += 1
    p = dict(h.percentiles_ms())
    assert 50 <= p["0.50"] <= 50 * 1.25
    assert 99 <= p["0.99"] <= 99 * 1.25
    assert p["0.999"] >= p["0.99"] >= p["0.95"] >= p["0.75"] >= p["0.50"]
    h.rotate()
    assert dict(h.percentiles_ms())["0.50"] == p["0.50"]  # the previous window still counts
    h.rotate()
    assert dict(h.percentiles_ms())["0.50"] == 0.0


def test_request_stats_phases() -> None:
    rs = RequestStats()
    ms = 1_000_000
    # received 0, started 1 ms, local done 3 ms, completed 10 ms, queued 10 ms, sent 12 ms
    rs.record(0, 9, 0, 1 * ms, 3 * ms, 10 * ms, 10 * ms, 12 * ms)
    rs.record(FETCH_CONSUMER, 16, 0, 0, 0, 0, 0, 0)
    assert rs.requests == {0 << 8 | 9: 1, FETCH_CONSUMER << 8 | 16: 1}
    got = [dict(h.percentiles_ms())["0.50"] for h in rs.latency[0]]
    for value, want in zip(got, [1, 2, 7, 0, 2, 12], strict=True):
        assert want <= value <= want * 1.25 + 0.001, (got, want)


def test_topic_sums_keep_deleted_topics() -> None:
    s = BrokerTopicStats()
    s.topic("a").bytes_in += 10
    s.topic("b").bytes_in += 5
    s.remove("a")
    assert set(s.topics) == {"b"}
    assert s.all_topics().bytes_in == 15


def test_collector_exposition_parses() -> None:
    clock = FakeClock()
    pauses = GcPauses(clock)
    for gen, seconds in ((0, 0.0005), (0, 0.0005), (2, 0.3)):  # two young collections and a 300 ms full one
        pauses("start", {"generation": gen, "collected": 0, "uncollectable": 0})
        clock.t += seconds
        pauses("stop", {"generation": gen, "collected": 5, "uncollectable": 0})
    ts = BrokerTopicStats()
    ts.topic("t").messages_in += 3
    rs = RequestStats()
    rs.record(0, 9, 0, 1000, 2000, 2000, 2000, 3000)
    src = MetricsSources(
        node_id=1, topic_stats=ts, request_stats=rs, api_names={0: "Produce"}, partitions=list,
        isr_changes=lambda: (2, 1), offline_replicas=lambda: 0, min_isr=lambda t: 1, logs=list,
        is_controller=lambda: False, topics=list, live_brokers=set, committed_offsets=list,
        connections=lambda: {"PLAINTEXT": 4}, quotas={}, now_ms=lambda: 0, fetch_sessions=lambda: (7, 30, 2),
        gc_pauses=pauses, gc_pause_bounds=PAUSE_BUCKETS,
    )
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KafkaCollector(src))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(generate_latest(reg).decode()) for s in f.samples}
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),))] == 3
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 3
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 1
    assert samples[("kafka_server_replicamanager_isrshrinks_total", ())] == 2
    assert samples[("kafka_server_replicamanager_isrexpands_total", ())] == 1
    assert samples[("kafka_server_fetchsessioncache_numincrementalfetchsessions", ())] == 7
    assert samples[("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", ())] == 30
    assert samples[("kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total", ())] == 2
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert samples[("kafka_server_socket_server_metrics_connection_count",
                    (("listener", "PLAINTEXT"), ("networkProcessor", "0")))] == 4
    assert samples[("odradek_gc_pause_seconds_count", (("generation", "0"),))] == 2
    assert samples[("odradek_gc_pause_seconds_bucket", (("generation", "0"), ("le", "0.001")))] == 2
    assert samples[("odradek_gc_pause_seconds_bucket", (("generation", "2"), ("le", "0.25")))] == 0
    assert samples[("odradek_gc_pause_seconds_bucket", (("generation", "2"), ("le", "0.5")))] == 1
    assert samples[("odradek_gc_pause_seconds_bucket", (("generation", "2"), ("le", "+Inf")))] == 1
    assert samples[("odradek_gc_pause_seconds_sum", (("generation", "2"),))] == pytest.approx(0.3)
    assert samples[("odradek_gc_pause_max_seconds", (("generation", "2"),))] == pytest.approx(0.3)
    assert samples[("odradek_gc_pause_max_seconds", (("generation", "1"),))] == 0
    assert samples[("odradek_gc_collected_objects_total", (("generation", "0"),))] == 10


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_worker_threads_count_in_their_own_counters_and_none_is_lost() -> None:
    """Tiered storage's reader threads count RemoteFetchBytes in counters only they write: four threads adding
    at once lose nothing, the scrape sums them with the event loop's, and a deleted topic's go to the
    all-topics sums."""
    s = BrokerTopicStats()
    s.topic("t").remote_fetch_requests += 3
    s.topic("t").remote_fetch_bytes += 1

    def count() -> None:
        for _ in range(20_000):
            s.for_thread("t").remote_fetch_bytes += 1
        s.for_thread("u").remote_fetch_errors += 1

    threads = [threading.Thread(target=count) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = s.merged_topics()
    assert merged["t"].remote_fetch_bytes == 80_001 and merged["t"].remote_fetch_requests == 3
    assert merged["u"].remote_fetch_errors == 4
    assert s.all_topics().remote_fetch_bytes == 80_001
    s.remove("t")
    assert set(s.merged_topics()) == {"u"}
    assert s.all_topics().remote_fetch_bytes == 80_001 and s.all_topics().remote_fetch_errors == 4


def test_remote_gauges_sum_per_topic_and_over_all_topics() -> None:
    s = BrokerTopicStats()
    s.remote_partition("t", 0).copy_lag_bytes = 100
    s.remote_partition("t", 1).copy_lag_bytes = 50
    s.remote_partition("u", 0).log_size_bytes = 7
    assert s.remote_topic("t").copy_lag_bytes == 150 and s.remote_topic("v").copy_lag_bytes == 0
    assert (s.all_remote().copy_lag_bytes, s.all_remote().log_size_bytes) == (150, 7)
    s.remove_remote_partition("t", 0)  # no longer led here
    assert s.remote_topic("t").copy_lag_bytes == 50
    s.remove("u")  # deleted: its gauges go
    assert s.all_remote().log_size_bytes == 0


def test_worker_pool_gauges() -> None:
    """RemoteStorageThreadPool's TaskQueueSize and AvgIdlePercent: two threads busy, one task queued."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    stats = WorkerPoolStats(2, executor_queue(pool))
    release = threading.Event()
    started = threading.Semaphore(0)

    def work() -> None:
        started.release()
        release.wait(10)

    futures = [pool.submit(stats.wrap(work)) for _ in range(3)]
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    assert (stats.busy(), stats.queue_size(), stats.idle_ratio()) == (2, 1, 0.0)
    release.set()
    for f in futures:
        f.result(10)
    assert (stats.busy(), stats.queue_size(), stats.idle_ratio()) == (0, 0, 1.0)
    pool.shutdown()


def _scrape(src: MetricsSources) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KafkaCollector(src))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(generate_latest(reg).decode()) for s in f.samples}


def test_collector_remote_storage_metrics_only_on_a_tiering_broker() -> None:
    ts = BrokerTopicStats()
    ts.topic("t").remote_copy_bytes += 4000
    ts.topic("t").remote_copy_requests += 2
    ts.for_thread("t").remote_fetch_bytes += 300
    ts.topic("u").messages_in += 1
    ts.remote_partition("t", 0).copy_lag_segments = 3
    ts.remote_partition("t", 1).copy_lag_segments = 1
    ts.remote_partition("t", 0).log_size_bytes = 4000
    base: dict[str, Any] = dict(
        node_id=1, topic_stats=ts, request_stats=None, api_names={}, partitions=list,
        isr_changes=lambda: (0, 0), offline_replicas=lambda: 0, min_isr=lambda t: 1, logs=list,
        is_controller=lambda: False, topics=list, live_brokers=set, committed_offsets=list,
        connections=dict, quotas={}, now_ms=lambda: 0,
    )
    plain = _scrape(MetricsSources(**base))
    assert not [k for k in plain if "remote" in k[0]]  # Kafka registers none without remote storage
    readers = WorkerPoolStats(4, lambda: 5)
    m = _scrape(MetricsSources(**base, remote_pools=lambda: (WorkerPoolStats(2), readers)))
    b = "kafka_server_brokertopicmetrics_"
    assert m[(b + "remotecopybytes_total", (("topic", "t"),))] == 4000
    assert m[(b + "remotecopybytes_total", ())] == 4000
    assert m[(b + "remotecopyrequests_total", (("topic", "t"),))] == 2
    assert m[(b + "remotecopyerrors_total", (("topic", "u"),))] == 0
    assert m[(b + "remotefetchbytes_total", (("topic", "t"),))] == 300
    assert m[(b + "remotefetchrequests_total", ())] == 0
    assert m[(b + "remotedeleterequests_total", ())] == 0
    assert m[(b + "remotecopylagsegments", (("topic", "t"),))] == 4
    assert m[(b + "remotecopylagsegments", (("topic", "u"),))] == 0
    assert m[(b + "remotecopylagsegments", ())] == 4
    assert m[(b + "remotelogsizebytes", (("topic", "t"),))] == 4000
    assert m[(b + "remotelogmetadatacount", ())] == 0
    assert m[("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent", ())] == 1.0
    assert m[("kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize", ())] == 5
    assert m[("kafka_log_remote_remotestoragethreadpool_remotelogreaderavgidlepercent", ())] == 1.0
    assert m[(b + "messagesin_total", (("topic", "u"),))] == 1  # the other meters as they were
