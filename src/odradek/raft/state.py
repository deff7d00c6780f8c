"""The epoch states of a KRaft replica (Kafka's EpochState and its subclasses) as data, a transition
table, and the pure functions between them (Kafka's QuorumState).

A replica is in one :class:`EpochState` at a time, named as Kafka names the classes:

- **Unattached**: an epoch with no known leader (after start, or on seeing a larger epoch), possibly
  having voted in it (Kafka's "unattached voted", once its own Voted state);
- **Prospective** (KIP-996): election timeout expired; it asks the voters for a *PreVote* (nothing is
  persisted, the epoch stays) and becomes a Candidate only if a majority would vote for it, so that a
  replica cut off from the quorum does not bump the epoch and depose a healthy leader on its return;
- **Candidate**: the epoch bumped, its vote for itself persisted, asking for votes;
- **Leader**: elected by a majority in its epoch;
- **Follower**: knows the leader of its epoch and fetches from it;
- **Resigned**: a leader that gave up its epoch (graceful shutdown, or it lost the majority of fetches:
  the check-quorum timer), telling the voters with EndQuorumEpoch, waiting for the next election.

:data:`TRANSITIONS` says which moves are allowed and how the epoch may change in each (the same, larger,
or exactly one more); :func:`check_transition` enforces it and the two invariants that make Raft safe
across restarts: **the epoch never decreases**, and **a vote, once cast in an epoch, never changes in that
epoch** (it is carried over every same-epoch transition, and persisted by the caller before the vote is
granted: :func:`election_state` is what goes into the ``quorum-state`` file). An illegal move raises
:class:`IllegalTransitionError`.

Everything here is pure: no clock (the caller passes ``now_ms`` and the timeouts, drawn from its seeded
random), no I/O.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

NO_LEADER = -1


class IllegalTransitionError(Exception):
    """A move Kafka's QuorumState refuses with IllegalStateException: a bug in the caller."""


