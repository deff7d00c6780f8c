"""Group coordinator writes are acknowledged only once replicated (issue 12, item 8).

__consumer_offsets has replication factor 3; with both followers of the coordinator stopped
(SIGSTOP), a SyncGroup, OffsetCommit, Heartbeat or LeaveGroup whose records are not replicated
is not answered: Kafka's coordinator appends with acks=-1 and answers in the append callback,
COORDINATOR_NOT_AVAILABLE when offsets.commit.timeout.ms passes first (REQUEST_TIMED_OUT mapped
as GroupMetadataManager maps append errors), and success once the followers catch up.
ZooKeeper sessions and replica.lag.time.max.ms are long enough here that the stopped followers
stay in the ISR for the whole test.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.join_group.v5.request import JoinGroupRequestProtocol
from kio.schema.leave_group.v3.request import MemberIdentity
from kio.schema.offset_commit.v7.request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kio.schema.sync_group.v3.request import SyncGroupRequestAssignment
from kio.static.primitive import i8, i32, i64
from waiting import wait_until

from odradek.client.wire import WireClient

from .cluster import Cluster
from .zk import Ensemble

COMMIT_TIMEOUT_MS = 3000
NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, MEMBER_ID_REQUIRED = 0, 14, 15, 16, 79


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3, {
        "offsets.topic.replication.factor": "3",
        "offsets.commit.timeout.ms": str(COMMIT_TIMEOUT_MS),
        "zookeeper.session.timeout.ms": "30000",
        "replica.lag.time.max.ms": "60000",
    }).start()
    yield c
    for b in c.brokers:
        if c.brokers[b].running:
            c.resume(b)
    c.stop()


def _coordinator(c: Cluster, group: str) -> int:
    def find() -> int | None:
        with WireClient(c.bootstrap.split(",")[0]) as w:
            r = w.request(10, 3, key=group, key_type=i8(0))
        return int(r.node_id) if r.error_code == 0 else None

    node = wait_until(find, 30, "a coordinator")
    # every replica of __consumer_offsets in sync before followers are stopped
    wait_until(lambda: all(len(c.state("__consumer_offsets", p).get("isr", [])) == 3 for p in range(6)), 30,
               "__consumer_offsets fully in sync")
    return int(node)


def _join(w: WireClient, group: str) -> tuple[str, int] | None:
    """Join as a new member; None when the broker is not (or not yet) the group's coordinator, as a
    client would then find the coordinator again (leadership of __consumer_offsets may still move
    while the cluster settles: the controller's preferred leader election)."""
    fields: dict[str, Any] = dict(
        group_id=group, session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\0\0\0\0\0\0\0\0"),),
    )
    r = w.request(11, 5, **fields)
    if r.error_code in (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE):
        return None  # all three send a client back to FindCoordinator
    assert r.error_code == MEMBER_ID_REQUIRED
    r = w.request(11, 5, **dict(fields, member_id=r.member_id))
    assert r.error_code == NONE, r
    return str(r.member_id), int(r.generation_id)


def _sync(w: WireClient, group: str, member: str, gen: int) -> Any:
    return w.request(14, 3, group_id=group, generation_id=i32(gen), member_id=member, group_instance_id=None,
                     assignments=(SyncGroupRequestAssignment(member_id=member, assignment=b"assignment"),))


def _commit(w: WireClient, group: str, member: str, gen: int, offset: int) -> Any:
    return w.request(8, 7, group_id=group, generation_id_or_member_epoch=i32(gen), member_id=member,
                     group_instance_id=None, topics=(OffsetCommitRequestTopic(name="data", partitions=(
                         OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                                      committed_leader_epoch=i32(-1), committed_metadata=""),)),))


def _still_pending(f: Future[Any], seconds: float) -> bool:
    time.sleep(seconds)
    return not f.done()


def test_group_writes_are_answered_once_replicated(cluster: Cluster) -> None:
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("data", 1, 1)])["data"].result(30)
    group = "replicated-writes"
    deadline = time.monotonic() + 60
    while True:
        coord = _coordinator(c, group)
        w = WireClient(c.brokers[coord].bootstrap)
        joined = _join(w, group)
        if joined is not None:
            break
        w.close()
        assert time.monotonic() < deadline, "no broker would coordinate the group"
        time.sleep(0.5)
    member, gen = joined
    followers = [b for b in c.brokers if b != coord]
    pool = ThreadPoolExecutor(2)
    with w:
        for b in followers:
            c.pause(b)
        try:
            # SyncGroup writes the group's assignment: no answer until replicated, then the timeout's
            t0 = time.monotonic()
            sync = pool.submit(_sync, w, group, member, gen)
            assert _still_pending(sync, 1.5), f"SyncGroup answered before its write was replicated: {sync.result()}"
            r = sync.result(COMMIT_TIMEOUT_MS / 1000 + 10)
            assert r.error_code == COORDINATOR_NOT_AVAILABLE, r
            assert time.monotonic() - t0 >= COMMIT_TIMEOUT_MS / 1000 - 0.2
            # an offset commit: answered with success once the followers catch up
            commit = pool.submit(_commit, w, group, member, gen, 42)
            assert _still_pending(commit, 1.0), f"OffsetCommit answered before replicated: {commit.result()}"
        finally:
            for b in followers:
                c.resume(b)
        r = commit.result(15)
        assert [p.error_code for t in r.topics for p in t.partitions] == [NONE], r
        # all replicated now: answered at once
        t0 = time.monotonic()
        r = _commit(w, group, member, gen, 43)
        assert [p.error_code for t in r.topics for p in t.partitions] == [NONE], r
        assert time.monotonic() - t0 < 2.0
        # the member leaves (the now empty group is written), then the group is deleted (tombstones)
        for b in followers:
            c.pause(b)
        try:
            leave = pool.submit(lambda: w.request(13, 3, group_id=group, members=(
                MemberIdentity(member_id=member, group_instance_id=None),)))
            assert _still_pending(leave, 1.0), f"LeaveGroup answered before replicated: {leave.result()}"
        finally:
            for b in followers:
                c.resume(b)
        r = leave.result(15)
        assert r.error_code == NONE and [m.error_code for m in r.members] == [NONE], r
        with WireClient(c.brokers[coord].bootstrap) as w2:
            for b in followers:
                c.pause(b)
            try:
                delete = pool.submit(lambda: w2.request(42, 2, groups_names=(group,)))
                assert _still_pending(delete, 1.0), f"DeleteGroups answered before replicated: {delete.result()}"
            finally:
                for b in followers:
                    c.resume(b)
            r = delete.result(15)
            assert [x.error_code for x in r.results] == [NONE], r
    pool.shutdown()
