"""odradek.metrics.share_stats (Kafka's ShareGroupMetrics and the share meters of BrokerTopicMetrics, KIP-932 and
KIP-1103) and their exposition by the collector."""

from __future__ import annotations

import math
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.coordinator.share.share_partition import AcknowledgementBatch
from odradek.metrics.collector import KafkaCollector, MetricsSources
from odradek.metrics.share_stats import LoadTimes, ShareGroupStats
from odradek.metrics.stats import BrokerTopicStats

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def test_a_batch_of_one_type_counts_its_range_and_one_per_offset_counts_each_but_gaps() -> None:
    s = ShareGroupStats()
    s.records_acknowledged([AcknowledgementBatch(10, 14, (1,)), AcknowledgementBatch(15, 15, (2,))])
    s.records_acknowledged([AcknowledgementBatch(16, 21, (3, 0, 1, 1, 2, 4))])
    s.records_acknowledged([AcknowledgementBatch(22, 25, (0,))])  # a gap: no record
    assert s.record_acks == {"Accept": 7, "Release": 2, "Reject": 1, "Renew": 1}


def test_acknowledgements_and_fetches_count_once_per_topic_and_keep_deleted_topics_in_the_totals() -> None:
    s = ShareGroupStats()
    s.acknowledgement(["a", "b"], ["b"])
    s.acknowledgement(["a"], [])
    s.share_fetch(["a"], ["a"])
    assert (s.ack_requests, s.failed_ack_requests) == ({"a": 2, "b": 1}, {"b": 1})
    assert s.fetch_requests == {"a": 1} and s.failed_fetch_requests == {"a": 1}
    s.remove_topic("b")
    s.remove_topic("a")
    assert s.ack_requests == {} and s.fetch_requests == {}
    assert (s.all_ack_requests(), s.all_failed_ack_requests()) == (3, 1)
    assert (s.all_fetch_requests(), s.all_failed_fetch_requests()) == (1, 1)


def test_load_times_average_and_maximum() -> None:
    t = LoadTimes()
    assert math.isnan(t.avg_ms) and math.isnan(t.max_ms)  # Kafka's Avg and Max without a sample
    t.record(4.0)
    t.record(10.0)
    t.record(-1.0)  # a clock step back counts as 0
    assert (t.count, t.avg_ms, t.max_ms) == (3, 14.0 / 3, 10.0)
    p = dict(t.histogram.percentiles_ms())
    assert 10.0 <= p["0.99"] <= 12.5  # its bucket's upper bound: at most 25 % above
    t.rotate()
    t.rotate()
    assert dict(t.histogram.percentiles_ms())["0.99"] == 0.0 and t.count == 3  # Max and Mean are all-time


def _scrape(src: MetricsSources) -> Samples:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KafkaCollector(src))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(generate_latest(reg).decode()) for s in f.samples}


def test_collector_share_group_metrics_under_kafkas_names() -> None:
    base: dict[str, Any] = dict(
        node_id=1, topic_stats=BrokerTopicStats(), request_stats=None, api_names={}, partitions=list,
        isr_changes=lambda: (0, 0), offline_replicas=lambda: 0, min_isr=lambda t: 1, logs=list,
        is_controller=lambda: False, topics=list, live_brokers=set, committed_offsets=list,
        connections=dict, quotas={}, now_ms=lambda: 0,
    )
    assert not [k for k in _scrape(MetricsSources(**base)) if "share" in k[0]]  # a broker without share groups
    s = ShareGroupStats()
    s.acknowledgement(["t"], [])
    s.acknowledgement(["t", "u"], ["u"])
    s.share_fetch(["t"], [])
    s.records_acknowledged([AcknowledgementBatch(0, 2, (1,)), AcknowledgementBatch(3, 4, (3, 2))])
    s.partition_loaded(8)
    loads = LoadTimes()
    loads.record(20)
    loads.record(30)
    m = _scrape(MetricsSources(**base, share_stats=s, share_coordinator_loads=loads,
                               share_group_states=lambda: ["Stable", "Empty", "Stable"]))
    b = "kafka_server_brokertopicmetrics_"
    assert m[(b + "totalshareacknowledgementrequests_total", (("topic", "t"),))] == 2
    assert m[(b + "totalshareacknowledgementrequests_total", ())] == 3
    assert m[(b + "failedshareacknowledgementrequests_total", (("topic", "u"),))] == 1
    assert m[(b + "failedshareacknowledgementrequests_total", ())] == 1
    assert m[(b + "totalsharefetchrequests_total", (("topic", "t"),))] == 1
    assert m[(b + "failedsharefetchrequests_total", ())] == 0
    g = "kafka_server_sharegroupmetrics_"
    assert m[(g + "recordacknowledgements_total", (("ackType", "Accept"),))] == 3
    assert m[(g + "recordacknowledgements_total", (("ackType", "Release"),))] == 1
    assert m[(g + "recordacknowledgements_total", (("ackType", "Reject"),))] == 1
    assert m[(g + "recordacknowledgements_total", (("ackType", "Renew"),))] == 0
    assert m[(g + "partitionloadtimems_count", ())] == 1
    assert (m[(g + "partitionloadtimems_mean", ())], m[(g + "partitionloadtimems_max", ())]) == (8.0, 8.0)
    assert 8.0 <= m[(g + "partitionloadtimems", (("quantile", "0.50"),))] <= 10.0
    c = "kafka_server_group_coordinator_metrics_"
    assert m[(c + "share_group_count", (("state", "Stable"),))] == 2
    assert m[(c + "share_group_count", (("state", "Empty"),))] == 1
    assert m[(c + "share_group_count", (("state", "Dead"),))] == 0
    assert m[(c + "group_count", (("protocol", "share"),))] == 3
    assert m[("kafka_server_share_coordinator_metrics_partition_load_time_avg", ())] == 25.0
    assert m[("kafka_server_share_coordinator_metrics_partition_load_time_max", ())] == 30.0
