"""odradek.metrics.stats: buckets, percentiles, windows, topic sums; the collector's exposition."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.metrics.collector import KafkaCollector, MetricsSources
from odradek.metrics.stats import (
    FETCH_CONSUMER,
    BrokerTopicStats,
    LatencyHistogram,
    RequestStats,
    bucket_of,
    bucket_upper_us,
)


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
    ts = BrokerTopicStats()
    ts.topic("t").messages_in += 3
    rs = RequestStats()
    rs.record(0, 9, 0, 1000, 2000, 2000, 2000, 3000)
    src = MetricsSources(
        node_id=1, topic_stats=ts, request_stats=rs, api_names={0: "Produce"}, partitions=list,
        isr_changes=lambda: (2, 1), offline_replicas=lambda: 0, min_isr=lambda t: 1, logs=list,
        is_controller=lambda: False, topics=list, live_brokers=set, committed_offsets=list,
        connections=lambda: {"PLAINTEXT": 4}, quotas={}, now_ms=lambda: 0, fetch_sessions=lambda: (7, 30, 2),
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
