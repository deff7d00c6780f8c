"""A controller-only KRaft quorum of three ``odradek controller`` processes on loopback (KIP-595): it elects a
leader, replicates ``__cluster_metadata-0`` (the leader's NoOpRecords) to every voter with the high watermark
moving, survives a kill -9 of its leader with a new leader in a higher epoch and the committed prefix intact,
and the killed voter catches up once restarted."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_partitions.v3.request import CreatePartitionsTopic
from kio.schema.delete_topics.v6.request import DeleteTopicState
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32
from waiting import wait_until

from odradek.client import framer
from odradek.client.wire import WireClient
from odradek.kraft import wire
from odradek.kraft.raft_log import MetadataRaftLog
from odradek.metadata.log_store import MetadataLog
from odradek.protocol import codec, errors
from odradek.raft.log import LogEntry
from odradek.raft.messages import VoteRequest
from odradek.raft.quorum_store import kafka_uuid_str
from odradek.server import meta_properties as mp

from .kraft import Quorum, describe_cluster, describe_quorum, run_odradek


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(tmp_path)
    try:
        yield q.start()
    finally:
        q.stop()


def leader_view(q: Quorum, among: set[int] | None = None) -> Any:
    """DescribeQuorum as the leader answers it (the others answer NOT_LEADER_OR_FOLLOWER); None if no leader."""
    for node_id, c in q.controllers.items():
        if among is not None and node_id not in among:
            continue
        try:
            p = describe_quorum(c.address)
        except OSError:
            continue
        if p.error_code == 0 and p.leader_id == node_id:
            return p
    return None


def ends(p: Any) -> dict[int, int]:
    return {int(v.replica_id): int(v.log_end_offset) for v in p.current_voters}


def log_entries(data_dir: Path) -> list[LogEntry]:
    mlog = MetadataLog.open(data_dir, now_ms=0)
    try:
        return list(MetadataRaftLog(mlog, lambda: 0).read(0, 1 << 30))
    finally:
        mlog.close()


def test_quorum_elects_replicates_and_fails_over(quorum: Quorum) -> None:
    first = wait_until(lambda: leader_view(quorum), 30, "a leader")
    leader, epoch = int(first.leader_id), int(first.leader_epoch)
    assert sorted(ends(first)) == [1, 2, 3]
    # each voter's directory id (meta.properties of its metadata.log.dir), the followers' as their Fetch says it
    with_ids = wait_until(lambda: (p := leader_view(quorum)) is not None
                          and all(v.replica_directory_id is not None for v in p.current_voters) and p, 30,
                          "every voter's directory id")
    for v in with_ids.current_voters:
        stored = mp.read(quorum.controllers[int(v.replica_id)].data / "meta.properties")
        assert stored is not None and kafka_uuid_str(v.replica_directory_id) == stored["directory.id"]
    # DescribeCluster on any controller names the controllers and the active one (KIP-919)
    dc = describe_cluster(quorum.controllers[1].address)
    assert dc.error_code == 0 and dc.cluster_id == quorum.cluster_id and dc.controller_id == leader
    assert sorted(b.broker_id for b in dc.brokers) == [1, 2, 3]

    # the leader's NoOpRecords: every voter's log end and the high watermark move on
    hw0 = int(first.high_watermark)
    grown = wait_until(lambda: (p := leader_view(quorum)) is not None and p.high_watermark >= hw0 + 10
                       and min(ends(p).values()) >= hw0 + 10 and p, 30, "the log to grow on every voter")
    committed = int(grown.high_watermark)

    # kill -9 of the leader (as it is now: a loaded machine may have moved leadership since the first view): a new
    # leader among the survivors, in a higher epoch, within a few seconds
    current = wait_until(lambda: leader_view(quorum), 30, "the current leader")
    leader, epoch = int(current.leader_id), int(current.leader_epoch)
    survivors = set(quorum.controllers) - {leader}
    quorum.controllers[leader].kill()
    killed_at = time.monotonic()
    after = wait_until(lambda: (p := leader_view(quorum, survivors)) is not None and p.leader_epoch > epoch and p,
                       20, "a new leader after the kill")
    failover_s = time.monotonic() - killed_at
    print(f"new leader {int(after.leader_id)} in epoch {int(after.leader_epoch)} {failover_s:.2f}s after the kill")
    assert int(after.leader_id) in survivors
    assert failover_s < 15, failover_s
    # the committed prefix is kept: once the new leader knows its high watermark (-1 until an entry of its own
    # epoch commits, as in Kafka) it is past what was committed, and moves on with two voters of three
    moved = wait_until(lambda: (p := leader_view(quorum, survivors)) is not None
                       and p.high_watermark >= committed + 10 and p, 20, "the high watermark to move after the kill")
    new_leader = int(moved.leader_id)

    # the killed voter restarts and catches up
    quorum.controllers[leader].start()
    wait_until(lambda: (p := leader_view(quorum)) is not None and ends(p)[leader] >= p.high_watermark > committed
               and p, 30, "the restarted voter to catch up",
               detail=lambda: quorum.controllers[leader].log_tail(1500))

    quorum.stop()
    logs = {n: log_entries(c.data) for n, c in quorum.controllers.items()}
    shortest = min(len(entries) for entries in logs.values())
    assert shortest >= committed + 10
    # every voter holds the same log up to what they all have, the committed prefix included
    reference = logs[new_leader][:shortest]
    for n, entries in logs.items():
        assert entries[:shortest] == reference, n
    assert [e.offset for e in reference] == list(range(shortest))
    assert {e.epoch for e in reference[:committed]} <= set(range(1, epoch + 1))
    # the quorum-state of a static quorum (kraft.version 0): version 0, with the voters
    for c in quorum.controllers.values():
        state = json.loads((c.data / "__cluster_metadata-0" / "quorum-state").read_text())
        assert state["data_version"] == 0 and state["currentVoters"] == [{"voterId": v} for v in (1, 2, 3)]
        assert state["leaderEpoch"] >= int(after.leader_epoch)


def test_controller_refuses_unformatted_dir(tmp_path: Path) -> None:
    q = Quorum(tmp_path, n=1)
    c = q.controllers[1]
    p = run_odradek("controller", "--config", str(c.config))
    assert p.returncode == 1
    assert f"No `meta.properties` found in {c.data} (have you run `kafka-storage.sh` to format the directory?)" \
        in p.stderr


def test_a_leader_that_stops_resigns(tmp_path: Path) -> None:
    """SIGTERM: the leader resigns with EndQuorumEpoch and a survivor stands at once, long before the fetch
    timeout (10 s here) would have made it."""
    q = Quorum(tmp_path, extra={"controller.quorum.fetch.timeout.ms": "10000"}).start()
    try:
        first = wait_until(lambda: leader_view(q), 30, "a leader")
        leader, epoch = int(first.leader_id), int(first.leader_epoch)
        c = q.controllers[leader]
        c.stop()
        assert c.proc is not None and c.proc.returncode == 0, c.log_tail()
        stopped_at = time.monotonic()
        survivors = set(q.controllers) - {leader}
        after = wait_until(lambda: (p := leader_view(q, survivors)) is not None and p.leader_epoch > epoch and p,
                           30, "a new leader after the leader stopped")
        assert time.monotonic() - stopped_at < 5
        assert int(after.leader_id) in survivors
    finally:
        q.stop()


def test_bad_requests_close_their_connection_only(tmp_path: Path) -> None:
    q = Quorum(tmp_path, n=1).start()
    try:
        wait_until(lambda: leader_view(q), 30, "the single voter to lead")
        address = q.controllers[1].address
        vote = VoteRequest("other-cluster", 1, 5, 2, None, None, 1, 1, False)
        key, version, entity = wire.encode_request(vote)
        bad_topic = dataclasses.replace(entity, topics=(dataclasses.replace(entity.topics[0], topic_name="other"),))
        for api_key, api_version, body in ((key, version, codec.encode(bad_topic)),  # not __cluster_metadata-0
                                           (0, 9, b"\x00"),  # Produce: not a controller's API
                                           (key, version, b"\xff\xff")):  # not a Vote request
            with socket.create_connection(("127.0.0.1", q.controllers[1].port), timeout=5) as s:
                s.sendall(framer.encode_request(api_key, api_version, 7, "hostile", body, flexible_header=True))
                assert s.recv(100) == b""  # closed without an answer
        p = describe_quorum(address)
        assert p.error_code == 0 and p.leader_id == 1
        assert q.controllers[1].proc is not None and q.controllers[1].proc.poll() is None
    finally:
        q.stop()


def test_admin_requests_on_the_controller_listener(tmp_path: Path) -> None:
    """DeleteTopics, CreatePartitions and IncrementalAlterConfigs sent straight to the controller listener (as an
    admin client with ``--bootstrap-controller`` does), decided by the active controller: with
    ``delete.topic.enable=false`` every topic of a DeleteTopics is refused (TOPIC_DELETION_DISABLED, INVALID_REQUEST
    before v3), a topic that does not exist cannot grow nor have configs."""
    q = Quorum(tmp_path, n=1, extra={"delete.topic.enable": "false"}).start()
    try:
        wait_until(lambda: leader_view(q), 30, "the single voter to lead")
        address = q.controllers[1].address

        def delete(version: int) -> list[tuple[str, int]]:
            with WireClient(address, timeout=5) as c:
                if version >= 6:
                    r = c.request(20, version, timeout=timedelta(seconds=5), topics=(
                        DeleteTopicState(name=TopicName("a"), topic_id=None),
                        DeleteTopicState(name=TopicName("b"), topic_id=None)))
                else:
                    r = c.request(20, version, timeout=timedelta(seconds=5), topic_names=(TopicName("a"),))
            return [(t.name, int(t.error_code)) for t in r.responses]

        wait_until(lambda: delete(6) != [("a", errors.NOT_CONTROLLER), ("b", errors.NOT_CONTROLLER)], 30,
                   "the leader to activate")
        assert delete(6) == [("a", errors.TOPIC_DELETION_DISABLED), ("b", errors.TOPIC_DELETION_DISABLED)]
        assert delete(2) == [("a", errors.INVALID_REQUEST)]
        with WireClient(address, timeout=5) as c:
            r = c.request(37, 3, timeout=timedelta(seconds=5), validate_only=False, topics=(
                CreatePartitionsTopic(name=TopicName("a"), count=i32(3), assignments=None),))
            assert [(t.name, int(t.error_code)) for t in r.results] == [("a", errors.UNKNOWN_TOPIC_OR_PARTITION)]
            r = c.request(44, 1, validate_only=False, resources=(AlterConfigsResource(
                resource_type=i8(2), resource_name="a",
                configs=(AlterableConfig(name="retention.ms", config_operation=i8(0), value="1"),)),))
            [res] = r.responses
            assert (int(res.error_code), res.error_message) == (errors.UNKNOWN_TOPIC_OR_PARTITION,
                                                                "The topic 'a' does not exist.")
    finally:
        q.stop()
