"""One KRaft replica as a pure state machine: Kafka's KafkaRaftClient without its threads and sockets.

:class:`RaftReplica` is driven by three calls, each given the time (``now_ms``, from the caller's clock)
and returning the :mod:`~odradek.raft.messages` effects it produced, in order:

- ``tick(now_ms)``: timers (Kafka's ``poll``): election, fetch and check-quorum timeouts, backoffs,
  requests to (re)send, parked fetches whose wait is over. ``next_deadline_ms()`` says when the next
  tick has something to do;
- ``handle(received, now_ms)``: a request (answered with a :class:`Send` carrying its correlation id)
  or a response (matched with the request it answers by destination and correlation id, as Kafka's
  RequestManager does; any other is stale and ignored);
- ``append(records, now_ms)``: the leader appends application records in its epoch.

It changes the log through the :class:`~odradek.raft.log.RaftLog` given to it (and reports each change
as :class:`Appended` / :class:`Truncated`) and writes its election state through the
:class:`~odradek.raft.quorum_store.QuorumStateStore` *before* acting on it (Kafka's
``durableTransitionTo``): a vote is on disk before the candidate hears it was granted. Randomness (the
election timeout in [t, 2t), the election backoff) comes from the ``random.Random`` given to it.

Behaviour follows KafkaRaftClient (KIP-595, with KIP-996's pre-vote): voters elect a leader with Vote
requests after a round of PreVotes; the leader announces itself with BeginQuorumEpoch, writes a
LeaderChangeMessage control record at the start of its epoch, and answers the followers' Fetch requests
(fetch offset and last fetched epoch) with records, or with the end offset of the diverging epoch for the
follower to truncate to, parking a fetch with nothing to return for up to its MaxWaitMs. The high
watermark is the offset a majority of voters have fetched, once past the start of the leader's epoch. A
leader that hears from no majority for 1.5 fetch timeouts resigns (Kafka's check-quorum), telling the
voters with EndQuorumEpoch.

Observers (brokers fetching the metadata log: any replica id that is not a voter) are answered as voters
are, records and high watermark, but their fetches take no part in the high watermark nor in check-quorum
(Kafka's LeaderState keeps observers apart); the leader keeps their fetch offset and times for
DescribeQuorum, and forgets an observer that has not fetched for 5 minutes (OBSERVER_SESSION_TIMEOUT_MS).
The local replica itself must be a voter.

Snapshots (KIP-630): a fetcher whose fetch offset is below the leader's log start offset (or whose last
fetched epoch is older than the oldest snapshot's) is answered with the latest snapshot's id
(FetchResponse's SnapshotId); a follower so answered fetches that snapshot with FetchSnapshot requests, in
chunks from byte position 0, installs it once whole (its log then starts at the snapshot's end offset: the
:class:`SnapshotInstalled` effect) and goes back to Fetch from there. The leader answers FetchSnapshot
with SNAPSHOT_NOT_FOUND (the follower then fetches again and hears of the newer one) or
POSITION_OUT_OF_RANGE. Writing snapshots and moving the log start is the log owner's business
(``kraft/``), not the core's.

Not in this slice: dynamic voters (KIP-853), batching appends (``controller.quorum.append.linger.ms``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from odradek.protocol import errors
from odradek.raft import state as st
from odradek.raft.log import (
    LeaderChangeMessage,
    LogEntry,
    OffsetAndEpoch,
    RaftLog,
    truncate_to_end_offset,
    validate_offset_and_epoch,
)
from odradek.raft.messages import (
    NO_LEADER,
    Appended,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumPartition,
    Effect,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    HighWatermarkChanged,
    LeaderChanged,
    LeaderIdAndEpoch,
    RaftMessage,
    Received,
    ReplicaInfo,
    ReplicaState,
    Send,
    SnapshotId,
    SnapshotInstalled,
    Truncated,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.quorum_store import QuorumStateStore
from odradek.raft.state import EpochState, ReplicaKey, StateName

RETRY_BACKOFF_BASE_MS = 100  # KafkaRaftClient.RETRY_BACKOFF_BASE_MS (election backoff)
MAX_FETCH_WAIT_MS = 500  # KafkaRaftClient.MAX_FETCH_WAIT_MS
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5  # LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR
OBSERVER_SESSION_TIMEOUT_MS = 300_000  # LeaderState.OBSERVER_SESSION_TIMEOUT_MS
NEVER = 2**62


class NotLeaderError(Exception):
    """append() on a replica that is not the leader (Kafka's NotLeaderException)."""


class InconsistentLeaderError(Exception):
    """A request or response names a leader that contradicts this replica's (Kafka's IllegalStateException
    in maybeTransition): two leaders in one epoch, or this replica named leader when it is not."""


class FollowerStateError(Exception):
    """The leader asked for what would undo a commit: a truncation below the high watermark, a high
    watermark going back, records that do not continue the log (Kafka's KafkaException / IllegalStateException)."""


@dataclass(frozen=True)
class QuorumConfig:
    """Kafka's QuorumConfig (``controller.quorum.*``), with its defaults."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = MAX_FETCH_SIZE_BYTES  # a follower asks for it; a leader reads at most it (maxFetchSizeInBytes)


class RequestManager:
    """Kafka's RequestManager: at most one request in flight per destination; a request times out after
    ``controller.quorum.request.timeout.ms``; an error answer backs the destination off for
    ``controller.quorum.retry.backoff.ms``."""

    def __init__(self, retry_backoff_ms: int, request_timeout_ms: int) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._inflight: dict[int, tuple[int, int]] = {}  # destination -> (correlation id, sent at)
        self._backoff: dict[int, int] = {}  # destination -> until

    def is_ready(self, destination: int, now_ms: int) -> bool:
        sent = self._inflight.get(destination)
        if sent is not None:
            if now_ms < sent[1] + self.request_timeout_ms:
                return False
            del self._inflight[destination]
        return self._backoff.get(destination, 0) <= now_ms

    def on_sent(self, destination: int, correlation_id: int, now_ms: int) -> None:
        self._inflight[destination] = (correlation_id, now_ms)

    def is_response_expected(self, source: int, correlation_id: int) -> bool:
        sent = self._inflight.get(source)
        return sent is not None and sent[0] == correlation_id

    def on_response(self, source: int, success: bool, now_ms: int) -> None:
        self._inflight.pop(source, None)
        if not success:
            self._backoff[source] = now_ms + self.retry_backoff_ms

    def reset_all(self) -> None:
        self._inflight.clear()
        self._backoff.clear()

    def next_deadline_ms(self, now_ms: int) -> int:
        """The next time after ``now_ms`` a request times out or a backoff ends."""
        times = [sent + self.request_timeout_ms for _, sent in self._inflight.values()]
        times += self._backoff.values()
        return min((t for t in times if t > now_ms), default=NEVER)


@dataclass
class _Progress:
    """The leader's view of one voter (Kafka's LeaderState.ReplicaState)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1
    directory_id: uuid.UUID | None = None  # the voter's, as its last Fetch said it (KIP-853)


