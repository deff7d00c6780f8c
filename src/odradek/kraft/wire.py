"""KIP-595's RPCs on the wire: :mod:`odradek.raft.messages` to and from kio's entities.

KRaft sends each RPC for the one partition ``__cluster_metadata-0`` (Kafka's ``RaftUtil.singleton*``): the
topic and partition levels are added here on the way out and checked and removed on the way in. The
versions a controller sends are the ones Kafka 4.4 sends to a voter: Vote v2 (KIP-996's PreVote),
BeginQuorumEpoch v1, EndQuorumEpoch v1 (KIP-853's endpoints and directory ids) and Fetch v17 (the
fetcher's ReplicaState, the metadata topic's id ``Uuid.METADATA_TOPIC_ID``) and FetchSnapshot v1 (KIP-630,
the topic by name). Records travel as v2 batches (:mod:`odradek.kraft.raft_log`); a snapshot's chunk is its
file's bytes from the position asked, cut anywhere (``UnalignedRecords``).
"""

from __future__ import annotations

import datetime
import sys
import uuid
from types import ModuleType
from typing import Any

from odradek.kraft.raft_log import batches_to_entries, entries_to_batches
from odradek.protocol import codec
from odradek.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
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
    ReplicaInfo,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)

TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID: new Uuid(0L, 1L)
VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT = 52, 53, 54, 1, 59
SENT_VERSIONS = {VOTE: 2, BEGIN_QUORUM_EPOCH: 1, END_QUORUM_EPOCH: 1, FETCH: 17, FETCH_SNAPSHOT: 1}


class WireFormatError(Exception):
    """A KRaft RPC that is not for the one partition ``__cluster_metadata-0``."""


def request_module(api_key: int, version: int) -> ModuleType:
    cls = codec.request_class(api_key, version)
    assert cls is not None, (api_key, version)
    return sys.modules[cls.__module__]


def response_module(api_key: int, version: int) -> ModuleType:
    return codec.response_module(api_key, version)


