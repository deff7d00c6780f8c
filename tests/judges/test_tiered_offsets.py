"""Kafka 4.4's kafka-get-offsets (org.apache.kafka.tools.GetOffsetShell, over the Java Admin's listOffsets) against
an Odradek broker with tiered storage (KIP-405): a topic with small segments and a tiny local.retention.bytes,
so most of its history is in the remote tier only. The tool prints what Kafka would: --time -2 the remote log
start, -4 (earliest-local) the local log start, -5 (latest-tiered, KIP-1005) the highest offset copied to the
remote tier, -6 (earliest-pending-upload, KIP-1023) the offset after it, and a timestamp of a record now only in
the remote tier that record's offset (Kafka's RemoteLogManager.findOffsetByTimestamp); on a topic that is not
tiered -4 prints the log start and -5 and -6 print no line (offset -1)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from integration.broker import Broker
from integration.clients import create_topic, unique
from waiting import wait_until

from .conftest import Tool

pytestmark = pytest.mark.timeout(240)

SEGMENT = 16384
LOCAL_RETENTION = 3 * SEGMENT
ODRADEK_OVERRIDES = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name": "filesystem",  # in <first log dir>/remote-storage
    "remote.log.manager.task.interval.ms": "200",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}


def test_kafka_get_offsets_on_a_tiered_topic(kafka: Tool, odradek: Broker) -> None:
    topic = unique("tgo")
    create_topic(odradek.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                               "local.retention.bytes": LOCAL_RETENTION})
    n = 3000
    base = int(time.time() * 1000) - 600_000  # record i at base + i
    p = Producer({"bootstrap.servers": odradek.bootstrap, "enable.idempotence": True, "batch.size": 4096,
                  "linger.ms": 1})
    for i in range(n):
        p.produce(topic, value=b"%06d" % i + b"v" * 150, partition=0, timestamp=base + i)
    assert p.flush(30) == 0

    def offset(spec: str, name: str = topic) -> int | None:
        out = kafka("kafka-get-offsets", "--bootstrap-server", odradek.bootstrap, "--topic", name,
                    "--time", spec).stdout.split()
        assert len(out) <= 1, out
        return int(out[0].rsplit(":", 1)[1]) if out else None

    def tiered() -> bool:  # the local log holds the tail only, every closed segment is in the remote tier
        local = odradek.segment_files(topic, 0)
        return len(local) <= LOCAL_RETENTION // SEGMENT + 2 and int(local[0].name[:20]) > n // 2

    wait_until(tiered, 90, "the local log to hold the tail only", interval=0.5)
    active = int(odradek.segment_files(topic, 0)[-1].name[:20])
    wait_until(lambda: offset("-5") == active - 1, 60, "every closed segment copied", interval=1)
    local_start = int(odradek.segment_files(topic, 0)[0].name[:20])

    assert offset("-2") == offset("earliest") == 0  # the log starts in the remote tier
    assert offset("-4") == offset("earliest-local") == local_start
    assert offset("-5") == offset("latest-tiered") == active - 1
    assert offset("-6") == offset("earliest-pending-upload") == active
    assert offset("-1") == n
    # timestamps of records only in the remote tier, then of the local tail
    assert local_start > 1500
    for k in (0, 321, 1500, local_start - 1, local_start, n - 1):
        assert offset(str(base + k)) == k, k
    assert offset(str(base + n)) is None  # no record that late: no line

    plain = unique("plain")
    create_topic(odradek.bootstrap, plain, 1)
    pp = Producer({"bootstrap.servers": odradek.bootstrap})
    for i in range(5):
        pp.produce(plain, value=b"x", partition=0, timestamp=base + i)
    assert pp.flush(30) == 0
    assert offset("-4", plain) == offset("-2", plain) == 0
    assert offset("-5", plain) is None
    assert offset("-6", plain) is None
    assert offset(str(base + 3), plain) == 3
