"""Share groups' metrics on ``/metrics`` (Kafka's ShareGroupMetrics, the share meters of BrokerTopicMetrics,
group-coordinator-metrics' share-group-count and share-coordinator-metrics' partition-load-time; KIP-932,
KIP-1103), scraped from a real broker process after the project's wire client joined a share group, fetched five
records and acknowledged them, with a ShareAcknowledge and piggybacked on a ShareFetch, accepting, releasing and
rejecting: every count is exactly what was done."""

from __future__ import annotations

import datetime
import math
import time
from typing import Any

import pytest

from .broker import BrokerFactory
from .test_metrics import scrape, value
from .test_share_groups import create_topic, produce

B = "kafka_server_brokertopicmetrics_"
G = "kafka_server_sharegroupmetrics_"
ACCEPT, RELEASE, REJECT = 1, 2, 3  # AcknowledgeType


@pytest.mark.timeout(120)
def test_share_metrics_count_what_the_share_consumer_did(make_broker: BrokerFactory) -> None:
    from kio.schema.share_acknowledge.v2 import request as ack_req
    from kio.schema.share_fetch.v2 import request as fetch_req

    from odradek.client.wire import WireClient

    b = make_broker({"share.coordinator.state.topic.num.partitions": 2,
                     "group.share.record.lock.duration.ms": 30000})
    topic = "smetrics"
    create_topic(b, topic)
    before = scrape(b)
    assert value(before, B + "totalsharefetchrequests_total") == 0
    assert value(before, G + "partitionloadtimems_count") == 0
    with WireClient(b.bootstrap, timeout=15) as w:
        meta = w.request(3, 12, topics=None, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
        tid = next(t.topic_id for t in meta.topics if t.name == topic)
        end = time.monotonic() + 20
        while True:  # __consumer_offsets is created by the first group request
            hb = w.request(76, 1, group_id="gm", member_id="metrics-member", member_epoch=0, rack_id=None,
                           subscribed_topic_names=(topic,))
            if hb.error_code != 15 or time.monotonic() > end:  # COORDINATOR_NOT_AVAILABLE
                break
            time.sleep(0.2)
        assert hb.error_code == 0
        fetches = 0

        def share_fetch(epoch: int, acks: tuple[Any, ...] = ()) -> Any:
            nonlocal fetches
            fetches += 1
            part = fetch_req.FetchPartition(partition_index=0, acknowledgement_batches=acks)
            r = w.request(78, 2, group_id="gm", member_id="metrics-member", share_session_epoch=epoch,
                          max_wait=datetime.timedelta(milliseconds=200), min_bytes=1, max_bytes=1 << 20,
                          max_records=10, batch_size=10, share_acquire_mode=0, is_renew_ack=False,
                          topics=(fetch_req.FetchTopic(topic_id=tid, partitions=(part,)),),
                          forgotten_topics_data=())
            assert r.error_code == 0
            return r

        def acquired(r: Any) -> list[tuple[int, int, int]]:
            return [(a.first_offset, a.last_offset, a.delivery_count)
                    for t in r.responses for p in t.partitions for a in p.acquired_records]

        def acknowledge(epoch: int, *batches: tuple[int, int, tuple[int, ...]]) -> int:
            r = w.request(79, 2, group_id="gm", member_id="metrics-member", share_session_epoch=epoch,
                          is_renew_ack=False, topics=(ack_req.AcknowledgeTopic(topic_id=tid, partitions=(
                              ack_req.AcknowledgePartition(partition_index=0, acknowledgement_batches=tuple(
                                  ack_req.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                               acknowledge_types=types)
                                  for f, last, types in batches)),)),))
            assert r.error_code == 0
            return int(r.responses[0].partitions[0].error_code)

        # the share-partition is loaded, its start offset placed (latest: 0), once the share coordinator is ready
        assert acquired(share_fetch(0)) == []
        epoch = 1
        while value(scrape(b), G + "partitionloadtimems_count") == 0:
            assert acquired(share_fetch(epoch)) == []
            epoch += 1
            assert epoch < 40
        produce(b, topic, ["a", "b", "c", "d", "e"])
        got: list[tuple[int, int, int]] = []
        while sum(last - first + 1 for first, last, _ in got) < 5:
            got += acquired(share_fetch(epoch))
            epoch += 1
            assert epoch < 40, got
        assert got[0][0] == 0 and got[-1][1] == 4
        # a ShareAcknowledge: 0-1 accepted (one type for the range), 2 released, 3 rejected, 4 accepted (a type
        # per offset)
        assert acknowledge(epoch, (0, 1, (ACCEPT,)), (2, 4, (RELEASE, REJECT, ACCEPT))) == 0
        epoch += 1
        again = acquired(share_fetch(epoch))  # the released record comes back, its second delivery
        epoch += 1
        assert again == [(2, 2, 2)]
        # rejected, piggybacked on a ShareFetch
        r = share_fetch(epoch, (fetch_req.AcknowledgementBatch(first_offset=2, last_offset=2,
                                                               acknowledge_types=(REJECT,)),))
        epoch += 1
        assert r.responses[0].partitions[0].acknowledge_error_code == 0 and acquired(r) == []
        # acknowledging a record never delivered fails: INVALID_RECORD_STATE, no record counted
        assert acknowledge(epoch, (9, 9, (ACCEPT,))) == 121
        epoch += 1

        m = scrape(b)
    assert value(m, G + "recordacknowledgements_total", ackType="Accept") == 3
    assert value(m, G + "recordacknowledgements_total", ackType="Release") == 1
    assert value(m, G + "recordacknowledgements_total", ackType="Reject") == 2
    assert value(m, G + "recordacknowledgements_total", ackType="Renew") == 0
    for labels in ({"topic": topic}, {}):
        assert value(m, B + "totalshareacknowledgementrequests_total", **labels) == 3
        assert value(m, B + "failedshareacknowledgementrequests_total", **labels) == 1
        assert value(m, B + "totalsharefetchrequests_total", **labels) == fetches
        assert value(m, B + "failedsharefetchrequests_total", **labels) == 0
    assert value(m, G + "partitionloadtimems_count") == 1  # one share-partition, loaded once
    assert 0 <= value(m, G + "partitionloadtimems_max") == value(m, G + "partitionloadtimems_mean")
    c = "kafka_server_group_coordinator_metrics_"
    assert value(m, c + "share_group_count", state="Stable") == 1
    assert value(m, c + "share_group_count", state="Empty") == 0
    assert value(m, c + "group_count", protocol="share") == 1
    load_avg = value(m, "kafka_server_share_coordinator_metrics_partition_load_time_avg")
    load_max = value(m, "kafka_server_share_coordinator_metrics_partition_load_time_max")
    assert not math.isnan(load_avg) and 0 <= load_avg <= load_max  # __share_group_state's partitions loaded
