"""TransactionState's table and TransactionMetadata's transitions (Kafka's TransactionMetadata)."""

from __future__ import annotations

import itertools

import pytest

from odradek.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)

S = TransactionState
E, ON, PC, PA, CC, CA, D, PF = (S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                               S.COMPLETE_ABORT, S.DEAD, S.PREPARE_EPOCH_FENCE)

# Kafka's TransactionState.validPreviousStates, written out independently
KAFKA_TABLE = {
    E: {E, CC, CA},
    ON: {ON, E, CC, CA},
    PC: {ON},
    PA: {ON, PF, E, CC, CA},
    CC: {PC},
    CA: {PA},
    D: {E, CA, CC},
    PF: {ON},
}


def test_ids_names_and_expiration_as_kafka_writes_them() -> None:
    assert [(s.id, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]
    assert {s for s in S if s.expiration_allowed} == {E, CC, CA}
    assert all(S.from_id(s.id) is s and S.from_name(s.state_name) is s for s in S)
    assert S.from_name("Nope") is None
    with pytest.raises(ValueError):
        S.from_id(8)


def test_table_is_kafkas() -> None:
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == KAFKA_TABLE
    assert all(s.valid_previous_states == VALID_PREVIOUS_STATES[s] for s in S)


def meta(state: TransactionState = E, epoch: int = 3, partitions: set[tuple[str, int]] | None = None,
         start: int = -1) -> TransactionMetadata:
    return TransactionMetadata("tx", 100, producer_epoch=epoch, txn_timeout_ms=1000, state=state,
                               topic_partitions=set(partitions or ()), txn_start_timestamp=start,
                               txn_last_update_timestamp=0)


@pytest.mark.parametrize("source,target", list(itertools.product(list(S), list(S))))
def test_every_transition_legal_or_illegal(source: TransactionState, target: TransactionState) -> None:
    md = meta(source)
    legal = source in KAFKA_TABLE[target]
    if legal:
        t = md._prepare(target, 100, 4, 3, 1000, frozenset(), -1, 5)
        assert md.pending_state is target and t.txn_state is target
        # a pending transition blocks any other
        with pytest.raises(IllegalTransitionError):
            md._prepare(target, 100, 4, 3, 1000, frozenset(), -1, 5)
    else:
        with pytest.raises(IllegalTransitionError):
            md._prepare(target, 100, 4, 3, 1000, frozenset(), -1, 5)
        assert md.pending_state is None


@pytest.mark.parametrize("source", list(S))
def test_public_prepares_follow_the_table(source: TransactionState) -> None:
    calls = {
        ON: lambda m: m.prepare_add_partitions({("t", 0)}, 10),
        PC: lambda m: m.prepare_abort_or_commit(PC, 10),
        PA: lambda m: m.prepare_abort_or_commit(PA, 10),
        D: lambda m: m.prepare_dead(),
        PF: lambda m: m.prepare_fence_producer_epoch(),
        E: lambda m: m.prepare_incr_producer_epoch(1000, None, 10),
    }
    for target, call in calls.items():
        md = meta(source)
        if source in KAFKA_TABLE[target]:
            assert call(md).txn_state is target
        else:
            with pytest.raises(IllegalTransitionError):
                call(md)
    md = meta(source)
    target = CC if source == PC else CA
    if source in KAFKA_TABLE[target]:
        assert md.prepare_complete(10).txn_state is target
    else:
        with pytest.raises(IllegalTransitionError):
            md.prepare_complete(10)


def test_a_full_transaction() -> None:
    md = TransactionMetadata("tx", 100, txn_timeout_ms=1000, txn_last_update_timestamp=0)
    t = md.prepare_incr_producer_epoch(1000, None, 1)
    assert (t.producer_epoch, t.last_producer_epoch, t.txn_state) == (0, NO_PRODUCER_EPOCH, E)
    md.complete_transition_to(t)
    assert md.producer_epoch == 0 and md.pending_state is None
    t = md.prepare_add_partitions({("a", 0)}, 5)
    md.complete_transition_to(t)
    assert md.state is ON and md.txn_start_timestamp == 5 and md.topic_partitions == {("a", 0)}
    t = md.prepare_add_partitions({("b", 1)}, 7)
    assert t.txn_start_timestamp == 5  # the transaction's clock keeps running
    md.complete_transition_to(t)
    assert md.topic_partitions == {("a", 0), ("b", 1)} and md.txn_last_update_timestamp == 7
    t = md.prepare_abort_or_commit(PC, 9)
    assert t.topic_partitions == {("a", 0), ("b", 1)}
    md.complete_transition_to(t)
    assert md.state is PC
    t = md.prepare_complete(11)
    assert t.txn_state is CC and not t.topic_partitions
    md.complete_transition_to(t)
    assert md.state is CC and not md.topic_partitions and md.txn_last_update_timestamp == 11
    # the next transaction starts afresh
    t = md.prepare_add_partitions({("c", 2)}, 20)
    assert t.txn_start_timestamp == 20 and t.topic_partitions == {("c", 2)}


def test_kip360_expected_epochs() -> None:
    md = meta(E, epoch=10)
    md.last_producer_epoch = 9
    t = md.prepare_incr_producer_epoch(1000, 10, 1)  # the current epoch: bumped, remembered
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (11, 10)
    md.complete_transition_to(t)
    t = md.prepare_incr_producer_epoch(1000, 10, 2)  # a retry (lost answer): the same epoch again
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (11, 10)
    md.complete_transition_to(t)
    md2 = meta(E, epoch=11)
    md2.last_producer_epoch = 10
    assert md2.prepare_incr_producer_epoch(1000, 9, 3) is None  # fenced
    assert md2.pending_state is None
    fresh = meta(E, epoch=NO_PRODUCER_EPOCH)  # just created: any expected epoch is accepted
    t = fresh.prepare_incr_producer_epoch(1000, 5, 3)
    assert t is not None and t.producer_epoch == 0


def test_epoch_exhaustion_and_rotation() -> None:
    assert not is_epoch_exhausted(SHORT_MAX - 2) and is_epoch_exhausted(SHORT_MAX - 1)
    md = meta(CC, epoch=SHORT_MAX - 1)
    with pytest.raises(IllegalTransitionError):
        md.prepare_incr_producer_epoch(1000, None, 1)
    t = md.prepare_producer_id_rotation(200, 2000, 5, record_last_epoch=True)
    assert (t.producer_id, t.prev_producer_id, t.producer_epoch, t.last_producer_epoch) == (200, 100, 0, SHORT_MAX - 1)
    md.complete_transition_to(t)
    assert (md.producer_id, md.previous_producer_id, md.producer_epoch, md.txn_timeout_ms) == (200, 100, 0, 2000)
    with pytest.raises(IllegalTransitionError):
        meta(ON).prepare_producer_id_rotation(200, 1000, 5, record_last_epoch=False)


def test_fence_bumps_once_and_not_past_short_max() -> None:
    md = meta(ON, epoch=4, partitions={("a", 0)}, start=1)
    t = md.prepare_fence_producer_epoch()
    assert t.producer_epoch == 5 and t.last_producer_epoch == NO_PRODUCER_EPOCH
    with pytest.raises(IllegalTransitionError):  # never written: cannot be completed
        md.complete_transition_to(t)
    md.pending_state = None
    md.has_failed_epoch_fence = True
    assert md.prepare_fence_producer_epoch().producer_epoch == 4
    with pytest.raises(IllegalTransitionError):
        meta(ON, epoch=SHORT_MAX).prepare_fence_producer_epoch()


def test_complete_transition_validates_like_kafka() -> None:
    md = meta(ON, partitions={("a", 0)}, start=1)
    t = md.prepare_abort_or_commit(PA, 3)
    with pytest.raises(IllegalTransitionError):  # not the pending state
        md.complete_transition_to(TxnTransitMetadata(100, 100, -1, 3, -1, 1000, PC, t.topic_partitions, 1, 3))
    with pytest.raises(IllegalTransitionError):  # another epoch
        md.complete_transition_to(TxnTransitMetadata(100, 100, -1, 4, -1, 1000, PA, t.topic_partitions, 1, 3))
    with pytest.raises(IllegalTransitionError):  # other partitions
        md.complete_transition_to(TxnTransitMetadata(100, 100, -1, 3, -1, 1000, PA, frozenset(), 1, 3))
    md.complete_transition_to(t)
    with pytest.raises(IllegalTransitionError):  # nothing pending
        md.complete_transition_to(t)
    dead = meta(CA)
    with pytest.raises(IllegalTransitionError):  # Dead is completed by removal only
        dead.complete_transition_to(dead.prepare_dead())
    empty = meta(E, epoch=3)
    t = empty.prepare_incr_producer_epoch(1000, None, 1)
    with pytest.raises(IllegalTransitionError):  # an epoch jump is not a bump
        empty.complete_transition_to(TxnTransitMetadata(100, 100, -1, 7, -1, 1000, E, frozenset(), -1, 1))
    empty.complete_transition_to(t)
    assert empty.producer_epoch == 4
    ongoing = meta(ON, partitions={("a", 0)}, start=1)
    ongoing.prepare_add_partitions({("b", 0)}, 2)
    with pytest.raises(IllegalTransitionError):  # partitions dropped
        ongoing.complete_transition_to(TxnTransitMetadata(100, 100, -1, 3, -1, 1000, ON, frozenset({("b", 0)}), 1, 2))


def test_prepare_refuses_negative_ids_and_epochs() -> None:
    with pytest.raises(IllegalTransitionError):
        meta(E)._prepare(ON, -1, 0, -1, 1000, frozenset(), 1, 1)
    with pytest.raises(IllegalTransitionError):
        meta(E)._prepare(ON, 1, -1, -1, 1000, frozenset(), 1, 1)
    meta(E)._prepare(D, 1, -1, -1, 1000, frozenset(), 1, 1)  # Dead may carry epoch -1
