"""The epoch states' transition table and the pure functions of odradek.raft.state, one transition at a time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from odradek.raft import state as st
from odradek.raft.state import (
    TRANSITIONS,
    ElectionState,
    EpochState,
    IllegalTransitionError,
    ReplicaKey,
    StateName,
)

S = StateName
LOCAL = ReplicaKey(1)


def unattached(epoch: int = 3, **kw: object) -> EpochState:
    return EpochState(S.UNATTACHED, epoch, 1000, **kw)  # type: ignore[arg-type]


def follower(epoch: int = 3, leader: int = 2, **kw: object) -> EpochState:
    return EpochState(S.FOLLOWER, epoch, 1000, leader_id=leader, **kw)  # type: ignore[arg-type]


def candidate(epoch: int = 3, granted: frozenset[int] = frozenset({1})) -> EpochState:
    return EpochState(S.CANDIDATE, epoch, 1000, voted_key=LOCAL, granted=granted, retries=1)


def leader(epoch: int = 3) -> EpochState:
    return EpochState(S.LEADER, epoch, 1000, leader_id=1, voted_key=LOCAL, epoch_start_offset=5)


def test_every_state_has_a_row_and_no_state_becomes_leader_but_a_candidate() -> None:
    assert set(TRANSITIONS) == set(S)
    assert [f for f, row in TRANSITIONS.items() if S.LEADER in row] == [S.CANDIDATE]
    assert [f for f, row in TRANSITIONS.items() if S.CANDIDATE in row] == [S.PROSPECTIVE, S.RESIGNED]
    assert all(row[S.CANDIDATE] is st.EpochChange.NEXT for row in TRANSITIONS.values() if S.CANDIDATE in row)


# --- the transitions, one by one ----------------------------------------------------------------


def test_unattached_to_unattached_needs_a_greater_epoch_or_a_new_vote() -> None:
    assert st.to_unattached(unattached(3), 5, 0).epoch == 5
    with pytest.raises(IllegalTransitionError, match="only to record a vote"):
        st.to_unattached(unattached(3), 3, 0)
    voted = st.to_unattached_voted(unattached(3), 3, ReplicaKey(2), 0)
    assert voted.voted_key == ReplicaKey(2) and voted.epoch == 3


def test_a_vote_never_changes_within_an_epoch() -> None:
    voted = st.to_unattached_voted(unattached(3), 3, ReplicaKey(2), 0)
    with pytest.raises(IllegalTransitionError, match="already voted"):
        st.to_unattached_voted(voted, 3, ReplicaKey(3), 0)
    with pytest.raises(IllegalTransitionError, match="never changes"):
        st.check_transition(voted, replace(voted, name=S.FOLLOWER, leader_id=3, voted_key=ReplicaKey(3)))
    # the next epoch starts with no vote
    assert st.to_unattached(voted, 4, 0).voted_key is None
    # and a vote is carried through same-epoch moves
    assert st.to_follower(voted, 3, 2, 1, 0).voted_key == ReplicaKey(2)


def test_the_epoch_never_goes_back() -> None:
    with pytest.raises(IllegalTransitionError, match="needs"):
        st.to_unattached(unattached(5), 4, 0)
    with pytest.raises(IllegalTransitionError, match="needs"):
        st.to_follower(unattached(5), 4, 2, 1, 0)


def test_unattached_to_prospective_keeps_the_epoch_and_grants_itself() -> None:
    p = st.to_prospective(unattached(3), 1, 500, 1)
    assert (p.name, p.epoch, p.granted, p.deadline_ms) == (S.PROSPECTIVE, 3, frozenset({1}), 500)


def test_prospective_to_candidate_bumps_the_epoch_by_one_and_votes_for_itself() -> None:
    p = st.to_prospective(unattached(3), 1, 500, 2)
    c = st.to_candidate(p, LOCAL, 800)
    assert (c.name, c.epoch, c.voted_key, c.granted, c.retries) == (S.CANDIDATE, 4, LOCAL, frozenset({1}), 2)


def test_unattached_cannot_skip_the_prevote() -> None:
    with pytest.raises(IllegalTransitionError, match="no transition"):
        st.to_candidate(unattached(3), LOCAL, 0)


def test_prospective_back_to_unattached_or_follower_in_the_same_epoch() -> None:
    p = st.to_prospective(unattached(3), 1, 500, 1)
    assert st.to_unattached(p, 3, 0).name is S.UNATTACHED
    pf = st.to_prospective(follower(3, 2), 1, 500, 1)
    assert pf.leader_id == 2
    assert st.to_follower(pf, 3, 2, 1, 0).leader_id == 2
    with pytest.raises(IllegalTransitionError, match="one leader"):
        st.to_unattached(pf, 3, 0)  # forgetting the leader of the epoch


def test_prospective_records_a_vote_for_another_candidate() -> None:
    p = st.to_prospective(unattached(3), 1, 500, 1)
    voted = st.to_unattached_voted(p, 3, ReplicaKey(2), 0)
    assert voted.name is S.PROSPECTIVE and voted.voted_key == ReplicaKey(2) and voted.granted == {1}


def test_candidate_to_leader_needs_a_majority() -> None:
    with pytest.raises(IllegalTransitionError, match="majority"):
        st.to_leader(candidate(granted=frozenset({1})), 1, 3, 5, 0)
    lead = st.to_leader(candidate(granted=frozenset({1, 3})), 1, 3, 5, 0)
    assert (lead.name, lead.epoch, lead.leader_id, lead.epoch_start_offset) == (S.LEADER, 3, 1, 5)
    assert lead.high_watermark is None  # not carried over


def test_candidate_to_follower_in_its_epoch_and_to_prospective_after_losing() -> None:
    assert st.to_follower(candidate(3), 3, 2, 1, 0).leader_id == 2
    p = st.to_prospective(candidate(3), 1, 0, 2)
    assert p.epoch == 3 and p.voted_key == LOCAL


def test_leader_to_resigned_and_out() -> None:
    r = st.to_resigned(leader(3), [2, 3], 0)
    assert (r.name, r.epoch, r.leader_id, r.unacked) == (S.RESIGNED, 3, 1, frozenset({2, 3}))
    assert st.to_candidate(r, LOCAL, 0).epoch == 4
    with pytest.raises(IllegalTransitionError):
        st.to_follower(leader(3), 3, 2, 1, 0)  # a second leader in the leader's own epoch
    assert st.to_follower(leader(3), 4, 2, 1, 0).epoch == 4


def test_follower_cannot_follow_itself_or_a_second_leader() -> None:
    with pytest.raises(IllegalTransitionError, match="cannot follow"):
        st.to_follower(unattached(3), 3, 1, 1, 0)
    with pytest.raises(IllegalTransitionError):
        st.to_follower(follower(3, 2), 3, 3, 1, 0)


# --- votes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "pre_vote", "up_to_date", "expected"),
    [
        (unattached(), False, True, True),
        (unattached(), False, False, False),
        (unattached(voted_key=ReplicaKey(2)), False, True, True),  # the same candidate again
        (unattached(voted_key=ReplicaKey(3)), False, True, False),
        (unattached(voted_key=ReplicaKey(3)), True, True, True),  # a pre-vote is not a vote
        (candidate(), False, True, False),
        (candidate(), True, True, True),
        (candidate(), True, False, False),
        (follower(), False, True, False),
        (follower(), True, True, True),  # KIP-996: it has not heard from its leader yet
        (follower(has_fetched_from_leader=True), True, True, False),
        (leader(), False, True, False),
        (leader(), True, True, False),
        (st.to_resigned(leader(), [2], 0), True, True, False),
        (st.to_prospective(follower(3, 3), 1, 0, 1), False, True, False),  # a leader of the epoch is known
    ],
)
def test_can_grant_vote(state: EpochState, pre_vote: bool, up_to_date: bool, expected: bool) -> None:
    assert st.can_grant_vote(state, ReplicaKey(2), up_to_date, pre_vote) is expected


def test_directory_ids_of_kip_853_are_compared_when_known() -> None:
    import uuid

    d1, d2 = uuid.UUID(int=1), uuid.UUID(int=2)
    assert ReplicaKey(2, d1).matches(ReplicaKey(2, d1))
    assert not ReplicaKey(2, d1).matches(ReplicaKey(2, d2))
    assert ReplicaKey(2).matches(ReplicaKey(2, d2))  # kraft.version 0 stored no directory id


def test_log_up_to_date_compares_the_epoch_first() -> None:
    assert st.is_log_up_to_date(3, 1, 2, 100)
    assert not st.is_log_up_to_date(2, 101, 3, 1)
    assert st.is_log_up_to_date(3, 5, 3, 5)
    assert not st.is_log_up_to_date(3, 4, 3, 5)


def test_votes_are_counted_once_and_decide_by_majority() -> None:
    c = candidate(granted=frozenset({1}))
    c = st.record_vote(c, 2, False)
    c = st.record_vote(c, 2, True)  # a second answer from the same voter changes nothing
    assert c.rejected == {2} and c.granted == {1}
    assert not st.is_vote_granted(c, 3) and not st.is_vote_rejected(c, 3)
    c = st.record_vote(c, 3, False)
    assert st.is_vote_rejected(c, 3)
    assert st.is_vote_granted(st.record_vote(candidate(), 4, True), 3)
    with pytest.raises(IllegalTransitionError):
        st.record_vote(follower(), 2, True)


# --- start-up (Kafka's QuorumState.initialize) ---------------------------------------------------


def _init(election: ElectionState | None, log_epoch: int = 0) -> EpochState:
    return st.initial_state(election, log_epoch, LOCAL, 1500, 2000)


def test_initial_state_from_the_store_and_the_log() -> None:
    assert _init(None) == EpochState(S.UNATTACHED, 0, 1500)
    assert _init(ElectionState(2), log_epoch=4) == EpochState(S.UNATTACHED, 4, 1500)
    assert _init(ElectionState(4, 1)).name is S.RESIGNED
    f = _init(ElectionState(4, 2, ReplicaKey(2)))
    assert (f.name, f.leader_id, f.voted_key, f.deadline_ms) == (S.FOLLOWER, 2, ReplicaKey(2), 2000)
    p = _init(ElectionState(4, -1, LOCAL))
    assert (p.name, p.epoch, p.voted_key) == (S.PROSPECTIVE, 4, LOCAL)
    u = _init(ElectionState(4, -1, ReplicaKey(3)))
    assert (u.name, u.voted_key) == (S.UNATTACHED, ReplicaKey(3))


def test_election_state_is_what_is_persisted() -> None:
    f = st.to_follower(st.to_unattached_voted(unattached(3), 3, ReplicaKey(2), 0), 3, 2, 1, 0)
    assert st.election_state(f) == ElectionState(3, 2, ReplicaKey(2))


# --- the high watermark --------------------------------------------------------------------------


def test_high_watermark_is_the_majoritys_offset_past_the_epoch_start() -> None:
    assert st.high_watermark_update([10, 7, 3], 5, None) == 7
    assert st.high_watermark_update([10, 7, 3, 2, 9], 5, None) == 7
    assert st.high_watermark_update([10, 5, 3], 5, None) is None  # only up to the epoch's start
    assert st.high_watermark_update([10, 7, 3], 5, 8) is None  # never back
    assert st.high_watermark_update([10, 9, 3], 5, 8) == 9
    assert st.high_watermark_update([4], 3, None) == 4  # the only voter


# --- every cell of the table ----------------------------------------------------------------------

SAMPLES: dict[StateName, EpochState] = {
    S.UNATTACHED: unattached(3),
    S.PROSPECTIVE: st.to_prospective(unattached(3), 1, 0, 1),
    S.CANDIDATE: candidate(3),
    S.LEADER: leader(3),
    S.FOLLOWER: follower(3, 2),
    S.RESIGNED: st.to_resigned(leader(3), [2, 3], 0),
}


def _target(old: EpochState, name: StateName, epoch: int) -> EpochState:
    same = epoch == old.epoch
    leader_id = {S.LEADER: 1, S.RESIGNED: 1, S.FOLLOWER: 2}.get(name, st.NO_LEADER)
    if same and old.leader_id != st.NO_LEADER:
        leader_id = old.leader_id
    voted = old.voted_key if same else None
    if name is S.CANDIDATE:
        voted = LOCAL
    if same and name is S.UNATTACHED and old.name is S.UNATTACHED:
        voted = ReplicaKey(2)  # the one reason to stay Unattached in an epoch
    return EpochState(name, epoch, 0, leader_id=leader_id, voted_key=voted)


CELLS = [(f, t, rule) for f, row in TRANSITIONS.items() for t, rule in row.items()]


@pytest.mark.parametrize(("old", "new", "rule"), CELLS, ids=[f"{f.value}->{t.value}" for f, t, _ in CELLS])
def test_each_allowed_transition_with_its_epoch_rule(old: StateName, new: StateName, rule: st.EpochChange) -> None:
    before = SAMPLES[old]
    allowed = {
        st.EpochChange.SAME: [3],
        st.EpochChange.GREATER: [4, 7],
        st.EpochChange.SAME_OR_GREATER: [3, 4, 7],
        st.EpochChange.NEXT: [4],
    }[rule]
    for epoch in (2, 3, 4, 7):
        target = _target(before, new, epoch)
        if epoch in allowed:
            assert st.check_transition(before, target) is target
        else:
            with pytest.raises(IllegalTransitionError):
                st.check_transition(before, target)


MISSING = [(f, t) for f in S for t in S if t not in TRANSITIONS[f]]


@pytest.mark.parametrize(("old", "new"), MISSING, ids=[f"{f.value}->{t.value}" for f, t in MISSING])
def test_each_transition_not_in_the_table_is_refused(old: StateName, new: StateName) -> None:
    for epoch in (3, 4):
        with pytest.raises(IllegalTransitionError, match="no transition"):
            st.check_transition(SAMPLES[old], _target(SAMPLES[old], new, epoch))
