"""A follower that reports bogus fetch offsets (issue 33): beyond the leader's log end, negative, or
from a leader epoch that is not the leader's.

A follower's fetch offset is its log end offset as far as the leader knows, and the high watermark
is the least log end offset of the ISR: a fetch offset the leader believed blindly would advance the
high watermark over records no follower holds. Kafka answers such fetches OFFSET_OUT_OF_RANGE
(offset outside [log start, log end]), FENCED_LEADER_EPOCH (an older epoch) or UNKNOWN_LEADER_EPOCH
(a newer one), and updates the follower's state only from a read that succeeded
(ReplicaManager.readFromLog / Partition.updateFollowerFetchState). The forged fetches come as raw
Fetch v12 frames with the real follower's replica id on the inter-broker listener (which holds
CLUSTER_ACTION), while that follower is paused so it cannot move the high watermark itself.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i32, i64
from waiting import wait_until

from odradek.client.wire import WireClient

from .test_hostile_interbroker import SplitCluster, consume, create, produce
from .zk import Ensemble

OFFSET_OUT_OF_RANGE = 1
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[SplitCluster]:
    c = SplitCluster(tmp_path, zookeeper, 3)
    for broker in c.brokers.values():  # a paused follower stays registered and in the ISR for the test
        broker.overrides.update({"zookeeper.session.timeout.ms": "30000", "replica.lag.time.max.ms": "60000"})
    c.start()
    yield c
    c.stop()


def fetch(addr: str, topic: str, replica_id: int, offset: int, leader_epoch: int = -1,
          max_wait_ms: int = 0, min_bytes: int = 0) -> tuple[int, int]:
    """A Fetch v12 of partition 0 as ``replica_id`` (-1: a consumer): (error code, high watermark)."""
    req = FetchRequest(
        cluster_id=None, replica_id=i32(replica_id), max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1),
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(leader_epoch), fetch_offset=i64(offset),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="",
    )
    fields = {f: getattr(req, f) for f in req.__dataclass_fields__ if not f.startswith("__")}
    with WireClient(addr, timeout=30) as w:
        resp = w.request(1, 12, **fields)
    (part,) = resp.responses[0].partitions
    return int(part.error_code), int(part.high_watermark)


def test_bogus_follower_offsets_never_move_the_high_watermark(cluster: SplitCluster) -> None:
    c = cluster
    leader = c.controller()
    assert leader is not None
    follower, first = (b for b in c.brokers if b != leader)
    # the first leader stops (controlled shutdown): ``leader`` takes over at epoch 1, so an older epoch exists
    create(c, "bogus", assignment=[[first, leader, follower]])
    produce(c, "bogus", 30, "a")  # 31 records, replicated: high watermark 31
    c.brokers[first].stop()
    wait_until(lambda: c.state("bogus", 0).get("leader") == leader and first not in c.state("bogus", 0)["isr"],
               30, "leadership moving to the second replica")
    epoch = int(c.state("bogus", 0)["leader_epoch"])
    assert epoch >= 1
    internal = c.internal_addr(leader)

    def high_watermark() -> int:
        code, hw = fetch(c.external(leader), "bogus", -1, 0)
        assert code == 0
        return hw

    # the new leader learns the follower's position at its next fetch
    wait_until(lambda: high_watermark() == 31, 30, "the high watermark at 31 under the new leader")
    c.pause(follower)
    try:
        p = Producer({"bootstrap.servers": c.external(leader), "acks": "1"})
        for i in range(10):
            p.produce("bogus", f"b-{i}".encode(), partition=0)
        assert p.flush(30) == 0  # the leader's log end is 41; the follower holds 31
        assert high_watermark() == 31
        answers = {
            "beyond the log end": fetch(internal, "bogus", follower, 1_000_000, epoch),
            "beyond the log end, no epoch": fetch(internal, "bogus", follower, 42),
            "negative": fetch(internal, "bogus", follower, -5, epoch),
            "beyond the log end, long poll": fetch(internal, "bogus", follower, 1_000_000, epoch,
                                                   max_wait_ms=500, min_bytes=1),
            "the log end at an old epoch": fetch(internal, "bogus", follower, 41, epoch - 1),
            "the log end at a future epoch": fetch(internal, "bogus", follower, 41, epoch + 1),
        }
        codes = {what: code for what, (code, _hw) in answers.items()}
        assert codes == {
            "beyond the log end": OFFSET_OUT_OF_RANGE,
            "beyond the log end, no epoch": OFFSET_OUT_OF_RANGE,
            "negative": OFFSET_OUT_OF_RANGE,
            "beyond the log end, long poll": OFFSET_OUT_OF_RANGE,
            "the log end at an old epoch": FENCED_LEADER_EPOCH,
            "the log end at a future epoch": UNKNOWN_LEADER_EPOCH,
        }, codes
        assert high_watermark() == 31, "a bogus follower offset moved the high watermark"
        # the control: an offset the follower could truly hold does count (the test can see a move)
        assert fetch(internal, "bogus", follower, 35, epoch)[0] == 0
        assert high_watermark() == 35
    finally:
        c.resume(follower)
    produce(c, "bogus", 10, "c")
    assert len(consume(c, "bogus", 52)) == 52
    assert follower in c.state("bogus", 0)["isr"]
