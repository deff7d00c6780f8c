"""RaftReplica, one behaviour of KafkaRaftClient at a time, on a hand-driven quorum (harness.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from odradek.protocol import errors
from odradek.raft.client import NotLeaderError, QuorumConfig, RaftReplica
from odradek.raft.log import InMemoryRaftLog, LeaderChangeMessage, LogEntry
from odradek.raft.messages import (
    Appended,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    HighWatermarkChanged,
    LeaderChanged,
    RaftRequest,
    Received,
    ReplicaInfo,
    Send,
    Truncated,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.quorum_store import InMemoryQuorumStateStore
from odradek.raft.state import ElectionState, ReplicaKey, StateName

from .harness import Harness


def vote(epoch: int, candidate: int, *, last_epoch: int = 0, last_offset: int = 0, pre_vote: bool = False) -> VoteRequest:
    return VoteRequest(None, -1, epoch, candidate, None, None, last_epoch, last_offset, pre_vote)


def ask(r: RaftReplica, source: int, message: RaftRequest, now: int = 0) -> Any:
    """The answer replica ``r`` sends back to ``source``'s request."""
    effects = r.handle(Received(source, 7, message), now)
    [answer] = [e for e in effects if isinstance(e, Send) and e.destination == source and e.correlation_id == 7]
    return answer.message


def name(r: RaftReplica) -> StateName:
    return r.state.name


def test_starts_unattached_in_epoch_zero_and_persists_it() -> None:
    h = Harness()
    r = h.replicas[1]
    assert r.state.name is StateName.UNATTACHED and r.epoch == 0
    assert h.stores[1].election == ElectionState(0)
    deadline = r.next_deadline_ms()
    assert 1000 <= deadline < 2000  # controller.quorum.election.timeout.ms, randomized in [t, 2t)


def test_election_timeout_is_randomized_from_the_injected_random() -> None:
    deadlines = {Harness(seed=s).replicas[1].next_deadline_ms() for s in range(20)}
    assert len(deadlines) > 10
    assert Harness(seed=3).replicas[2].next_deadline_ms() == Harness(seed=3).replicas[2].next_deadline_ms()


def test_election_timeout_starts_prevote_without_bumping_the_epoch() -> None:
    h = Harness()
    effects = h.timeout(1)
    r = h.replicas[1]
    assert r.state.name is StateName.PROSPECTIVE and r.epoch == 0
    votes = [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, VoteRequest)]
    assert sorted(v.voter_id for v in votes) == [2, 3]
    assert all(v.pre_vote and v.replica_epoch == 1 and v.replica_id == 1 for v in votes)
    assert h.stores[1].election == ElectionState(0)  # nothing voted, nothing bumped


def test_prevote_majority_makes_a_candidate_then_a_leader() -> None:
    h = Harness()
    h.timeout(1)
    h.deliver_all()
    r = h.replicas[1]
    assert r.is_leader() and r.epoch == 1
    assert h.stores[1].election == ElectionState(1, 1, ReplicaKey(1))
    # the pre-votes were not persisted by the voters; the real votes were
    assert ReplicaKey(1) in {e.voted_key for e in (h.stores[2].election, h.stores[3].election) if e}
    # the leader wrote its LeaderChangeMessage in its epoch
    first = h.logs[1].entries[0]
    assert first.epoch == 1 and isinstance(first.value, LeaderChangeMessage) and first.value.leader_id == 1
    assert LeaderChanged(1, 1) in h.effects[1]
    # BeginQuorumEpoch told the others
    assert h.replicas[2].state.name is StateName.FOLLOWER and h.replicas[2].leader_id == 1
    assert h.replicas[3].state.name is StateName.FOLLOWER and h.replicas[3].epoch == 1


def test_vote_is_persisted_before_the_answer_leaves() -> None:
    h = Harness()
    answer = ask(h.replicas[2], 1, vote(1, 1))
    assert answer == VoteResponse(errors.NONE, -1, 1, True)
    assert h.stores[2].election == ElectionState(1, -1, ReplicaKey(1))


def test_prevote_is_granted_without_changing_state() -> None:
    h = Harness()
    answer = ask(h.replicas[2], 1, vote(1, 1, pre_vote=True))
    assert answer.vote_granted
    assert h.replicas[2].epoch == 0 and h.stores[2].election == ElectionState(0)