def _uuid(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else value


class _Named:
    """FetchSnapshot's topic (``name``) as the other RPCs' (``topic_name``), for :func:`_one_partition`."""

    def __init__(self, topic: Any) -> None:
        self.topic_name = topic.name
        self.partitions = topic.partitions


def _named(topics: Any) -> tuple[_Named, ...]:
    return tuple(_Named(t) for t in topics)


def _one_partition(topics: Any, what: str) -> Any:
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireFormatError(f"{what} must carry exactly one topic and one partition")
    topic = topics[0]
    name = getattr(topic, "topic_name", None)
    topic_id = getattr(topic, "topic_id", None)
    if name is not None and name != TOPIC or topic_id is not None and topic_id != METADATA_TOPIC_ID:
        raise WireFormatError(f"{what} is for {name or topic_id}, not {TOPIC}")
    partition = topic.partitions[0]
    index = getattr(partition, "partition_index", getattr(partition, "partition", 0))
    if index != 0:
        raise WireFormatError(f"{what} is for partition {index}, not 0")
    return partition


# --- requests out / in -------------------------------------------------------------------------


def api_key_of(message: RaftRequest) -> int:
    if isinstance(message, VoteRequest):
        return VOTE
    if isinstance(message, BeginQuorumEpochRequest):
        return BEGIN_QUORUM_EPOCH
    if isinstance(message, EndQuorumEpochRequest):
        return END_QUORUM_EPOCH
    if isinstance(message, FetchSnapshotRequest):
        return FETCH_SNAPSHOT
    return FETCH


def encode_request(message: RaftRequest) -> tuple[int, int, Any]:
    """``(api key, version, kio request)`` of a request the core sends."""
    key = api_key_of(message)
    version = SENT_VERSIONS[key]
    m = request_module(key, version)
    if isinstance(message, VoteRequest):
        p = codec.make(m.PartitionData, partition_index=0, replica_epoch=message.replica_epoch,
                       replica_id=message.replica_id, replica_directory_id=message.replica_directory_id,
                       voter_directory_id=message.voter_directory_id, last_offset_epoch=message.last_offset_epoch,
                       last_offset=message.last_offset, pre_vote=message.pre_vote)
        return key, version, codec.make(m.VoteRequest, cluster_id=message.cluster_id, voter_id=message.voter_id,
                                        topics=(codec.make(m.TopicData, topic_name=TOPIC, partitions=(p,)),))
    if isinstance(message, BeginQuorumEpochRequest):
        p = codec.make(m.PartitionData, partition_index=0, voter_directory_id=message.voter_directory_id,
                       leader_id=message.leader_id, leader_epoch=message.leader_epoch)
        endpoints = tuple(codec.make(m.LeaderEndpoint, name=e.name, host=e.host, port=e.port)
                          for e in message.leader_endpoints)
        return key, version, codec.make(
            m.BeginQuorumEpochRequest, cluster_id=message.cluster_id, voter_id=message.voter_id,
            topics=(codec.make(m.TopicData, topic_name=TOPIC, partitions=(p,)),), leader_endpoints=endpoints)
    if isinstance(message, EndQuorumEpochRequest):
        candidates = tuple(codec.make(m.ReplicaInfo, candidate_id=c.candidate_id,
                                      candidate_directory_id=c.candidate_directory_id)
                           for c in message.preferred_candidates)
        p = codec.make(m.PartitionData, partition_index=0, leader_id=message.leader_id,
                       leader_epoch=message.leader_epoch, preferred_candidates=candidates)
        endpoints = tuple(codec.make(m.LeaderEndpoint, name=e.name, host=e.host, port=e.port)
                          for e in message.leader_endpoints)
        return key, version, codec.make(
            m.EndQuorumEpochRequest, cluster_id=message.cluster_id,
            topics=(codec.make(m.TopicData, topic_name=TOPIC, partitions=(p,)),), leader_endpoints=endpoints)
    if isinstance(message, FetchSnapshotRequest):
        ps = codec.make(m.PartitionSnapshot, partition=0, current_leader_epoch=message.current_leader_epoch,
                        snapshot_id=codec.make(m.SnapshotId, end_offset=message.snapshot_id.end_offset,
                                               epoch=message.snapshot_id.epoch),
                        position=message.position, replica_directory_id=message.replica_directory_id)
        return key, version, codec.make(
            m.FetchSnapshotRequest, cluster_id=message.cluster_id, replica_id=message.replica_id,
            max_bytes=message.max_bytes, topics=(codec.make(m.TopicSnapshot, name=TOPIC, partitions=(ps,)),))
    p = codec.make(m.FetchPartition, partition=0, current_leader_epoch=message.current_leader_epoch,
                   fetch_offset=message.fetch_offset, last_fetched_epoch=message.last_fetched_epoch,
                   log_start_offset=message.log_start_offset, partition_max_bytes=message.max_bytes,
                   replica_directory_id=message.replica_directory_id)
    return key, version, codec.make(
        m.FetchRequest, cluster_id=message.cluster_id,
        replica_state=codec.make(m.ReplicaState, replica_id=message.replica_id, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=message.max_wait_ms), min_bytes=0, max_bytes=message.max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(codec.make(m.FetchTopic, topic_id=METADATA_TOPIC_ID, partitions=(p,)),),
        forgotten_topics_data=(), rack_id="")


def decode_request(api_key: int, request: Any) -> tuple[int, RaftRequest]:
    """``(the replica that sent it, the core's request)`` of a KRaft request from the wire."""
    if api_key == VOTE:
        p = _one_partition(request.topics, "Vote")
        return int(p.replica_id), VoteRequest(
            request.cluster_id, int(getattr(request, "voter_id", -1)), int(p.replica_epoch), int(p.replica_id),
            _uuid(getattr(p, "replica_directory_id", None)), _uuid(getattr(p, "voter_directory_id", None)),
            int(p.last_offset_epoch), int(p.last_offset), bool(getattr(p, "pre_vote", False)))
    if api_key == BEGIN_QUORUM_EPOCH:
        p = _one_partition(request.topics, "BeginQuorumEpoch")
        return int(p.leader_id), BeginQuorumEpochRequest(
            request.cluster_id, int(getattr(request, "voter_id", -1)), _uuid(getattr(p, "voter_directory_id", None)),
            int(p.leader_id), int(p.leader_epoch))
    if api_key == END_QUORUM_EPOCH:
        p = _one_partition(request.topics, "EndQuorumEpoch")
        candidates = tuple(ReplicaInfo(int(c.candidate_id), _uuid(c.candidate_directory_id))
                           for c in getattr(p, "preferred_candidates", ()))
        return int(p.leader_id), EndQuorumEpochRequest(request.cluster_id, int(p.leader_id), int(p.leader_epoch),
                                                       candidates)
    if api_key == FETCH_SNAPSHOT:
        p = _one_partition(_named(request.topics), "FetchSnapshot")
        return int(request.replica_id), FetchSnapshotRequest(
            request.cluster_id, int(request.replica_id), int(p.current_leader_epoch),
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)), int(p.position),
            int(request.max_bytes), _uuid(getattr(p, "replica_directory_id", None)))
    p = _one_partition(request.topics, "Fetch")
    replica_id = int(request.replica_state.replica_id)
    max_wait = request.max_wait
    wait_ms = int(max_wait.total_seconds() * 1000) if isinstance(max_wait, datetime.timedelta) else int(max_wait)
    return replica_id, FetchRequest(
        request.cluster_id, replica_id, wait_ms, int(p.current_leader_epoch), int(p.fetch_offset),
        int(p.last_fetched_epoch), _uuid(p.replica_directory_id), int(p.log_start_offset),
        int(p.partition_max_bytes))


# --- responses out / in ------------------------------------------------------------------------


