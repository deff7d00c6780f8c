"""Tiered storage (KIP-405) on three brokers over ZooKeeper, with the filesystem store on a directory all three
share, a topic of replication factor 3 and ``__remote_log_metadata`` of replication factor 2 (one broker holds no
replica of the topic's metadata partition and reads it with Fetch requests to its leader):

- every replica's local log shrinks to the tail: followers read ``__remote_log_metadata`` (Kafka's
  TopicBasedRemoteLogMetadataManager consumes the metadata partitions of the partitions a broker hosts) and
  apply ``local.retention.*`` to what is copied;
- the leader is killed with SIGKILL: the new leader goes on copying from the highest offset copied, with no gap
  and no two remote segments over the same offsets (a copy the old leader left unfinished is deleted);
- the killed broker's log dir is wiped and it is restarted: it fetches below the leader's local log start, gets
  OFFSET_MOVED_TO_TIERED_STORAGE, builds its state from the remote tier (Kafka's TierStateMachine) and fetches
  only the local tail before it is back in the ISR;
- a consumer reads every record from offset 0 byte for byte;
- deleting the topic deletes its remote segments (DELETE_PARTITION_* records).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from integration.test_tiered_broker import metadata_events, remote_segments, tiered_overrides
from waiting import wait_until

from odradek.tiered.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)

from .cluster import Cluster
from .test_replication import create, drain
from .zk import Ensemble

SEGMENT = 16384
LOCAL_RETENTION = 3 * SEGMENT
TOPIC = "tiered"
S = RemoteLogSegmentState


def _produce(c: Cluster, start: int, count: int) -> list[bytes]:
    values = [f"{i:08d}:".encode() + bytes([i % 251]) * 400 for i in range(start, start + count)]
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "batch.size": 4096, "linger.ms": 1,
                  "enable.idempotence": True})
    for v in values:
        p.produce(TOPIC, v, partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    return values


def _local_bytes(c: Cluster, b: int) -> int:
    return sum(f.stat().st_size for f in c.brokers[b].segment_files(TOPIC))


def _local_start(c: Cluster, b: int) -> int:
    files = c.brokers[b].segment_files(TOPIC)
    return int(files[0].name[:-4]) if files else -1


def _finished_ranges(c: Cluster) -> list[tuple[int, int]]:
    """(start, end) of every remote segment whose copy finished and that was not deleted."""
    events = [rec for _, rec in metadata_events(c.bootstrap, TOPIC)]
    segments: dict[Any, RemoteLogSegmentMetadata] = {}
    state: dict[Any, RemoteLogSegmentState] = {}
    for rec in events:
        if isinstance(rec, RemoteLogSegmentMetadata):
            segments[rec.segment_id] = rec
            state[rec.segment_id] = rec.state
        elif isinstance(rec, RemoteLogSegmentMetadataUpdate):
            state[rec.segment_id] = rec.state
    return sorted((m.start_offset, m.end_offset) for sid, m in segments.items()
                  if state[sid] is S.COPY_SEGMENT_FINISHED)


def _contiguous(ranges: list[tuple[int, int]]) -> None:
    assert ranges and ranges[0][0] == 0, ranges[:3]
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert start == end + 1, f"a gap or an overlap between {end} and {start}: {ranges}"


@pytest.mark.timeout(420)
def test_tiered_storage_on_three_brokers(tmp_path: Path, zookeeper: Ensemble) -> None:
    remote = tmp_path / "remote"
    overrides = {**tiered_overrides(remote), "rlmm.config.remote.log.metadata.topic.replication.factor": "2",
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "5"}
    c = Cluster(tmp_path, zookeeper, 3, overrides).start()
    try:
        create(c, TOPIC, 1, 3, **{"remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
                                  "local.retention.bytes": str(LOCAL_RETENTION), "min.insync.replicas": "1"})
        values = _produce(c, 0, 3000)  # ~1.2 MB: ~75 segments
        wait_until(lambda: len(remote_segments(remote, TOPIC)) >= 60, 90, "the closed segments copied")
        # every replica keeps the tail only (the active segment, local.retention.bytes, at most one more)
        tail = LOCAL_RETENTION + 3 * SEGMENT
        wait_until(lambda: all(_local_bytes(c, b) <= tail for b in c.brokers), 60,
                   "every replica's local log shrunk to the tail")
        _contiguous(_finished_ranges(c))

        leader = c.leader(TOPIC, 0)
        c.kill(leader)  # SIGKILL, perhaps mid-copy
        wait_until(lambda: c.leader(TOPIC, 0) not in (-1, leader), 30, "a new leader")
        new_leader = c.leader(TOPIC, 0)
        before = len(_finished_ranges(c))
        values += _produce(c, 3000, 1500)
        wait_until(lambda: len(_finished_ranges(c)) >= before + 30, 90, "the new leader copying on")
        ranges = _finished_ranges(c)
        _contiguous(ranges)
        assert len(set(ranges)) == len(ranges)

        # the killed broker comes back with an empty log dir: only the leader's local tail is fetched
        shutil.rmtree(c.brokers[leader].logdir)
        c.brokers[leader].logdir.mkdir()
        c.brokers[leader].start()
        wait_until(lambda: leader in c.state(TOPIC, 0)["isr"], 90, "the wiped broker back in the ISR")
        total = sum(len(v) for v in values)
        fetched, start = _local_bytes(c, leader), _local_start(c, leader)
        leader_start = _local_start(c, new_leader)
        remote_bytes = sum(f.stat().st_size for f in remote.rglob("*.log"))
        print(f"FIGURES wiped follower: fetched {fetched} bytes, local log start {start}; the partition holds "
              f"{len(values)} records ({total} value bytes), {remote_bytes} bytes in {len(ranges)} remote segments "
              f"+ the leader's {_local_bytes(c, new_leader)} local bytes from {leader_start}")
        assert start > 0 and fetched < total // 4

        got = drain(c.bootstrap, TOPIC, 1)[0]
        assert got == values

        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(30)
        wait_until(lambda: not remote_segments(remote, TOPIC), 60, "the remote segments deleted")
    finally:
        c.stop()