def test_one_vote_per_epoch_even_across_a_restart() -> None:
    h = Harness()
    assert ask(h.replicas[2], 1, vote(1, 1)).vote_granted
    assert not ask(h.replicas[2], 3, vote(1, 3)).vote_granted
    r = h.start(2)  # restart: the vote comes back from the quorum-state store
    assert r.state.voted_key == ReplicaKey(1)
    assert not ask(r, 3, vote(1, 3)).vote_granted
    assert ask(r, 1, vote(1, 1)).vote_granted  # the same candidate again: yes


def test_vote_refused_to_a_candidate_with_a_shorter_log() -> None:
    h = Harness()
    h.logs[2].append([LogEntry(0, 1, b"a"), LogEntry(1, 1, b"b")])
    r = h.start(2)
    assert r.epoch == 1  # the epoch of its log, the store being behind
    assert not ask(r, 1, vote(2, 1, last_epoch=1, last_offset=1)).vote_granted
    assert not ask(r, 3, vote(2, 3, last_epoch=0, last_offset=5)).vote_granted  # epoch counts first
    assert ask(r, 3, vote(2, 3, last_epoch=1, last_offset=2)).vote_granted


def test_vote_from_an_older_epoch_is_fenced_and_an_invalid_one_refused() -> None:
    h = Harness()
    ask(h.replicas[2], 1, vote(3, 1))
    assert ask(h.replicas[2], 3, vote(2, 3)).error_code == errors.FENCED_LEADER_EPOCH
    assert ask(h.replicas[2], 3, vote(4, 3, last_epoch=4)).error_code == errors.INVALID_REQUEST


def test_vote_with_a_larger_epoch_makes_a_leader_step_down() -> None:
    h = Harness()
    leader = h.elect(1)
    answer = ask(leader, 2, vote(5, 2, last_epoch=1, last_offset=1))
    assert leader.state.name is StateName.UNATTACHED and leader.epoch == 5
    assert answer.vote_granted


def test_a_known_leader_blocks_votes_and_prevotes_while_it_answers() -> None:
    h = Harness()
    h.elect(1)
    h.replicate()
    follower = h.replicas[2]
    assert follower.state.has_fetched_from_leader
    assert not ask(follower, 3, vote(2, 3, last_epoch=1, last_offset=1, pre_vote=True)).vote_granted
    # a standard Vote in the leader's epoch is refused (one leader per epoch)
    assert not ask(follower, 3, vote(1, 3, last_epoch=0, last_offset=1)).vote_granted
    assert follower.state.name is StateName.FOLLOWER and follower.leader_id == 1


def test_follower_fetch_timeout_makes_it_prospective_and_lost_prevote_returns_it() -> None:
    h = Harness()
    h.elect(1)
    h.replicate()
    h.now += 2000  # controller.quorum.fetch.timeout.ms without an answer from the leader for replica 2
    h.tick(1)  # the leader answers the parked fetches: replica 3's answer arrives, replica 2's is lost
    h.deliver_all(drop=lambda s, m: m.destination == 2, hold=lambda s, m: isinstance(m.message, FetchRequest))
    h.pending.clear()
    h.tick(2)
    r2 = h.replicas[2]
    assert r2.state.name is StateName.PROSPECTIVE and r2.epoch == 1 and r2.leader_id == 1
    # replica 3 still hears from the leader: it refuses; the leader refuses too
    assert h.replicas[3].state.has_fetched_from_leader
    h.deliver_all(drop=lambda s, m: isinstance(m.message, (FetchRequest, FetchResponse)))
    assert name(r2) is StateName.FOLLOWER and r2.leader_id == 1 and r2.epoch == 1


def test_followers_replicate_and_the_high_watermark_needs_a_majority() -> None:
    h = Harness()
    leader = h.elect(1)
    h.replicate()
    assert leader.high_watermark == 1  # the LeaderChangeMessage, committed
    offset = h.append(1, b"x", b"y")
    assert offset == 2
    assert leader.high_watermark == 1  # the leader alone is no majority
    h.replicate()
    assert leader.high_watermark == 3
    assert [e.value for e in h.logs[2].entries] == [h.logs[1].entries[0].value, b"x", b"y"]
    assert h.replicas[2].high_watermark == 3
    assert HighWatermarkChanged(3) in h.effects[1]