class StateName(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


class EpochChange(enum.Enum):
    SAME = "same epoch"
    GREATER = "a greater epoch"
    SAME_OR_GREATER = "the same or a greater epoch"
    NEXT = "the next epoch"

    def allows(self, old: int, new: int) -> bool:
        if self is EpochChange.SAME:
            return new == old
        if self is EpochChange.GREATER:
            return new > old
        if self is EpochChange.SAME_OR_GREATER:
            return new >= old
        return new == old + 1


_S = StateName
_E = EpochChange

# from -> {to: how the epoch may change}. Kafka's QuorumState.transitionTo* (4.x, with KIP-996).
TRANSITIONS: dict[StateName, dict[StateName, EpochChange]] = {
    _S.UNATTACHED: {
        _S.UNATTACHED: _E.SAME_OR_GREATER,  # the same epoch only to record a vote
        _S.PROSPECTIVE: _E.SAME,  # election timeout
        _S.FOLLOWER: _E.SAME_OR_GREATER,
    },
    _S.PROSPECTIVE: {
        _S.UNATTACHED: _E.SAME_OR_GREATER,  # the same epoch: pre-vote lost and no leader known
        _S.PROSPECTIVE: _E.SAME,  # recording a vote granted to another candidate
        _S.CANDIDATE: _E.NEXT,  # a majority granted the pre-vote
        _S.FOLLOWER: _E.SAME_OR_GREATER,
    },
    _S.CANDIDATE: {
        _S.UNATTACHED: _E.GREATER,
        _S.PROSPECTIVE: _E.SAME,  # election lost or timed out, after the backoff
        _S.LEADER: _E.SAME,
        _S.FOLLOWER: _E.SAME_OR_GREATER,
    },
    _S.LEADER: {
        _S.RESIGNED: _E.SAME,
        _S.UNATTACHED: _E.GREATER,
        _S.FOLLOWER: _E.GREATER,
    },
    _S.FOLLOWER: {
        _S.UNATTACHED: _E.GREATER,
        _S.PROSPECTIVE: _E.SAME,  # fetch timeout
        _S.FOLLOWER: _E.GREATER,
    },
    _S.RESIGNED: {
        _S.UNATTACHED: _E.GREATER,
        _S.FOLLOWER: _E.GREATER,
        _S.CANDIDATE: _E.NEXT,  # election timeout after resigning
    },
}


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """Kafka's ReplicaKey: a replica id and, with KIP-853, its directory id (None: not known)."""

    id: int
    directory_id: uuid.UUID | None = None

    def matches(self, other: ReplicaKey) -> bool:
        """Kafka's ElectionState.isVotedCandidate: the same id, and the same directory id when ours is known."""
        return self.id == other.id and (self.directory_id is None or self.directory_id == other.directory_id)


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Kafka's ElectionState: what the ``quorum-state`` file keeps (epoch, leader, vote)."""

    epoch: int
    leader_id: int = NO_LEADER
    voted_key: ReplicaKey | None = None


@dataclass(frozen=True, slots=True)
class EpochState:
    """One epoch state. ``deadline_ms`` is the state's timer: the election timeout (Unattached,
    Prospective, Candidate, Resigned), the fetch timeout (Follower) or the check-quorum timer (Leader)."""

    name: StateName
    epoch: int
    deadline_ms: int
    leader_id: int = NO_LEADER
    voted_key: ReplicaKey | None = None
    high_watermark: int | None = None
    # Prospective and Candidate: the voters that granted (the replica itself included) and rejected
    granted: frozenset[int] = frozenset()
    rejected: frozenset[int] = frozenset()
    retries: int = 0
    backoff_until_ms: int | None = None  # Candidate: backing off after losing
    has_fetched_from_leader: bool = False  # Follower: refuses pre-votes once it has (KIP-996)
    epoch_start_offset: int = -1  # Leader
    preferred_successors: tuple[int, ...] = ()  # Resigned
    unacked: frozenset[int] = frozenset()  # Resigned: voters that have not answered EndQuorumEpoch

    def __str__(self) -> str:
        leader = f", leader {self.leader_id}" if self.leader_id != NO_LEADER else ""
        voted = f", voted for {self.voted_key.id}" if self.voted_key else ""
        return f"{self.name.value}(epoch {self.epoch}{leader}{voted})"


def majority(voter_count: int) -> int:
    return voter_count // 2 + 1


def check_transition(old: EpochState | None, new: EpochState) -> EpochState:
    """``new`` if the table allows the move and the invariants hold; else IllegalTransitionError."""
    if old is None:
        return new
    rule = TRANSITIONS[old.name].get(new.name)
    if rule is None:
        raise IllegalTransitionError(f"no transition from {old} to {new}")
    if not rule.allows(old.epoch, new.epoch):
        raise IllegalTransitionError(f"{old} to {new}: the transition needs {rule.value}")
    if new.epoch == old.epoch:
        if old.voted_key is not None and new.voted_key != old.voted_key:
            raise IllegalTransitionError(f"{old} to {new}: a vote cast in an epoch never changes")
        if old.leader_id != NO_LEADER and new.leader_id != old.leader_id:
            # kept, not only not replaced: a replica that forgot the leader of its epoch could vote
            # a second one in (Kafka's Unattached and Prospective keep a known leader too)
            raise IllegalTransitionError(f"{old} to {new}: an epoch has one leader, and it is not forgotten")
        if old.name is _S.UNATTACHED and new.name is _S.UNATTACHED and (
            old.voted_key is not None or new.voted_key is None
        ):
            raise IllegalTransitionError(f"{old} to {new}: Unattached stays in its epoch only to record a vote")
    return new


def _carried_vote(old: EpochState, epoch: int) -> ReplicaKey | None:
    return old.voted_key if epoch == old.epoch else None


# --- the transitions (Kafka's QuorumState.transitionTo*) --------------------------------------


def to_unattached(old: EpochState, epoch: int, deadline_ms: int) -> EpochState:
    """A greater epoch seen without its leader (or, in the same epoch, a pre-vote lost)."""
    return check_transition(
        old,
        EpochState(
            _S.UNATTACHED, epoch, deadline_ms, voted_key=_carried_vote(old, epoch), high_watermark=old.high_watermark
        ),
    )


def to_unattached_voted(old: EpochState, epoch: int, candidate: ReplicaKey, deadline_ms: int) -> EpochState:
    """Grant a vote: Unattached (or Prospective, KIP-996) in ``epoch``, having voted for ``candidate``.
    The caller persists :func:`election_state` of the result before answering the candidate."""
    if old.voted_key is not None and old.epoch == epoch:
        raise IllegalTransitionError(f"{old}: already voted in epoch {epoch}")
    name = _S.PROSPECTIVE if old.name is _S.PROSPECTIVE and old.epoch == epoch else _S.UNATTACHED
    if name is _S.PROSPECTIVE:
        return check_transition(old, replace(old, voted_key=candidate))
    return check_transition(
        old, EpochState(_S.UNATTACHED, epoch, deadline_ms, voted_key=candidate, high_watermark=old.high_watermark)
    )


def to_prospective(old: EpochState, local_id: int, deadline_ms: int, retries: int) -> EpochState:
    """Election (or fetch) timeout: ask for pre-votes in the same epoch, granting our own."""
    return check_transition(
        old,
        EpochState(
            _S.PROSPECTIVE,
            old.epoch,
            deadline_ms,
            leader_id=old.leader_id,
            voted_key=old.voted_key,
            high_watermark=old.high_watermark,
            granted=frozenset({local_id}),
            retries=retries,
        ),
    )


def to_candidate(old: EpochState, local: ReplicaKey, deadline_ms: int) -> EpochState:
    """Bump the epoch and vote for ourselves (persisted by the caller before any Vote request goes out)."""
    return check_transition(
        old,
        EpochState(
            _S.CANDIDATE,
            old.epoch + 1,
            deadline_ms,
            voted_key=local,
            high_watermark=old.high_watermark,
            granted=frozenset({local.id}),
            retries=max(old.retries, 1),
        ),
    )


def to_leader(old: EpochState, local_id: int, voter_count: int, epoch_start_offset: int, deadline_ms: int) -> EpochState:
    """Elected. The high watermark is not carried over: it moves again only once a majority has an
    entry of this epoch (Kafka's LeaderState, so that it never goes back)."""
    if old.name is not _S.CANDIDATE or len(old.granted) < majority(voter_count):
        raise IllegalTransitionError(f"{old}: cannot become leader without a majority of votes")
    return check_transition(
        old,
        EpochState(
            _S.LEADER,
            old.epoch,
            deadline_ms,
            leader_id=local_id,
            voted_key=old.voted_key,
            granted=old.granted,
            epoch_start_offset=epoch_start_offset,
        ),
    )


def to_follower(old: EpochState, epoch: int, leader_id: int, local_id: int, deadline_ms: int) -> EpochState:
    if leader_id == local_id or leader_id < 0:
        raise IllegalTransitionError(f"{old}: cannot follow leader {leader_id} (local id {local_id})")
    return check_transition(
        old,
        EpochState(
            _S.FOLLOWER,
            epoch,
            deadline_ms,
            leader_id=leader_id,
            voted_key=_carried_vote(old, epoch),
            high_watermark=old.high_watermark,
        ),
    )


def to_resigned(old: EpochState, successors: Sequence[int], deadline_ms: int) -> EpochState:
    """The leader gives up its epoch (not persisted: a leader restarts Resigned anyway)."""
    return check_transition(
        old,
        EpochState(
            _S.RESIGNED,
            old.epoch,
            deadline_ms,
            leader_id=old.leader_id,
            voted_key=old.voted_key,
            high_watermark=old.high_watermark,
            preferred_successors=tuple(successors),
            unacked=frozenset(successors),
        ),
    )


# --- votes ------------------------------------------------------------------------------------


def is_log_up_to_date(candidate_last_epoch: int, candidate_end_offset: int, last_epoch: int, end_offset: int) -> bool:
    """Raft's "at least as up-to-date": compared by last epoch, then by end offset (OffsetAndEpoch.compareTo)."""
    return (candidate_last_epoch, candidate_end_offset) >= (last_epoch, end_offset)


def can_grant_vote(state: EpochState, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
    """Kafka's EpochState.canGrantVote, state by state (4.x, with KIP-996's pre-votes)."""
    name = state.name
    if name in (_S.UNATTACHED, _S.PROSPECTIVE):
        if pre_vote:
            return log_up_to_date
        if state.voted_key is not None:
            return state.voted_key.matches(candidate)
        if state.leader_id != NO_LEADER:
            return False  # a leader of this epoch exists: a second one must not be elected
        return log_up_to_date
    if name is _S.CANDIDATE:
        # it voted for itself; a pre-vote asks only whether it would vote in the next epoch
        return log_up_to_date if pre_vote else (state.voted_key is not None and state.voted_key.matches(candidate))
    if name is _S.FOLLOWER:
        # KIP-996: while the leader answers its fetches, a follower helps no one depose it
        return pre_vote and log_up_to_date and not state.has_fetched_from_leader
    return False  # Leader, Resigned


def record_vote(state: EpochState, voter_id: int, granted: bool) -> EpochState:
    """A Vote (or PreVote) answer, counted once per voter (Kafka's recordGrantedVote / recordRejectedVote)."""
    if state.name not in (_S.PROSPECTIVE, _S.CANDIDATE):
        raise IllegalTransitionError(f"{state}: not collecting votes")
    if voter_id in state.granted or voter_id in state.rejected:
        return state
    if granted:
        return replace(state, granted=state.granted | {voter_id})
    return replace(state, rejected=state.rejected | {voter_id})


def is_vote_granted(state: EpochState, voter_count: int) -> bool:
    return len(state.granted) >= majority(voter_count)


def is_vote_rejected(state: EpochState, voter_count: int) -> bool:
    """No majority is possible any more."""
    return voter_count - len(state.rejected) < majority(voter_count)


# --- persistence and start-up -----------------------------------------------------------------


def election_state(state: EpochState) -> ElectionState:
    """What the ``quorum-state`` file keeps of a state (Kafka's EpochState.election())."""
    return ElectionState(state.epoch, state.leader_id, state.voted_key)


def initial_state(
    election: ElectionState | None,
    log_last_epoch: int,
    local: ReplicaKey,
    election_deadline_ms: int,
    fetch_deadline_ms: int,
) -> EpochState:
    """Kafka's QuorumState.initialize: the state a replica restarts in, from its ``quorum-state`` file
    and its log. A former leader restarts Resigned in its epoch (so that it neither votes again in that
    epoch nor writes a second entry at an offset it may have lost); a former candidate restarts
    Prospective in its epoch, still having voted for itself."""
    if election is None:
        election = ElectionState(0)
    if election.epoch < log_last_epoch:
        return EpochState(_S.UNATTACHED, log_last_epoch, election_deadline_ms)
    if election.leader_id == local.id:
        return EpochState(
            _S.RESIGNED, election.epoch, election_deadline_ms, leader_id=local.id, voted_key=election.voted_key
        )
    if election.leader_id != NO_LEADER:
        return EpochState(
            _S.FOLLOWER, election.epoch, fetch_deadline_ms, leader_id=election.leader_id, voted_key=election.voted_key
        )
    if election.voted_key is not None and election.voted_key.matches(local):
        return EpochState(
            _S.PROSPECTIVE,
            election.epoch,
            election_deadline_ms,
            voted_key=election.voted_key,
            granted=frozenset({local.id}),
            retries=1,
        )
    return EpochState(_S.UNATTACHED, election.epoch, election_deadline_ms, voted_key=election.voted_key)


# --- the leader's high watermark --------------------------------------------------------------


def high_watermark_update(
    voter_end_offsets: Iterable[int], epoch_start_offset: int, current: int | None
) -> int | None:
    """Kafka's LeaderState.maybeUpdateHighWatermark: the largest offset a majority of voters (the leader
    included) have reached, taken only once it passes the start of the leader's epoch (an entry of the
    leader's own epoch committed: Raft's rule that a leader commits nothing of earlier epochs by counting)
    and only forward. None when it does not move."""
    offsets = sorted(voter_end_offsets, reverse=True)
    candidate = offsets[len(offsets) // 2]
    if candidate > epoch_start_offset and (current is None or candidate > current):
        return candidate
    return None