def encode_response(api_key: int, version: int, message: RaftResponse, now_ms: int) -> Any:
    """The kio response to a KRaft request, from the core's answer."""
    m = response_module(api_key, version)
    if isinstance(message, FetchSnapshotResponse):
        ps = codec.make(
            m.PartitionSnapshot, index=0, error_code=message.error_code,
            snapshot_id=codec.make(m.SnapshotId, end_offset=message.snapshot_id.end_offset,
                                   epoch=message.snapshot_id.epoch),
            current_leader=codec.make(m.LeaderIdAndEpoch, leader_id=message.current_leader.leader_id,
                                      leader_epoch=message.current_leader.leader_epoch),
            size=message.size, position=message.position, unaligned_records=message.unaligned_records)
        return codec.make(m.FetchSnapshotResponse, throttle_time=0, error_code=0,
                          topics=(codec.make(m.TopicSnapshot, name=TOPIC, partitions=(ps,)),), node_endpoints=())
    if isinstance(message, FetchResponse):
        records = entries_to_batches(message.records, now_ms) if message.records else None
        p = codec.make(
            m.PartitionData, partition_index=0, error_code=message.error_code,
            high_watermark=message.high_watermark, last_stable_offset=-1, log_start_offset=message.log_start_offset,
            diverging_epoch=codec.make(m.EpochEndOffset, epoch=message.diverging_epoch.epoch,
                                       end_offset=message.diverging_epoch.end_offset),
            current_leader=codec.make(m.LeaderIdAndEpoch, leader_id=message.current_leader.leader_id,
                                      leader_epoch=message.current_leader.leader_epoch),
            snapshot_id=codec.make(m.SnapshotId, end_offset=message.snapshot_id.end_offset,
                                   epoch=message.snapshot_id.epoch),
            aborted_transactions=None, preferred_read_replica=-1, records=records)
        return codec.make(m.FetchResponse, throttle_time=0, error_code=0, session_id=0,
                          responses=(codec.make(m.FetchableTopicResponse, topic_id=METADATA_TOPIC_ID,
                                                partitions=(p,)),), node_endpoints=())
    fields: dict[str, Any] = {"partition_index": 0, "error_code": message.error_code,
                              "leader_id": message.leader_id, "leader_epoch": message.leader_epoch}
    if isinstance(message, VoteResponse):
        fields["vote_granted"] = message.vote_granted
    p = codec.make(m.PartitionData, **fields)
    top = {VOTE: "VoteResponse", BEGIN_QUORUM_EPOCH: "BeginQuorumEpochResponse",
           END_QUORUM_EPOCH: "EndQuorumEpochResponse"}[api_key]
    return codec.make(getattr(m, top), error_code=0,
                      topics=(codec.make(m.TopicData, topic_name=TOPIC, partitions=(p,)),), node_endpoints=())


def decode_response(api_key: int, response: Any) -> RaftResponse:
    """The core's response from a kio one; a top-level error stands for the partition's."""
    top = int(response.error_code)
    if api_key == FETCH:
        p = _one_partition(response.responses, "Fetch response")
        records = tuple(batches_to_entries(p.records)) if p.records else ()
        return FetchResponse(
            top or int(p.error_code), int(p.high_watermark),
            LeaderIdAndEpoch(int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)),
            EpochEndOffset(int(p.diverging_epoch.epoch), int(p.diverging_epoch.end_offset)), records,
            int(p.log_start_offset), SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)))
    if api_key == FETCH_SNAPSHOT:
        p = _one_partition(_named(response.topics), "FetchSnapshot response")
        return FetchSnapshotResponse(
            top or int(p.error_code), LeaderIdAndEpoch(int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)),
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)), int(p.size), int(p.position),
            bytes(p.unaligned_records or b""))
    p = _one_partition(response.topics, "response")
    error = top or int(p.error_code)
    if api_key == VOTE:
        return VoteResponse(error, int(p.leader_id), int(p.leader_epoch), bool(p.vote_granted))
    if api_key == BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochResponse(error, int(p.leader_id), int(p.leader_epoch))
    return EndQuorumEpochResponse(error, int(p.leader_id), int(p.leader_epoch))


def failed_response(message: RaftRequest, error: int) -> RaftResponse:
    """What the core hears when a request could not be sent or answered (Kafka's handleUnexpectedError):
    the error, and an epoch that tells it nothing (-1)."""
    if isinstance(message, VoteRequest):
        return VoteResponse(error, -1, -1, False)
    if isinstance(message, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(error, -1, -1)
    if isinstance(message, EndQuorumEpochRequest):
        return EndQuorumEpochResponse(error, -1, -1)
    if isinstance(message, FetchSnapshotRequest):
        return FetchSnapshotResponse(error, LeaderIdAndEpoch(-1, -1))
    return FetchResponse(error, -1, LeaderIdAndEpoch(-1, -1))