def test_high_watermark_waits_for_an_entry_of_the_leaders_epoch() -> None:
    # replicas 1 and 2 hold two entries of epoch 1 that were never committed. As leader of epoch 2,
    # replica 1 sees replica 2 at offset 2: a majority has offsets 0 and 1, but they are of an older
    # epoch; nothing is committed until its own LeaderChangeMessage (offset 2) is on a majority.
    h = Harness()
    for i in (1, 2):
        h.logs[i].append([LogEntry(0, 1, b"a"), LogEntry(1, 1, b"b")])
    for i in h.ids:
        h.stores[i].election = ElectionState(1)
        h.start(i)
    h.timeout(1)
    h.deliver_all(hold=lambda s, m: isinstance(m.message, FetchRequest))
    leader = h.replicas[1]
    assert leader.is_leader() and leader.epoch == 2 and leader.state.epoch_start_offset == 2
    [(source, fetch)] = h.take(lambda s, m: s == 2 and isinstance(m.message, FetchRequest))
    assert isinstance(fetch.message, FetchRequest)
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (2, 1)
    h.deliver(source, fetch)
    assert leader.high_watermark is None  # offsets 0-1 are on a majority, but not committed yet
    h.deliver_all()
    h.tick(2)
    h.deliver_all()
    assert leader.high_watermark == 3


def test_diverging_follower_truncates_to_the_leaders_epoch_end() -> None:
    h = Harness()
    # replica 3 was leader of epoch 1 alone and wrote entries nobody else has
    h.logs[1].append([LogEntry(0, 1, b"a")])
    h.logs[2].append([LogEntry(0, 1, b"a")])
    h.logs[3].append([LogEntry(0, 1, b"a"), LogEntry(1, 1, b"lost1"), LogEntry(2, 1, b"lost2")])
    for i in h.ids:
        h.stores[i].election = ElectionState(1, 3)
    for i in h.ids:
        h.start(i)
    # 1 and 2 lose the leader and elect 1 in epoch 2 (replica 3 is cut off meanwhile)
    h.timeout(1)
    h.deliver_all(drop=lambda s, m: 3 in (s, m.destination))
    leader = h.replicas[1]
    assert leader.is_leader() and leader.epoch == 2
    h.pending.clear()
    ask(h.replicas[3], 1, BeginQuorumEpochRequest(None, 3, None, 1, 2))
    h.replicate()
    # 3 learns of epoch 2, fetches from offset 3 in epoch 1, is told epoch 1 ends at 1, truncates
    assert Truncated(1) in h.effects[3]
    assert [(e.epoch, e.value) for e in h.logs[3].entries] == [(e.epoch, e.value) for e in h.logs[1].entries]


def test_fetch_is_parked_until_an_append() -> None:
    h = Harness()
    leader = h.elect(1)
    h.replicate()
    # both followers' fetches wait at the leader, which has nothing new for them: no answer yet
    assert not h.pending
    assert leader.next_deadline_ms() <= h.now + 500  # MaxWaitMs
    h.append(1, b"z")
    answers = [m.message for s, m in h.pending if s == 1 and m.destination == 2 and isinstance(m.message, FetchResponse)]
    assert [r.value for a in answers if isinstance(a, FetchResponse) for r in a.records] == [b"z"]


def test_fetch_with_a_wrong_epoch_is_refused() -> None:
    h = Harness()
    leader = h.elect(1)
    old = ask(leader, 2, FetchRequest(None, 2, 0, 0, 0, 0))
    assert old.error_code == errors.FENCED_LEADER_EPOCH and old.current_leader.leader_id == 1
    new = ask(leader, 2, FetchRequest(None, 2, 0, 9, 0, 0))
    assert new.error_code == errors.UNKNOWN_LEADER_EPOCH
    bad = ask(leader, 2, FetchRequest(None, 2, 0, 1, 0, 2))
    assert bad.error_code == errors.INVALID_REQUEST
    follower = h.replicas[2]
    assert ask(follower, 3, FetchRequest(None, 3, 0, 1, 0, 0)).error_code == errors.NOT_LEADER_OR_FOLLOWER


