"""KIP-956's remote copy quota on a real broker process with the filesystem store: a broker started with
``remote.log.manager.copy.max.bytes.per.second=1`` copies one segment (nothing measured yet) and then holds the
copies back while real clients (confluent-kafka) produce; an IncrementalAlterConfigs of the broker raises the
bound to 16 KiB/s, and the remaining closed segments are copied at about that rate (Kafka's SimpleRate: the k-th
copy starts once the bytes copied before it over the time since the first copy are within the bound, so the last
one starts about ``sum(segments but the last) / bound`` after the first); the throttle-time metrics
(``kafka.server<type=RemoteLogManager><>remote-copy-throttle-time-avg|max``) show the wait."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from waiting import wait_until

from .broker import BrokerFactory
from .clients import check_acks_contiguous, create_topic, make_messages, produce, unique
from .test_metrics import scrape, value
from .test_tiered_broker import SEGMENT, SMALL_BATCHES, list_offset, remote_segments, tiered_overrides

RATE = 16384  # bytes/s once raised
T = "kafka_server_remotelogmanager_remote_"


def _log_bytes(segment_dir: Path) -> int:
    return (segment_dir / f"{segment_dir.name[:20]}.log").stat().st_size


@pytest.mark.timeout(180)
def test_a_throttled_copy_takes_about_the_bytes_over_the_rate(make_broker: BrokerFactory, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = make_broker({**tiered_overrides(remote), "remote.log.manager.copy.max.bytes.per.second": "1"})
    topic = unique("tquota")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.ms": "-2"})
    acks = produce("confluent", b.bootstrap, topic, make_messages(700, "tquota", value_size=150), partition=0,
                   conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    last_closed = int(b.segment_files(topic, 0)[-1].name[:20]) - 1
    closed = len(b.segment_files(topic, 0)) - 1
    assert closed >= 5, closed
    # at 1 B/s the first copy passes and the next waits: the quota's checks show in the throttle-time sensor
    wait_until(lambda: len(remote_segments(remote, topic)) == 1, 30, "the first segment copied", interval=0.1)
    wait_until(lambda: value(scrape(b), T + "copy_throttle_time_max") > 0, 30, "a copy throttled", interval=0.2)
    # the task sees the rest waiting (RemoteCopyLagSegments), and none of it was copied meanwhile
    wait_until(lambda: value(scrape(b), "kafka_server_brokertopicmetrics_remotecopylagsegments", topic=topic)
               == closed - 1, 30, "the copy lag recorded", interval=0.2)
    assert len(remote_segments(remote, topic)) == 1
    m = scrape(b)
    assert value(m, T + "copy_throttle_time_avg") > 1000  # (S - 1) / 1 * 1000 ms: far over a second
    assert math.isnan(value(m, T + "fetch_throttle_time_avg"))  # no fetch throttled: Kafka's Avg of nothing

    a = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[ConfigEntry(
        "remote.log.manager.copy.max.bytes.per.second", str(RATE), incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(15)
    raised = time.time()
    wait_until(lambda: list_offset(b.bootstrap, topic, -5) >= last_closed, 90, "every closed segment copied",
               interval=0.1)
    segments = remote_segments(remote, topic)
    sizes = [_log_bytes(d) for d in segments]
    assert len(sizes) == closed
    # when each copy was made: its .log file in the store was written then
    copied_at = [(d / f"{d.name[:20]}.log").stat().st_mtime for d in segments]
    # Kafka's SimpleRate from the first copy: the last starts once the bytes before it are within the bound
    expected = sum(sizes[:-1]) / RATE
    took = copied_at[-1] - copied_at[0]
    print(f"{closed} segments, {sum(sizes)} B: the last copied {took:.2f} s after the first (expected "
          f"{expected:.2f} s at {RATE} B/s); the bound was raised {raised - copied_at[0]:.2f} s after the first")
    assert raised - copied_at[0] < expected - 1, "the raise came too late to measure the rate"
    assert expected - 0.3 <= took <= expected + 1.5  # checked again after at most a second (Kafka's quotaTimeout)
    assert all(later > earlier for earlier, later in zip(copied_at, copied_at[1:], strict=False))
    m = scrape(b)
    assert value(m, T + "copy_throttle_time_max") > 1000
    # the quota's own measure: at most the bound, but for the last segment, counted as its copy started
    assert 0 < value(m, "kafka_server_rlmcopy_byte_rate") <= RATE * sum(sizes) / sum(sizes[:-1]) * 1.05
    assert value(m, "kafka_server_brokertopicmetrics_remotecopybytes_total", topic=topic) == sum(sizes)
