"""The network slice of KRaft without sockets: ``__cluster_metadata-0`` as the raft core's log, KIP-595's RPCs
through kio and back, the controller's settings and its start-up checks of the formatted directories."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from kio.serial import entity_reader

from odradek.config import ConfigError
from odradek.kraft import wire
from odradek.kraft.controller import ControllerConfig, check_formatted, parse_voters
from odradek.kraft.raft_log import MetadataRaftLog
from odradek.metadata.log_store import MetadataLog, MetadataLogConfig
from odradek.protocol import codec, errors
from odradek.raft.client import RaftReplica
from odradek.raft.log import InMemoryRaftLog, LeaderChangeMessage, LogEntry, OffsetAndEpoch
from odradek.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Effect,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    RaftRequest,
    RaftResponse,
    Received,
    ReplicaInfo,
    Send,
    SnapshotId,
    Truncated,
    VoteRequest,
    VoteResponse,
)
from odradek.server import meta_properties as mp

from ..raft.harness import Harness


def disk_log(path: Path) -> MetadataRaftLog:
    return MetadataRaftLog(MetadataLog.open(path, now_ms=1000), lambda: 1000)


ENTRIES = [LogEntry(0, 1, LeaderChangeMessage(1, (1, 2, 3), (1, 2))), LogEntry(1, 1, b"a"), LogEntry(2, 1, b"b"),
           LogEntry(3, 3, LeaderChangeMessage(2, (1, 2, 3), (2, 3))), LogEntry(4, 3, b"c"), LogEntry(5, 4, b"d")]


def test_a_read_never_splits_a_batch(tmp_path: Path) -> None:
    """One write of the controller is one batch (a topic's TopicRecord and PartitionRecords): a Fetch answer
    holds all of it or none of it, so a Kafka broker observing the log never applies half a topic (it did:
    its Fetch asks for a partition max bytes of 0, and the answer was one record)."""
    log = disk_log(tmp_path)
    log.append([LogEntry(0, 1, b"topic"), LogEntry(1, 1, b"partition-0"), LogEntry(2, 1, b"partition-1")])
    log.append([LogEntry(3, 1, b"noop")])
    assert [e.value for e in log.read(0, 1)] == [b"topic", b"partition-0", b"partition-1"]
    assert [e.value for e in log.read(1, 1)] == [b"partition-0", b"partition-1"]
    assert [e.value for e in log.read(0, 27)] == [b"topic", b"partition-0", b"partition-1"]  # 26 bytes + 4 > 27
    assert [e.value for e in log.read(0, 1 << 20)] == [b"topic", b"partition-0", b"partition-1", b"noop"]
    log.mlog.close()


def test_metadata_raft_log_behaves_as_the_in_memory_log_and_persists(tmp_path: Path) -> None:
    disk, memory = disk_log(tmp_path), InMemoryRaftLog()
    for log in (disk, memory):
        assert log.end_offset() == 0 and log.last_fetched_epoch() == 0
        log.append(ENTRIES[:3])
        log.append(ENTRIES[3:5])
        log.append(ENTRIES[5:])
    for log in (disk, memory):
        assert log.end_offset() == 6 and log.last_fetched_epoch() == 4
        assert [log.end_offset_for_epoch(e) for e in range(6)] == [
            OffsetAndEpoch(0, 0), OffsetAndEpoch(1, 3), OffsetAndEpoch(1, 3), OffsetAndEpoch(3, 5),
            OffsetAndEpoch(4, 6), OffsetAndEpoch(4, 6)]
        assert list(log.read(0, 1 << 20)) == ENTRIES
        assert list(log.read(4, 1 << 20)) == ENTRIES[4:]
        # at least one entry, at most max_bytes; the disk log never splits a batch (entries 1 and 2 are one)
        assert list(log.read(1, 1)) == (ENTRIES[1:3] if log is disk else ENTRIES[1:2])
        log.truncate_to(3)
        assert log.end_offset() == 3 and log.end_offset_for_epoch(3) == OffsetAndEpoch(1, 3)
    disk.mlog.close()
    reopened = disk_log(tmp_path)
    assert list(reopened.read(0, 1 << 20)) == ENTRIES[:3] and reopened.last_fetched_epoch() == 1
    reopened.mlog.close()


REQUESTS: list[tuple[int, RaftRequest]] = [
    (2, VoteRequest("cid", 3, 5, 2, uuid.uuid4(), None, 4, 17, True)),
    (1, BeginQuorumEpochRequest("cid", 2, uuid.uuid4(), 1, 7)),
    (1, EndQuorumEpochRequest("cid", 1, 7, (ReplicaInfo(3, uuid.uuid4()), ReplicaInfo(2)))),
    (3, FetchRequest("cid", 3, 500, 7, 42, 6, uuid.uuid4(), -1, 1024)),
    (3, FetchSnapshotRequest("cid", 3, 7, SnapshotId(40, 6), 1024, 4096, uuid.uuid4())),
]


@pytest.mark.parametrize(("source", "message"), REQUESTS, ids=lambda x: type(x).__name__)
def test_requests_go_through_kio_and_back(source: int, message: RaftRequest) -> None:
    key, version, entity = wire.encode_request(message)
    assert version == wire.SENT_VERSIONS[key]
    decoded = codec.decode_request(key, version, codec.encode(entity), 0)
    assert wire.decode_request(key, decoded) == (source, message)


RESPONSES: list[tuple[int, RaftResponse]] = [
    (wire.VOTE, VoteResponse(errors.NONE, -1, 5, True)),
    (wire.BEGIN_QUORUM_EPOCH, BeginQuorumEpochResponse(errors.FENCED_LEADER_EPOCH, 2, 8)),
    (wire.END_QUORUM_EPOCH, EndQuorumEpochResponse(errors.NONE, 1, 7)),
    (wire.FETCH, FetchResponse(errors.NONE, 3, LeaderIdAndEpoch(1, 4), records=tuple(ENTRIES))),
    (wire.FETCH, FetchResponse(errors.NONE, 2, LeaderIdAndEpoch(1, 4), EpochEndOffset(1, 3))),
    (wire.FETCH, FetchResponse(errors.NONE, 9, LeaderIdAndEpoch(1, 4), log_start_offset=7,
                               snapshot_id=SnapshotId(7, 3))),
    (wire.FETCH_SNAPSHOT, FetchSnapshotResponse(errors.NONE, LeaderIdAndEpoch(1, 4), SnapshotId(7, 3), 300, 100,
                                                b"\x00" * 50)),
    (wire.FETCH_SNAPSHOT, FetchSnapshotResponse(errors.SNAPSHOT_NOT_FOUND, LeaderIdAndEpoch(1, 4))),
]


@pytest.mark.parametrize(("key", "message"), RESPONSES, ids=lambda x: type(x).__name__)
def test_responses_go_through_kio_and_back(key: int, message: RaftResponse) -> None:
    version = wire.SENT_VERSIONS[key]
    data = codec.encode(wire.encode_response(key, version, message, 1000))
    entity, _ = entity_reader(codec.response_class(key, version))(data, 0)
    assert wire.decode_response(key, entity) == message


def test_a_request_for_another_partition_is_refused() -> None:
    key, version, entity = wire.encode_request(REQUESTS[0][1])
    topic = entity.topics[0]
    other = dataclasses.replace(entity, topics=(dataclasses.replace(topic, topic_name="other"),))
    with pytest.raises(wire.WireFormatError, match="not __cluster_metadata"):
        wire.decode_request(key, other)


class WireHarness(Harness):
    """The unit harness with ``__cluster_metadata-0`` on disk as every replica's log and every message through
    kio's encoding and back."""

    def __init__(self, base: Path) -> None:
        self._keys: dict[tuple[int, int, int], int] = {}  # (responder, requester, correlation id) -> api key
        super().__init__(3)
        for i in self.ids:
            self.logs[i] = disk_log(base / f"n{i}")  # type: ignore[assignment]
            self.start(i)

    def deliver(self, source: int, send: Send) -> list[Effect]:
        m = send.message
        if isinstance(m, (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                          FetchSnapshotRequest)):
            key, version, entity = wire.encode_request(m)
            src, m2 = wire.decode_request(key, codec.decode_request(key, version, codec.encode(entity), 0))
            assert src == source
            self._keys[(send.destination, source, send.correlation_id)] = key
        else:
            key = self._keys.pop((source, send.destination, send.correlation_id))
            version = wire.SENT_VERSIONS[key]
            data = codec.encode(wire.encode_response(key, version, m, self.now))
            m2 = wire.decode_response(key, entity_reader(codec.response_class(key, version))(data, 0)[0])
        return self._took(send.destination, self.replicas[send.destination].handle(
            Received(source, send.correlation_id, m2), self.now))


def test_replication_and_divergence_over_the_wire_on_disk_logs(tmp_path: Path) -> None:
    h = WireHarness(tmp_path)
    h.elect(1)
    h.append(1, b"a")
    h.replicate()
    assert all(h.logs[i].end_offset() == 2 for i in h.ids)
    # the leader appends what nobody fetches, then is cut off; 2 leads in a later epoch
    h.append(1, b"lost1", b"lost2")
    h.pending.clear()
    h.tick(3, h.now + h.config.fetch_timeout_ms + 1)  # 3 stops hearing from 1 (its PreVotes are lost)
    h.pending.clear()
    h.tick(2)
    h.deliver_all(drop=lambda s, m: 1 in (s, m.destination))
    assert h.replicas[2].is_leader()
    h.append(2, b"d")
    h.replicate()
    h.pending.clear()
    # 1 restarts from its disk: told of the leader (BeginQuorumEpoch), it truncates its uncommitted tail and
    # catches up
    h.start(1)
    h.replicate(6)
    two: RaftReplica = h.replicas[2]
    assert two.is_leader(), [r.state for r in h.replicas.values()]
    assert Truncated(2) in h.effects[1]
    assert h.logs[1].read(0, 1 << 20) == h.logs[2].read(0, 1 << 20)
    values = [e.value for e in h.logs[1].read(0, 1 << 20) if isinstance(e.value, bytes)]
    assert values == [b"a", b"d"]


BASE = {"process.roles": "controller", "node.id": "2", "controller.quorum.voters": "1@h1:9093,2@h2:9094,3@h3:9095",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": "/m"}


def test_controller_config() -> None:
    assert parse_voters("1@a:1, 2@[::1]:2") == {1: parse_voters("1@a:1")[1], 2: parse_voters("2@::1:2")[2]}
    cfg = ControllerConfig.from_properties({**BASE, "controller.quorum.election.timeout.ms": "300",
                                            "controller.quorum.append.linger.ms": "5", "socket.send.buffer.bytes": "1"})
    assert (cfg.node_id, cfg.host, cfg.port, cfg.metadata_log_dir) == (2, "h2", 9094, Path("/m"))
    assert cfg.quorum.election_timeout_ms == 300 and cfg.max_idle_interval_ms == 500
    assert cfg.ignored == ("controller.quorum.append.linger.ms", "socket.send.buffer.bytes")
    assert cfg.delete_topic_enable
    snap = ControllerConfig.from_properties({**BASE, "metadata.log.max.record.bytes.between.snapshots": "4096",
                                             "metadata.log.max.snapshot.interval.ms": "0",
                                             "metadata.max.retention.bytes": "-1", "metadata.max.retention.ms": "10"})
    assert snap.ignored == ()
    assert (snap.metadata_log.max_record_bytes_between_snapshots, snap.metadata_log.max_snapshot_interval_ms,
            snap.metadata_log.retention_bytes, snap.metadata_log.retention_ms) == (4096, 0, -1, 10)
    assert not ControllerConfig.from_properties({**BASE, "delete.topic.enable": "False"}).delete_topic_enable
    for bad, match in [({"process.roles": "broker,controller"}, "combined"), ({"node.id": "7"}, "must be included"),
                       ({"delete.topic.enable": "yes"}, "Expected value to be either true or false"),
                       ({"controller.quorum.voters": "1@h1"}, "Unable to parse"),
                       ({"controller.listener.names": ""}, "controller.listener.names"),
                       ({"listener.security.protocol.map": "CONTROLLER:SSL"}, "must be PLAINTEXT")]:
        with pytest.raises(ConfigError, match=match):
            ControllerConfig.from_properties({**BASE, **bad})


def test_unformatted_or_mismatched_directories_are_refused(tmp_path: Path) -> None:
    meta, data = tmp_path / "meta", tmp_path / "data"
    cfg = ControllerConfig.from_properties({**BASE, "metadata.log.dir": str(meta), "log.dirs": str(data)})
    with pytest.raises(ConfigError, match=r"No `meta.properties` found in .*meta \(have you run `kafka-storage.sh`"):
        check_formatted(cfg)
    mp.write_v1(meta, "AAAAAAAAAAAAAAAAAAAAAQ", 2, "BBBBBBBBBBBBBBBBBBBBBQ")
    mp.write_v1(data, "CCCCCCCCCCCCCCCCCCCCCQ", 2, "DDDDDDDDDDDDDDDDDDDDDQ")
    with pytest.raises(ConfigError, match=r"Invalid cluster.id in: .*data/meta.properties. Expected "
                                          r"AAAAAAAAAAAAAAAAAAAAAQ, but read CCCCCCCCCCCCCCCCCCCCCQ"):
        check_formatted(cfg)
    mp.write_v1(data, "AAAAAAAAAAAAAAAAAAAAAQ", 3, "DDDDDDDDDDDDDDDDDDDDDQ")
    with pytest.raises(ConfigError, match="Stored node id 3 doesn't match previous node id 2"):
        check_formatted(cfg)
    mp.write_v1(data, "AAAAAAAAAAAAAAAAAAAAAQ", 2, "DDDDDDDDDDDDDDDDDDDDDQ")
    assert check_formatted(cfg) == ("AAAAAAAAAAAAAAAAAAAAAQ", "BBBBBBBBBBBBBBBBBBBBBQ")


def test_reads_find_their_batch_across_segments(tmp_path: Path) -> None:
    mlog = MetadataLog.open(tmp_path, MetadataLogConfig(segment_bytes=300), now_ms=1000)
    log = MetadataRaftLog(mlog, lambda: 1000)
    entries = [LogEntry(i, 1 + i // 10, f"value-{i}".encode()) for i in range(60)]
    for i in range(0, 60, 3):
        log.append(entries[i : i + 3])
    assert len(mlog.log.segments) > 3
    for start in (0, 1, 17, 31, 59):
        assert log.read(start, 1 << 20)[0] == entries[start]
        assert list(log.read(start, 1 << 20)) == entries[start : start + len(log.read(start, 1 << 20))]
    assert log.read(60, 1 << 20) == ()
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 30)
    mlog.close()