def test_append_only_on_the_leader() -> None:
    h = Harness()
    with pytest.raises(NotLeaderError):
        h.replicas[1].append([b"x"], 0)


def test_leader_without_a_majority_of_fetches_resigns_and_says_so() -> None:
    h = Harness()
    leader = h.elect(1)
    h.replicate()
    h.pending.clear()
    h.now += 3000  # 1.5 x controller.quorum.fetch.timeout.ms without fetches
    h.tick(1)
    assert leader.state.name is StateName.RESIGNED and leader.epoch == 1
    ends = h.sent(1, EndQuorumEpochRequest)
    assert sorted(e.destination for e in ends) == [2, 3]
    assert isinstance(ends[0].message, EndQuorumEpochRequest)
    assert ends[0].message.preferred_candidates == (ReplicaInfo(2), ReplicaInfo(3))
    h.deliver_all(drop=lambda s, m: not isinstance(m.message, EndQuorumEpochRequest))
    # the first preferred successor stands at once, the next one waits (strict exponential backoff)
    assert h.replicas[2].state.name is StateName.PROSPECTIVE
    assert h.replicas[3].state.name is StateName.FOLLOWER and h.replicas[3].state.deadline_ms == h.now + 500


def test_restarted_leader_comes_back_resigned_in_its_epoch() -> None:
    h = Harness()
    h.elect(1)
    r = h.start(1)
    assert r.state.name is StateName.RESIGNED and r.epoch == 1
    assert not ask(r, 2, vote(1, 2, last_epoch=0, last_offset=1)).vote_granted


def test_restarted_candidate_comes_back_prospective_having_voted_for_itself() -> None:
    h = Harness()
    h.stores[1].election = ElectionState(4, -1, ReplicaKey(1))
    r = h.start(1)
    assert r.state.name is StateName.PROSPECTIVE and r.epoch == 4 and r.state.voted_key == ReplicaKey(1)
    assert not ask(r, 2, vote(4, 2)).vote_granted


def test_begin_quorum_epoch_makes_a_follower_and_answers_the_leader() -> None:
    h = Harness()
    answer = ask(h.replicas[2], 1, BeginQuorumEpochRequest(None, 2, None, 1, 3))
    assert answer == BeginQuorumEpochResponse(errors.NONE, 1, 3)
    assert h.replicas[2].state.name is StateName.FOLLOWER and h.stores[2].election == ElectionState(3, 1)
    wrong = ask(h.replicas[2], 1, BeginQuorumEpochRequest(None, 3, None, 1, 3))
    assert wrong.error_code == errors.INVALID_VOTER_KEY


def test_end_quorum_epoch_backoff_follows_the_preferred_order() -> None:
    h = Harness()
    ask(h.replicas[2], 1, BeginQuorumEpochRequest(None, 2, None, 1, 3))
    ask(h.replicas[2], 1, EndQuorumEpochRequest(None, 1, 3, (ReplicaInfo(3), ReplicaInfo(2))), now=10)
    # second of two: electionBackoffMaxMs >> 1 = 500
    assert h.replicas[2].next_deadline_ms() == 10 + 500


@pytest.mark.parametrize("seed", range(6))
def test_candidate_that_loses_backs_off_then_tries_prevote_again(seed: int) -> None:
    h = Harness(seed=seed)
    h.timeout(1)
    h.deliver_all(hold=lambda s, m: isinstance(m.message, VoteRequest) and not m.message.pre_vote)
    r = h.replicas[1]
    assert r.state.name is StateName.CANDIDATE and r.epoch == 1
    for i in (2, 3):  # both voters vote for replica 3 in epoch 1 first
        assert ask(h.replicas[i], 3, vote(1, 3)).vote_granted
    h.deliver_all(hold=lambda s, m: s == 1 and isinstance(m.message, VoteRequest) and m.message.pre_vote)
    if r.state.name is StateName.CANDIDATE:  # a backoff of 100 x random [0, 2): 0 ms goes on at once
        assert r.state.rejected == {2, 3}
        backoff = r.state.backoff_until_ms
        assert backoff is not None and h.now < backoff <= h.now + 1000  # controller.quorum.election.backoff.max.ms
        h.tick(1, backoff)
    assert name(r) is StateName.PROSPECTIVE and r.epoch == 1 and r.state.retries == 2


