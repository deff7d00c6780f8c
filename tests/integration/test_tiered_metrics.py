"""Tiered storage's metrics on ``/metrics`` (Kafka's RemoteStorageMetrics, KIP-405 and KIP-963, under the names
Strimzi's JMX-exporter rules give Kafka's MBeans), scraped from a real broker process with the filesystem store
after real clients (confluent-kafka) produced to a tiered topic and read it back from the remote tier: the bytes
copied are the bytes of the segment files in the store, the remote size and segment count agree, the copy lag
is back to 0 once every closed segment is copied, and a consumer from offset 0 makes remote fetch bytes at least
the remote-only segments' size; the web console's topic page shows the local and the remote size. A broker
without remote storage shows none of them, as Kafka registers none."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from waiting import wait_until

from odradek.console.pages import human_bytes

from .broker import BrokerFactory
from .clients import (
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume_confluent,
    create_topic,
    make_messages,
    produce,
    unique,
)
from .test_metrics import scrape, value
from .test_tiered_broker import (
    LOCAL_RETENTION,
    SEGMENT,
    SMALL_BATCHES,
    list_offset,
    remote_segments,
    tiered_overrides,
)

B = "kafka_server_brokertopicmetrics_"


def _log_bytes(segment_dir: Path) -> int:
    return (segment_dir / f"{segment_dir.name[:20]}.log").stat().st_size


@pytest.mark.timeout(240)
def test_remote_storage_metrics_follow_the_copies_and_the_remote_reads(make_broker: BrokerFactory,
                                                                      tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic = unique("tmetrics")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    msgs = make_messages(3000, "tmetrics", value_size=150)
    acks = produce("confluent", b.bootstrap, topic, msgs, partition=0, conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    last_closed = int(b.segment_files(topic, 0)[-1].name[:20]) - 1  # the active segment is never copied

    def copied_bytes() -> int:
        return sum(_log_bytes(d) for d in remote_segments(remote, topic))

    def settled() -> bool:
        m = scrape(b)
        return (list_offset(b.bootstrap, topic, -5) >= last_closed
                and value(m, B + "remotecopylagsegments", topic=topic) == 0
                and value(m, B + "remotecopybytes_total", topic=topic) == copied_bytes())

    wait_until(settled, 90, "every closed segment copied and counted", interval=0.5)
    m = scrape(b)
    segments = remote_segments(remote, topic)
    assert len(segments) >= 10, segments
    copied = value(m, B + "remotecopybytes_total", topic=topic)
    assert copied == copied_bytes() > len(segments) * SEGMENT // 2
    assert value(m, B + "remotecopyrequests_total", topic=topic) == len(segments)
    assert value(m, B + "remotecopyerrors_total", topic=topic) == 0
    # the remote log's size and segments (RemoteLogSizeBytes, RemoteLogMetadataCount): what was copied
    assert value(m, B + "remotelogsizebytes", topic=topic) == copied
    assert value(m, B + "remotelogmetadatacount", topic=topic) == len(segments)
    assert value(m, B + "remotecopylagbytes", topic=topic) == 0
    assert value(m, B + "remotedeleterequests_total", topic=topic) == 0  # retention keeps everything
    # the broker-wide MBeans (no topic key): this is the broker's only tiered topic
    assert value(m, B + "remotecopybytes_total") == copied
    assert value(m, B + "remotelogsizebytes") == copied
    assert value(m, B + "remotecopylagsegments") == 0
    assert value(m, B + "remotefetchbytes_total", topic=topic) == 0
    # the web console's topic page: the local and the remote size side by side
    with urllib.request.urlopen(f"http://{b.host}:{b.http_port}/topic?name={topic}", timeout=15) as r:
        page = r.read().decode()
    assert "<th>Local size</th><th>Remote size</th>" in page
    assert f'<td class="num">{human_bytes(int(copied))}</td>' in page

    # a consumer from offset 0: the records below the local log start come from the remote tier
    local_start = list_offset(b.bootstrap, topic, -4)
    bases = [int(d.name[:20]) for d in segments]
    remote_only = [d for d, nxt in zip(segments, bases[1:], strict=False) if nxt <= local_start]
    assert len(remote_only) >= 5, (bases, local_start)
    check_consumed(Expectation(msgs, acks), consume_confluent(b.bootstrap, topic, {0: 0}, len(msgs)))
    m = scrape(b)
    fetched = value(m, B + "remotefetchbytes_total", topic=topic)
    below = sum(_log_bytes(d) for d in remote_only)
    assert fetched >= below > 0, (fetched, below)
    print(f"copied {copied:.0f} B in {len(segments)} segments; remote fetch {fetched:.0f} B (remote-only segments "
          f"{below} B, local log start {local_start})")
    assert value(m, B + "remotefetchrequests_total", topic=topic) >= len(remote_only)
    assert value(m, B + "remotefetcherrors_total", topic=topic) == 0
    assert value(m, B + "remotefetchbytes_total") == fetched
    assert value(m, B + "bytesout_total", topic=topic) >= below  # sent to the consumer like the local bytes
    assert value(m, "kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize") == 0
    assert 0 <= value(m, "kafka_log_remote_remotestoragethreadpool_remotelogreaderavgidlepercent") <= 1
    assert 0 <= value(m, "kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent") <= 1


def test_no_remote_storage_metrics_without_remote_storage(make_broker: BrokerFactory) -> None:
    b = make_broker()
    topic = unique("plain")
    create_topic(b.bootstrap, topic, 1)
    m = scrape(b)
    assert not [name for name, _ in m if "remote" in name and name.startswith(("kafka_server", "kafka_log"))]
