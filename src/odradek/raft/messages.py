"""The messages the Raft core takes and gives: KIP-595's RPCs with Kafka's field names, and its effects.

Each request and response is the one partition of ``__cluster_metadata`` that KRaft sends (Kafka's
``RaftUtil.singleton*Request``): the topic and partition levels of the wire schema (kio's
``vote.v2``, ``begin_quorum_epoch.v1``, ``end_quorum_epoch.v1``, ``fetch.v17``) are left out, their
fields kept under the schema's names (snake case, as kio spells them), so that the network slice
wraps them in the single topic and partition and unwraps them without translation. A response's
``error_code`` is the partition-level one; a top-level error (INCONSISTENT_CLUSTER_ID, a failed or
timed-out request) comes in the same field, as the core treats both alike (Kafka's
``handleTopLevelError`` / ``handleUnexpectedError``: back off and retry).

Directory ids (KIP-853) are carried as optional UUIDs; ``None`` is Kafka's zero UUID. The endpoints of
KIP-853 (``leader_endpoints`` of BeginQuorumEpoch and EndQuorumEpoch requests, ``node_endpoints`` of the
responses) are carried for the wire and not read by the core: with a static ``controller.quorum.voters``
every voter's endpoint is configured, and the network slice fills them from there.

The core is driven by :class:`Received` (a request or response from a replica, with the
correlation id of the request) and answers with effects: :class:`Send` (a request, with a new
correlation id, or the response to a request, with its correlation id), and the log and quorum
changes it made: :class:`Appended`, :class:`Truncated`, :class:`HighWatermarkChanged`,
:class:`LeaderChanged` (what Kafka's ``RaftClient.Listener`` hears as ``handleCommit`` and
``handleLeaderChange``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.raft.log import LogEntry

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    """A request's LeaderEndpoints entry (BeginQuorumEpoch, EndQuorumEpoch)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A response's NodeEndpoints entry (tagged field 0 of Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch)."""

    node_id: int
    host: str
    port: int


# --- Vote (API 52, KIP-595; PreVote of KIP-996) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    voter_id: int  # the replica receiving the request
    replica_epoch: int  # the candidate's epoch; for a PreVote the epoch it would stand in (epoch + 1)
    replica_id: int  # the candidate
    replica_directory_id: uuid.UUID | None
    voter_directory_id: uuid.UUID | None
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# --- BeginQuorumEpoch (API 53) and EndQuorumEpoch (API 54) --------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    voter_id: int
    voter_directory_id: uuid.UUID | None
    leader_id: int
    leader_epoch: int
    leader_endpoints: tuple[LeaderEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    node_endpoints: tuple[NodeEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """EndQuorumEpochRequest's PreferredCandidates entry."""

    candidate_id: int
    candidate_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_candidates: tuple[ReplicaInfo, ...]
    leader_endpoints: tuple[LeaderEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# --- Fetch (API 1, as KRaft uses it) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int  # ReplicaState.ReplicaId
    max_wait_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    replica_directory_id: uuid.UUID | None = None
    log_start_offset: int = -1
    max_bytes: int = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """FetchResponse's DivergingEpoch; (-1, -1) when the fetcher's log does not diverge."""

    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    """FetchResponse's CurrentLeader."""

    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """FetchResponse's SnapshotId: the snapshot a fetcher behind the log start offset must fetch; (-1, -1)
    when it needs none."""

    end_offset: int = -1
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    high_watermark: int
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset = field(default_factory=EpochEndOffset)
    records: tuple[LogEntry, ...] = ()
    log_start_offset: int = 0
    snapshot_id: SnapshotId = field(default_factory=SnapshotId)
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# --- FetchSnapshot (API 59, KIP-630) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int  # the byte position in the snapshot to read from
    max_bytes: int = 2**31 - 1
    replica_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    current_leader: LeaderIdAndEpoch
    snapshot_id: SnapshotId = field(default_factory=SnapshotId)
    size: int = -1  # the snapshot's whole size
    position: int = -1
    unaligned_records: bytes = b""  # the snapshot's bytes from position (not cut at batch boundaries)


# --- DescribeQuorum (API 55), as the leader answers it ---------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """DescribeQuorumResponse's ReplicaState."""

    replica_id: int
    replica_directory_id: uuid.UUID | None
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumPartition:
    """DescribeQuorumResponse's PartitionData."""

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()


RaftRequest = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
RaftResponse = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
                | FetchSnapshotResponse)
RaftMessage = RaftRequest | RaftResponse


# --- what drives the core, and what it gives back --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Received:
    """A request or a response that arrived from replica ``source``."""

    source: int
    correlation_id: int
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class Send:
    """A request to send (a new correlation id) or the response to a request (its correlation id)."""

    destination: int
    correlation_id: int
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class Appended:
    """Entries the core appended to the log (as leader, or fetched as follower)."""

    entries: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class Truncated:
    """The core truncated the log to ``end_offset`` (a follower whose log diverged from the leader's)."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    """Entries below ``high_watermark`` are committed (Kafka's ``handleCommit`` fires up to it)."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    """The epoch or the known leader changed (Kafka's ``handleLeaderChange``); ``leader_id`` -1 if unknown."""

    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    """A follower fetched the snapshot ``snapshot_id`` whole and installed it: its log now starts at the
    snapshot's end offset (Kafka's ``handleLoadSnapshot``: the state machine reloads from it)."""

    snapshot_id: SnapshotId


Effect = Send | Appended | Truncated | HighWatermarkChanged | LeaderChanged | SnapshotInstalled