def test_stale_and_unexpected_responses_are_ignored() -> None:
    h = Harness()
    r = h.replicas[1]
    effects = r.handle(Received(2, 12345, VoteResponse(errors.NONE, -1, 0, True)), 0)
    assert effects == [] and r.state.name is StateName.UNATTACHED


def test_single_voter_elects_itself_and_commits_alone() -> None:
    h = Harness(voters=1)
    h.tick(1)
    leader = h.replicas[1]
    assert leader.is_leader() and leader.epoch == 1 and leader.high_watermark == 1
    h.append(1, b"a")
    assert leader.high_watermark == 2
    h.tick(1, 100_000)
    assert leader.is_leader()  # the only voter never fails its check-quorum


def test_describe_quorum_on_the_leader() -> None:
    h = Harness()
    leader = h.elect(1)
    h.replicate()
    d = leader.describe_quorum(h.now)
    assert d.error_code == errors.NONE and d.leader_id == 1 and d.leader_epoch == 1 and d.high_watermark == 1
    assert [v.replica_id for v in d.current_voters] == [1, 2, 3]
    assert all(v.log_end_offset == 1 for v in d.current_voters)
    assert h.replicas[2].describe_quorum(h.now).error_code == errors.NOT_LEADER_OR_FOLLOWER


def test_effects_report_appends_to_the_log() -> None:
    h = Harness()
    h.elect(1)
    h.replicate()
    appended = [e for e in h.effects[2] if isinstance(e, Appended)]
    assert appended and appended[0].entries[0].offset == 0


def test_not_a_voter_is_refused_for_now() -> None:
    with pytest.raises(ValueError, match="not one of the voters"):
        RaftReplica(
            local_id=9,
            voters=[1, 2, 3],
            log=InMemoryRaftLog(),
            store=InMemoryQuorumStateStore(),
            rng=random.Random(0),
            now_ms=0,
            config=QuorumConfig(),
        )


def test_fetch_answers_up_to_the_leaders_bound_whatever_the_request_says() -> None:
    """Kafka's leader reads up to its own maxFetchSizeInBytes (KafkaMetadataLog.read) and at least one record;
    the request's partition max bytes is not read (a Kafka broker fetching as an observer sends 0)."""
    h = Harness(config=QuorumConfig(fetch_max_bytes=8))
    leader = h.elect(1)
    h.append(1, b"aaaa", b"bbbb", b"cccc")
    for asked in (0, 1, 1 << 20):
        two = ask(leader, 2, FetchRequest(None, 2, 0, 1, 1, 1, max_bytes=asked))
        assert [e.value for e in two.records] == [b"aaaa", b"bbbb"]
    h = Harness(config=QuorumConfig(fetch_max_bytes=1))
    leader = h.elect(1)
    h.append(1, b"aaaa", b"bbbb")
    one = ask(leader, 2, FetchRequest(None, 2, 0, 1, 1, 1, max_bytes=0))
    assert [e.value for e in one.records] == [b"aaaa"]


def test_an_observer_is_answered_but_does_not_count_towards_the_high_watermark() -> None:
    """A broker (replica id 100, not a voter) fetching the metadata log gets records and the high watermark,
    as Kafka's leader answers observers, and its fetch moves neither the high watermark nor check-quorum."""
    h = Harness()
    leader = h.elect(1)
    h.replicate()
    hw = leader.high_watermark
    assert hw == 1
    h.append(1, b"x", b"y")
    epoch = leader.epoch
    answer = ask(leader, 100, FetchRequest(None, 100, 0, epoch, 0, 0), h.now)
    assert answer.error_code == errors.NONE and answer.high_watermark == hw
    assert [e.value for e in answer.records][1:] == [b"x", b"y"]
    answer = ask(leader, 100, FetchRequest(None, 100, 0, epoch, 3, epoch), h.now)  # caught up to the log end
    assert answer.records == () or not answer.records
    assert leader.high_watermark == hw  # the observer is no voter: still only the leader has offset 3
    assert all(r.replica_id != 100 for r in leader.describe_quorum(h.now).current_voters)
    h.replicate()
    assert leader.high_watermark == 3
    answer = ask(leader, 100, FetchRequest(None, 100, 0, epoch, 3, epoch), h.now)
    assert answer.high_watermark == 3