@dataclass
class _SnapshotFetch:
    """A follower's snapshot being fetched (Kafka's FollowerState.fetchingSnapshot), for one leader and epoch."""

    snapshot_id: OffsetAndEpoch
    epoch: int
    leader_id: int
    data: bytearray


@dataclass(frozen=True)
class _Parked:
    correlation_id: int
    request: FetchRequest
    deadline_ms: int


class RaftReplica:
    """A voter of the KRaft quorum (see the module docstring)."""

    def __init__(
        self,
        *,
        local_id: int,
        voters: Sequence[int],
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        now_ms: int,
        config: QuorumConfig | None = None,
        local_directory_id: uuid.UUID | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if local_id not in voters:
            raise ValueError(f"replica {local_id} is not one of the voters {sorted(voters)} (observers are not supported yet)")
        self.local_id = local_id
        self.local_key = ReplicaKey(local_id, local_directory_id)
        self.voters = tuple(sorted(set(voters)))
        self.log = log
        self.store = store
        self.random = rng
        self.config = config or QuorumConfig()
        self.cluster_id = cluster_id
        self.requests = RequestManager(self.config.retry_backoff_ms, self.config.request_timeout_ms)
        self._now = now_ms
        self._next_correlation_id = 0
        self._out: list[Effect] = []
        self._progress: dict[int, _Progress] = {}
        self._observers: dict[int, _Progress] = {}
        self._fetching_snapshot: _SnapshotFetch | None = None
        self._parked: dict[int, _Parked] = {}
        self._fetched_since_check: set[int] = set()
        self._begin_epoch_deadline = NEVER
        election = store.read_election_state()
        initial = st.initial_state(
            election,
            log.last_fetched_epoch(),
            self.local_key,
            now_ms if self.voters == (local_id,) else self._election_deadline(),
            now_ms + self.config.fetch_timeout_ms,
        )
        self.store.write_election_state(st.election_state(initial))
        self.state: EpochState = initial
        self._announced = (initial.epoch, initial.leader_id)

    # --- the three entry points ----------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        self._poll()
        return self._end()

    def handle(self, received: Received, now_ms: int) -> list[Effect]:
        self._begin(now_ms)
        message = received.message
        if isinstance(message, VoteRequest):
            self._respond(received, self._handle_vote_request(message))
        elif isinstance(message, BeginQuorumEpochRequest):
            self._respond(received, self._handle_begin_quorum_epoch_request(message))
        elif isinstance(message, EndQuorumEpochRequest):
            self._respond(received, self._handle_end_quorum_epoch_request(message))
        elif isinstance(message, FetchRequest):
            self._handle_fetch_request(received.source, received.correlation_id, message)
        elif isinstance(message, FetchSnapshotRequest):
            self._respond(received, self._handle_fetch_snapshot_request(received.source, message))
        elif self.requests.is_response_expected(received.source, received.correlation_id):
            self.requests.on_response(received.source, message.error_code == errors.NONE, self._now)
            self._handle_response(received.source, message)
        self._poll()
        return self._end()

    def append(self, records: Sequence[bytes], now_ms: int) -> tuple[int, list[Effect]]:
        """Append ``records`` as the leader; the offset of the last one, and the effects."""
        if self.state.name is not StateName.LEADER:
            raise NotLeaderError(f"replica {self.local_id} is {self.state}, not the leader")
        self._begin(now_ms)
        end = self.log.end_offset()
        self._append_as_leader([LogEntry(end + i, self.state.epoch, r) for i, r in enumerate(records)])
        self._poll()
        return self.log.end_offset() - 1, self._end()

    def resign(self, now_ms: int) -> list[Effect]:
        """Give up leadership (Kafka's graceful shutdown of a leader): Resigned, EndQuorumEpoch to the voters."""
        self._begin(now_ms)
        if self.state.name is StateName.LEADER:
            self._transition_to_resigned()
        self._poll()
        return self._end()

    def next_deadline_ms(self) -> int:
        """When ``tick`` next has something to do."""
        s = self.state
        # a Candidate backing off waits for the backoff, whatever its election timeout says
        times = [s.deadline_ms if s.backoff_until_ms is None else s.backoff_until_ms]
        times.append(self.requests.next_deadline_ms(self._now))
        if s.name is StateName.LEADER:
            times.append(self._begin_epoch_deadline)
            times += [p.deadline_ms for p in self._parked.values()]
        # what was due at the last call has been done by it
        return min((t for t in times if t > self._now), default=NEVER)

    # --- what others may read ------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def high_watermark(self) -> int | None:
        return self.state.high_watermark

    def is_leader(self) -> bool:
        return self.state.name is StateName.LEADER

    def describe_quorum(self, now_ms: int) -> DescribeQuorumPartition:
        """DescribeQuorum's partition data as the leader answers it (NOT_LEADER_OR_FOLLOWER elsewhere)."""
        s = self.state
        if s.name is not StateName.LEADER:
            return DescribeQuorumPartition(errors.NOT_LEADER_OR_FOLLOWER, s.leader_id, s.epoch, -1, ())
        voters = []
        for v in self.voters:
            p = self._progress[v]
            if v == self.local_id:
                voters.append(ReplicaState(v, self.local_key.directory_id, self.log.end_offset(), now_ms, now_ms))
            else:
                voters.append(ReplicaState(v, p.directory_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms))
        hw = s.high_watermark if s.high_watermark is not None else -1
        # LeaderState.clearInactiveObservers: an observer silent for 5 minutes is no longer listed
        for o in [o for o, p in self._observers.items() if now_ms - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS]:
            del self._observers[o]
        observers = tuple(ReplicaState(o, p.directory_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                          for o, p in sorted(self._observers.items()))
        return DescribeQuorumPartition(errors.NONE, s.leader_id, s.epoch, hw, tuple(voters), observers)

    # --- plumbing ------------------------------------------------------------------------------

    def _begin(self, now_ms: int) -> None:
        self._now = max(self._now, now_ms)
        self._out = []

    def _end(self) -> list[Effect]:
        s = self.state
        if (s.epoch, s.leader_id) != self._announced:
            self._announced = (s.epoch, s.leader_id)
            self._out.append(LeaderChanged(s.epoch, s.leader_id))
        out, self._out = self._out, []
        return out

    def _respond(self, received: Received, message: RaftMessage) -> None:
        self._out.append(Send(received.source, received.correlation_id, message))

    def _send_request(self, destination: int, message: RaftMessage) -> None:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.requests.on_sent(destination, correlation_id, self._now)
        self._out.append(Send(destination, correlation_id, message))

    def _others(self) -> list[int]:
        return [v for v in self.voters if v != self.local_id]

    def _election_deadline(self) -> int:
        t = self.config.election_timeout_ms
        return self._now + (t + self.random.randrange(t) if t > 0 else 0)

    def _set_state(self, new: EpochState) -> None:
        """A change that is not persisted (timers, votes counted, the high watermark)."""
        if new.high_watermark != self.state.high_watermark and new.high_watermark is not None:
            self._out.append(HighWatermarkChanged(new.high_watermark))
        self.state = new

    def _durable(self, new: EpochState) -> None:
        """Kafka's durableTransitionTo: the quorum-state file first, then the state in memory."""
        old = self.state
        self.store.write_election_state(st.election_state(new))
        self._set_state(new)
        self.requests.reset_all()
        if old.name is StateName.LEADER and new.name is not StateName.LEADER:
            self._leave_leadership()

    def _leave_leadership(self) -> None:
        parked, self._parked = self._parked, {}
        for source, p in parked.items():
            self._out.append(Send(source, p.correlation_id, self._fetch_error(errors.NOT_LEADER_OR_FOLLOWER)))
        self._begin_epoch_deadline = NEVER

    # --- transitions ---------------------------------------------------------------------------

    def _transition_to_unattached(self, epoch: int) -> None:
        s = self.state
        keep = s.name in (StateName.UNATTACHED, StateName.PROSPECTIVE, StateName.CANDIDATE)
        self._durable(st.to_unattached(s, epoch, s.deadline_ms if keep else self._election_deadline()))

    def _transition_to_follower(self, epoch: int, leader_id: int) -> None:
        self._durable(st.to_follower(self.state, epoch, leader_id, self.local_id, self._now + self.config.fetch_timeout_ms))

    def _transition_to_prospective(self, retries: int) -> None:
        self._durable(st.to_prospective(self.state, self.local_id, self._election_deadline(), retries))

    def _transition_to_candidate(self) -> None:
        self._durable(st.to_candidate(self.state, self.local_key, self._election_deadline()))

    def _transition_to_resigned(self) -> None:
        successors = sorted(self._others(), key=lambda v: -self._progress[v].end_offset)
        old = self.state
        self._set_state(st.to_resigned(old, successors, self._election_deadline()))  # not persisted, as in Kafka
        self.requests.reset_all()
        self._leave_leadership()

    def _check_quorum_deadline(self) -> int:
        """LeaderState's check-quorum timer: 1.5 fetch timeouts; never for the only voter."""
        if len(self.voters) == 1:
            return NEVER
        return self._now + int(self.config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    def _transition_to_leader(self) -> None:
        start = self.log.end_offset()
        self._durable(st.to_leader(self.state, self.local_id, len(self.voters), start, self._check_quorum_deadline()))
        self._progress = {v: _Progress() for v in self.voters}
        self._observers = {}
        self._fetched_since_check = set()
        self._begin_epoch_deadline = self._now
        granting = tuple(sorted(self.state.granted))
        self._append_as_leader([LogEntry(start, self.state.epoch, LeaderChangeMessage(self.local_id, self.voters, granting))])

    def _maybe_transition(self, leader_id: int, epoch: int) -> None:
        """Kafka's maybeTransition: follow what a request or response says of the leader and epoch."""
        s = self.state
        if leader_id == self.local_id:
            if not (epoch == s.epoch and s.name in (StateName.LEADER, StateName.RESIGNED)) and epoch >= s.epoch:
                raise InconsistentLeaderError(f"replica {self.local_id} ({s}) named leader of epoch {epoch}")
            return
        if epoch == s.epoch and leader_id >= 0 and s.leader_id not in (NO_LEADER, leader_id):
            raise InconsistentLeaderError(f"replica {self.local_id} ({s}) told leader {leader_id} in epoch {epoch}")
        if epoch > s.epoch:
            if leader_id >= 0:
                self._transition_to_follower(epoch, leader_id)
            else:
                self._transition_to_unattached(epoch)
        elif epoch == s.epoch and leader_id >= 0 and s.leader_id == NO_LEADER:
            self._transition_to_follower(epoch, leader_id)

    # --- poll (Kafka's pollCurrentState) -------------------------------------------------------

    def _poll(self) -> None:
        for _ in range(8):  # a transition may make the new state's timer due at once
            before = self.state
            self._poll_once()
            if self.state is before or (self.state.name is before.name and self.state.epoch == before.epoch):
                return

    def _poll_once(self) -> None:
        s, now = self.state, self._now
        if s.name is StateName.LEADER:
            self._poll_leader()
        elif s.name is StateName.RESIGNED:
            for v in sorted(s.unacked):
                if self.requests.is_ready(v, now):
                    preferred = tuple(ReplicaInfo(c) for c in s.preferred_successors)
                    self._send_request(v, EndQuorumEpochRequest(self.cluster_id, self.local_id, s.epoch, preferred))
            if now >= s.deadline_ms:
                self._transition_to_candidate()
                self._after_vote_change()
        elif s.name is StateName.CANDIDATE:
            if s.backoff_until_ms is not None:
                if now >= s.backoff_until_ms:
                    self._transition_to_prospective(s.retries + 1)
                    self._after_vote_change()
            elif now >= s.deadline_ms:
                self._set_state(replace(s, backoff_until_ms=now + self._binary_exponential_backoff(s.retries)))
            else:
                self._send_votes(pre_vote=False)
        elif s.name is StateName.PROSPECTIVE:
            if now >= s.deadline_ms:
                self._prospective_lost()
            else:
                self._send_votes(pre_vote=True)
        elif s.name is StateName.FOLLOWER:
            if now >= s.deadline_ms:
                self._transition_to_prospective(1)
                self._after_vote_change()
            elif self.requests.is_ready(s.leader_id, now) and self._snapshot_fetch_of(s) is not None:
                f = self._snapshot_fetch_of(s)
                assert f is not None
                self._send_request(s.leader_id, FetchSnapshotRequest(
                    self.cluster_id, self.local_id, s.epoch, SnapshotId(f.snapshot_id.offset, f.snapshot_id.epoch),
                    len(f.data), self.config.fetch_max_bytes, self.local_key.directory_id))
            elif self.requests.is_ready(s.leader_id, now):
                self._send_request(
                    s.leader_id,
                    FetchRequest(
                        self.cluster_id,
                        self.local_id,
                        self.config.fetch_max_wait_ms,
                        s.epoch,
                        self.log.end_offset(),
                        self.log.last_fetched_epoch(),
                        self.local_key.directory_id,
                        max_bytes=self.config.fetch_max_bytes,
                    ),
                )
        elif now >= s.deadline_ms:  # Unattached
            self._transition_to_prospective(1)
            self._after_vote_change()

    def _poll_leader(self) -> None:
        s, now = self.state, self._now
        if now >= s.deadline_ms:  # check-quorum: no majority fetched within 1.5 fetch timeouts
            self._transition_to_resigned()
            return
        for source, p in list(self._parked.items()):
            if now >= p.deadline_ms:
                del self._parked[source]
                self._out.append(Send(source, p.correlation_id, self._try_complete_fetch(source, p.request)))
        if now >= self._begin_epoch_deadline:
            for v in self._others():
                if self.requests.is_ready(v, now):
                    self._send_request(
                        v, BeginQuorumEpochRequest(self.cluster_id, v, None, self.local_id, s.epoch)
                    )
            self._begin_epoch_deadline = now + self.config.fetch_timeout_ms // 2

    def _send_votes(self, *, pre_vote: bool) -> None:
        s = self.state
        if st.is_vote_rejected(s, len(self.voters)):
            return
        epoch = s.epoch + 1 if pre_vote else s.epoch
        for v in self._others():
            if v not in s.granted and v not in s.rejected and self.requests.is_ready(v, self._now):
                self._send_request(
                    v,
                    VoteRequest(
                        self.cluster_id,
                        v,
                        epoch,
                        self.local_id,
                        self.local_key.directory_id,
                        None,
                        self.log.last_fetched_epoch(),
                        self.log.end_offset(),
                        pre_vote,
                    ),
                )

    def _after_vote_change(self) -> None:
        """Count the votes: a Prospective with a majority stands (Candidate); a Candidate with one leads;
        a majority against sends either back (KIP-996) or into backoff."""
        s, n = self.state, len(self.voters)
        if s.name is StateName.PROSPECTIVE:
            if st.is_vote_granted(s, n):
                self._transition_to_candidate()
                self._after_vote_change()
            elif st.is_vote_rejected(s, n):
                self._prospective_lost()
        elif s.name is StateName.CANDIDATE:
            if st.is_vote_granted(s, n):
                self._transition_to_leader()
            elif st.is_vote_rejected(s, n) and s.backoff_until_ms is None:
                backoff = self._binary_exponential_backoff(s.retries)
                self._set_state(replace(s, backoff_until_ms=self._now + backoff))

    def _prospective_lost(self) -> None:
        """KIP-996: back to following the leader it knew, or Unattached in the same epoch (a new timeout)."""
        s = self.state
        if s.leader_id != NO_LEADER:
            self._transition_to_follower(s.epoch, s.leader_id)
        else:
            self._durable(st.to_unattached(s, s.epoch, self._election_deadline()))

    def _binary_exponential_backoff(self, retries: int) -> int:
        """Kafka's binaryExponentialElectionBackoffMs."""
        r = max(retries, 1)
        return min(RETRY_BACKOFF_BASE_MS * self.random.randrange(2 << min(20, r - 1)), self.config.election_backoff_max_ms)

    def _end_epoch_election_backoff(self, preferred: Sequence[ReplicaInfo]) -> int:
        """Kafka's endEpochElectionBackoff: the earlier in the resigned leader's list, the sooner."""
        position = len(preferred)
        for i, c in enumerate(preferred):
            if c.candidate_id == self.local_id and c.candidate_directory_id in (None, self.local_key.directory_id):
                position = i
                break
        backoff_max = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position >= len(preferred):
            return backoff_max
        base = backoff_max >> (len(preferred) - 1)
        return min(backoff_max, base << (position - 1))

    # --- requests ------------------------------------------------------------------------------

    def _valid_cluster(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    def _valid_voter_key(self, voter_id: int, directory_id: uuid.UUID | None) -> bool:
        if voter_id < 0:  # older versions do not say whom the request is for
            return True
        return voter_id == self.local_id and (directory_id is None or directory_id == self.local_key.directory_id)

    def _vote_response(self, error: int, granted: bool) -> VoteResponse:
        return VoteResponse(error, self.state.leader_id, self.state.epoch, granted)

    def _handle_vote_request(self, r: VoteRequest) -> VoteResponse:
        if not self._valid_cluster(r.cluster_id):
            return self._vote_response(errors.INCONSISTENT_CLUSTER_ID, False)
        if r.last_offset < 0 or r.last_offset_epoch < 0 or r.last_offset_epoch >= r.replica_epoch:
            return self._vote_response(errors.INVALID_REQUEST, False)
        if r.replica_epoch < self.state.epoch:
            return self._vote_response(errors.FENCED_LEADER_EPOCH, False)
        if r.replica_id < 0:
            return self._vote_response(errors.INVALID_REQUEST, False)
        if r.replica_epoch > self.state.epoch and not r.pre_vote:
            self._transition_to_unattached(r.replica_epoch)
        if not self._valid_voter_key(r.voter_id, r.voter_directory_id):
            return self._vote_response(errors.INVALID_VOTER_KEY, False)
        candidate = ReplicaKey(r.replica_id, r.replica_directory_id)
        up_to_date = st.is_log_up_to_date(
            r.last_offset_epoch, r.last_offset, self.log.last_fetched_epoch(), self.log.end_offset()
        )
        granted = self._can_grant_vote(candidate, up_to_date, r.pre_vote)
        s = self.state
        if granted and not r.pre_vote and s.voted_key is None and s.name in (StateName.UNATTACHED, StateName.PROSPECTIVE):
            # persisted before the answer leaves (Kafka's transitionToUnattachedVoted)
            self._durable(st.to_unattached_voted(s, r.replica_epoch, candidate, self._election_deadline()))
        return self._vote_response(errors.NONE, granted)

    def _can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return st.can_grant_vote(self.state, candidate, up_to_date, pre_vote)

    def _handle_begin_quorum_epoch_request(self, r: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        s = self.state
        if not self._valid_cluster(r.cluster_id):
            return BeginQuorumEpochResponse(errors.INCONSISTENT_CLUSTER_ID, s.leader_id, s.epoch)
        if r.leader_epoch < s.epoch:
            return BeginQuorumEpochResponse(errors.FENCED_LEADER_EPOCH, s.leader_id, s.epoch)
        if r.leader_id < 0:
            return BeginQuorumEpochResponse(errors.INVALID_REQUEST, s.leader_id, s.epoch)
        self._maybe_transition(r.leader_id, r.leader_epoch)
        error = errors.NONE if self._valid_voter_key(r.voter_id, r.voter_directory_id) else errors.INVALID_VOTER_KEY
        return BeginQuorumEpochResponse(error, self.state.leader_id, self.state.epoch)

    def _handle_end_quorum_epoch_request(self, r: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        s = self.state
        if not self._valid_cluster(r.cluster_id):
            return EndQuorumEpochResponse(errors.INCONSISTENT_CLUSTER_ID, s.leader_id, s.epoch)
        if r.leader_epoch < s.epoch:
            return EndQuorumEpochResponse(errors.FENCED_LEADER_EPOCH, s.leader_id, s.epoch)
        if r.leader_id < 0:
            return EndQuorumEpochResponse(errors.INVALID_REQUEST, s.leader_id, s.epoch)
        self._maybe_transition(r.leader_id, r.leader_epoch)
        s = self.state
        if s.name is StateName.FOLLOWER and s.leader_id == r.leader_id:
            # the leader is going: stand sooner, the more up to date the sooner (Kafka's overrideFetchTimeout)
            backoff = self._end_epoch_election_backoff(r.preferred_candidates)
            self._set_state(replace(s, deadline_ms=self._now + backoff))
        return EndQuorumEpochResponse(errors.NONE, self.state.leader_id, self.state.epoch)

    def _fetch_error(self, error: int) -> FetchResponse:
        return FetchResponse(error, -1, LeaderIdAndEpoch(self.state.leader_id, self.state.epoch))

    def _handle_fetch_request(self, source: int, correlation_id: int, r: FetchRequest) -> None:
        if not self._valid_cluster(r.cluster_id):
            response = self._fetch_error(errors.INCONSISTENT_CLUSTER_ID)
        elif r.max_wait_ms < 0 or r.fetch_offset < 0 or r.last_fetched_epoch < 0 or r.last_fetched_epoch > r.current_leader_epoch:
            response = self._fetch_error(errors.INVALID_REQUEST)
        else:
            response = self._try_complete_fetch(source, r)
            if (
                response.error_code == errors.NONE
                and not response.records
                and r.max_wait_ms > 0
                and response.diverging_epoch.epoch < 0
                and response.snapshot_id.end_offset < 0
            ):
                # nothing to give yet: park it until an append, a new high watermark or MaxWaitMs
                self._parked[source] = _Parked(correlation_id, r, self._now + r.max_wait_ms)
                return
        self._out.append(Send(source, correlation_id, response))

    def _try_complete_fetch(self, source: int, r: FetchRequest) -> FetchResponse:
        """Kafka's tryCompleteFetchRequest: validate the fetcher's log against ours, record its progress."""
        s = self.state
        if r.current_leader_epoch < s.epoch:
            return self._fetch_error(errors.FENCED_LEADER_EPOCH)
        if r.current_leader_epoch > s.epoch:
            return self._fetch_error(errors.UNKNOWN_LEADER_EPOCH)
        if s.name is not StateName.LEADER:
            return self._fetch_error(errors.NOT_LEADER_OR_FOLLOWER)
        checked = validate_offset_and_epoch(self.log, r.fetch_offset, r.last_fetched_epoch)
        if checked.snapshot:  # behind the log start: fetch the latest snapshot first
            sid = checked.offset_and_epoch
            return FetchResponse(errors.NONE, self._hw_or_sentinel(), LeaderIdAndEpoch(self.local_id, s.epoch),
                                 log_start_offset=self.log.start_offset(), snapshot_id=SnapshotId(sid.offset, sid.epoch))
        if not checked.valid:
            end = checked.offset_and_epoch
            return FetchResponse(
                errors.NONE,
                self._hw_or_sentinel(),
                LeaderIdAndEpoch(self.local_id, s.epoch),
                EpochEndOffset(end.epoch, end.offset),
                log_start_offset=self.log.start_offset(),
            )
        # Kafka's leader reads up to its own bound (KafkaMetadataLog.read with maxFetchSizeInBytes), whatever the
        # request says: a Kafka broker fetching as an observer sends a partition max bytes of 0
        records = self.log.read(r.fetch_offset, self.config.fetch_max_bytes)
        self._update_replica_state(source, r.fetch_offset, r.replica_directory_id)
        return FetchResponse(errors.NONE, self._hw_or_sentinel(), LeaderIdAndEpoch(self.local_id, s.epoch), records=records,
                             log_start_offset=self.log.start_offset())

    def _snapshot_error(self, error: int) -> FetchSnapshotResponse:
        return FetchSnapshotResponse(error, LeaderIdAndEpoch(self.state.leader_id, self.state.epoch))

    def _handle_fetch_snapshot_request(self, source: int, r: FetchSnapshotRequest) -> FetchSnapshotResponse:
        """Kafka's handleFetchSnapshotRequest: a chunk of the snapshot from ``position``."""
        s = self.state
        if not self._valid_cluster(r.cluster_id):
            return self._snapshot_error(errors.INCONSISTENT_CLUSTER_ID)
        if r.current_leader_epoch < s.epoch:
            return self._snapshot_error(errors.FENCED_LEADER_EPOCH)
        if r.current_leader_epoch > s.epoch:
            return self._snapshot_error(errors.UNKNOWN_LEADER_EPOCH)
        if s.name is not StateName.LEADER:
            return self._snapshot_error(errors.NOT_LEADER_OR_FOLLOWER)
        sid = OffsetAndEpoch(r.snapshot_id.epoch, r.snapshot_id.end_offset)
        # the bootstrap snapshot is never replicated: the first leader writes its records into the log
        bootstrap = sid == OffsetAndEpoch(0, 0)
        found = None if bootstrap else self.log.read_snapshot(
            sid, max(r.position, 0), max(min(r.max_bytes, self.config.fetch_max_bytes), 1))
        if found is None:
            return self._snapshot_error(errors.SNAPSHOT_NOT_FOUND)
        size, chunk = found
        if r.position < 0 or r.position >= size:
            return self._snapshot_error(errors.POSITION_OUT_OF_RANGE)
        if source in self._progress:
            self._note_fetch_for_check_quorum(source)  # Kafka's updateCheckQuorumForFollowingVoter
        return FetchSnapshotResponse(errors.NONE, LeaderIdAndEpoch(self.local_id, s.epoch), r.snapshot_id, size,
                                     r.position, chunk)

    def _hw_or_sentinel(self) -> int:
        hw = self.state.high_watermark
        return -1 if hw is None else hw

    # --- the leader's bookkeeping --------------------------------------------------------------

    def _update_replica_state(self, replica_id: int, end_offset: int, directory_id: uuid.UUID | None = None) -> None:
        voter = replica_id in self._progress
        progress = self._progress[replica_id] if voter else self._observers.setdefault(replica_id, _Progress())
        leader_end = self.log.end_offset()
        now = self._now
        if end_offset >= leader_end:
            progress.last_caught_up_ms = now
        elif progress.last_fetch_leader_end > 0 and end_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = progress.last_fetch_ms
        progress.end_offset = end_offset
        progress.last_fetch_ms = now
        progress.last_fetch_leader_end = leader_end
        progress.directory_id = directory_id
        if not voter:  # an observer: no part in the high watermark nor in check-quorum
            return
        self._note_fetch_for_check_quorum(replica_id)
        self._maybe_update_high_watermark()

    def _note_fetch_for_check_quorum(self, replica_id: int) -> None:
        self._fetched_since_check.add(replica_id)
        if len(self._fetched_since_check | {self.local_id}) >= st.majority(len(self.voters)):
            self._set_state(replace(self.state, deadline_ms=self._check_quorum_deadline()))
            self._fetched_since_check = set()

    def _maybe_update_high_watermark(self) -> None:
        s = self.state
        self._progress[self.local_id].end_offset = self.log.end_offset()
        offsets = [p.end_offset for p in self._progress.values()]
        hw = st.high_watermark_update(offsets, s.epoch_start_offset, s.high_watermark)
        if hw is not None:
            self._set_state(replace(s, high_watermark=hw))
            self._complete_parked()

    def _append_as_leader(self, entries: list[LogEntry]) -> None:
        self.log.append(entries)
        self._out.append(Appended(tuple(entries)))
        self._maybe_update_high_watermark()
        self._complete_parked()

    def _complete_parked(self) -> None:
        parked, self._parked = self._parked, {}
        for source, p in parked.items():
            self._out.append(Send(source, p.correlation_id, self._try_complete_fetch(source, p.request)))

    # --- responses -----------------------------------------------------------------------------

    def _handle_response(self, source: int, message: RaftMessage) -> None:
        if isinstance(message, (FetchResponse, FetchSnapshotResponse)):
            leader_id, epoch = message.current_leader.leader_id, message.current_leader.leader_epoch
        elif isinstance(message, (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse)):
            leader_id, epoch = message.leader_id, message.leader_epoch
        else:
            return
        if self._handled_as_common(message.error_code, leader_id, epoch):
            return
        if message.error_code != errors.NONE:
            if isinstance(message, FetchSnapshotResponse) and message.error_code == errors.SNAPSHOT_NOT_FOUND:
                # the leader deleted it before we had it all: Fetch again, and hear of the newer one
                self._fetching_snapshot = None
            return  # backing off (RequestManager.on_response); retried by the next poll
        s = self.state
        if isinstance(message, VoteResponse):
            if s.name in (StateName.PROSPECTIVE, StateName.CANDIDATE):
                self._set_state(st.record_vote(s, source, message.vote_granted))
                self._after_vote_change()
        elif isinstance(message, EndQuorumEpochResponse):
            if s.name is StateName.RESIGNED:
                self._set_state(replace(s, unacked=s.unacked - {source}))
        elif isinstance(message, FetchResponse) and s.name is StateName.FOLLOWER and source == s.leader_id:
            self._handle_fetch_response(message)
        elif isinstance(message, FetchSnapshotResponse) and s.name is StateName.FOLLOWER and source == s.leader_id:
            self._handle_fetch_snapshot_response(message)

    def _handled_as_common(self, error: int, leader_id: int, epoch: int) -> bool:
        """Kafka's maybeHandleCommonResponse: True when the response needs nothing more."""
        s = self.state
        if epoch < s.epoch or error == errors.UNKNOWN_LEADER_EPOCH:
            return True  # stale
        if epoch > s.epoch or error in (errors.FENCED_LEADER_EPOCH, errors.NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(leader_id, epoch)
            return True
        if leader_id >= 0 and s.leader_id == NO_LEADER:
            self._maybe_transition(leader_id, epoch)
            return error != errors.NONE
        return False

    def _snapshot_fetch_of(self, s: EpochState) -> _SnapshotFetch | None:
        """The snapshot being fetched from this follower state's leader, if any (a new leader or epoch drops it)."""
        f = self._fetching_snapshot
        if f is not None and (f.epoch, f.leader_id) != (s.epoch, s.leader_id):
            self._fetching_snapshot = f = None
        return f

    def _handle_fetch_snapshot_response(self, r: FetchSnapshotResponse) -> None:
        """Kafka's handleFetchSnapshotResponse: append the chunk; once whole, install the snapshot."""
        s = self.state
        f = self._snapshot_fetch_of(s)
        if f is None:
            return
        if (r.snapshot_id.end_offset, r.snapshot_id.epoch) != (f.snapshot_id.offset, f.snapshot_id.epoch):
            raise FollowerStateError(f"replica {self.local_id}: fetching snapshot {f.snapshot_id}, the leader sent "
                                     f"{r.snapshot_id}")
        if r.position != len(f.data):
            raise FollowerStateError(f"replica {self.local_id}: snapshot chunk at position {r.position}, expected "
                                     f"{len(f.data)}")
        f.data += r.unaligned_records
        if len(f.data) > r.size:
            raise FollowerStateError(f"replica {self.local_id}: snapshot {f.snapshot_id} is {r.size} bytes, "
                                     f"received {len(f.data)}")
        if len(f.data) == r.size:
            self._fetching_snapshot = None
            self.log.install_snapshot(f.snapshot_id, bytes(f.data))
            self._out.append(SnapshotInstalled(SnapshotId(f.snapshot_id.offset, f.snapshot_id.epoch)))
            end = f.snapshot_id.offset
            if s.high_watermark is None or s.high_watermark < end:
                s = replace(s, high_watermark=end)
        self._set_state(replace(s, has_fetched_from_leader=True, deadline_ms=self._now + self.config.fetch_timeout_ms))

    def _handle_fetch_response(self, r: FetchResponse) -> None:
        s = self.state
        if r.snapshot_id.end_offset >= 0 and r.snapshot_id.epoch >= 0 and r.diverging_epoch.epoch < 0:
            # the leader's log starts after our end: fetch its snapshot first (Kafka's setFetchingSnapshot)
            sid = OffsetAndEpoch(r.snapshot_id.epoch, r.snapshot_id.end_offset)
            self._fetching_snapshot = _SnapshotFetch(sid, s.epoch, s.leader_id, bytearray())
            self._set_state(replace(s, has_fetched_from_leader=True,
                                    deadline_ms=self._now + self.config.fetch_timeout_ms))
            return
        if r.diverging_epoch.epoch >= 0:
            end = OffsetAndEpoch(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
            if s.high_watermark is not None and end.offset < s.high_watermark:
                raise FollowerStateError(
                    f"replica {self.local_id}: the leader asked for a truncation to {end.offset}, below the "
                    f"high watermark {s.high_watermark}"
                )
            offset = truncate_to_end_offset(self.log, end)
            self._out.append(Truncated(offset))
        else:
            if r.records:
                if r.records[0].offset != self.log.end_offset():
                    raise FollowerStateError(
                        f"replica {self.local_id}: records from offset {r.records[0].offset}, but the log ends at "
                        f"{self.log.end_offset()}"
                    )
                self.log.append(r.records)
                self._out.append(Appended(r.records))
            if r.high_watermark >= 0:
                hw = min(r.high_watermark, self.log.end_offset())
                if s.high_watermark is not None and hw < s.high_watermark:
                    raise FollowerStateError(
                        f"replica {self.local_id}: the high watermark would go back from {s.high_watermark} to {hw}"
                    )
                s = replace(s, high_watermark=hw)
        self._set_state(replace(s, has_fetched_from_leader=True, deadline_ms=self._now + self.config.fetch_timeout_ms))

