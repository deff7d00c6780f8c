"""transaction.version 2 (KIP-890 part 2) in the transaction coordinator and its state machine:
an epoch bump on every EndTxn, retries recognised by the epoch before the bump, producer id
rotation through NextProducerId, empty aborts, and the coordinator's own aborts."""

from __future__ import annotations

import pytest

from odradek.coordinator.transaction import records as rec
from odradek.coordinator.transaction.coordinator import EndTxnResult, InitProducerIdResult
from odradek.coordinator.transaction.state import (
    NO_PRODUCER_ID,
    SHORT_MAX,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    supports_epoch_bump,
)
from odradek.protocol import errors

from .test_coordinator import TID, Env

S = TransactionState
TV2 = 2
PARTS = [("orders", 0), ("orders", 1)]


def add2(env: Env, pid: int, epoch: int, parts: list[tuple[str, int]] = PARTS) -> int | None:
    """AddPartitionsToTxn v5 from a partition leader (Produce v12)."""
    box: list[int] = []
    env.coord.add_partitions(TID, pid, epoch, parts, box.append, TV2)
    return box[0] if box else None


def end2(env: Env, pid: int, epoch: int, commit: bool) -> EndTxnResult | None:
    """EndTxn v5."""
    box: list[EndTxnResult] = []
    env.coord.end_txn(TID, pid, epoch, commit, box.append, TV2)
    return box[0] if box else None


def values(env: Env) -> list[rec.TransactionLogValue]:
    out = []
    for _, k, v in env.log.records:
        if rec.decode_key(k) == TID:
            d = rec.decode_value(v)
            assert d is not None
            out.append(d)
    return out


# ---------------------------------------------------------------- the pure state machine
def test_supports_epoch_bump() -> None:
    assert [supports_epoch_bump(v) for v in (0, 1, 2, 3)] == [False, False, True, True]


def test_state_tv2_commit_bumps_the_epoch_in_prepare_and_keeps_it_in_complete() -> None:
    md = TransactionMetadata(TID, 7, producer_epoch=3, state=S.EMPTY, txn_last_update_timestamp=1)
    md.complete_transition_to(md.prepare_add_partitions({("t", 0)}, 10, TV2))
    assert (md.state, md.client_transaction_version, md.txn_start_timestamp) == (S.ONGOING, TV2, 10)
    prep = md.prepare_abort_or_commit(S.PREPARE_COMMIT, 20)
    assert (prep.producer_id, prep.producer_epoch, prep.last_producer_epoch, prep.next_producer_id) == (7, 4, 3, -1)
    md.complete_transition_to(prep)
    assert (md.producer_epoch, md.last_producer_epoch, md.topic_partitions) == (4, 3, {("t", 0)})
    done = md.prepare_complete(30)
    assert (done.txn_state, done.producer_id, done.producer_epoch, done.last_producer_epoch) == (
        S.COMPLETE_COMMIT, 7, 4, 3)
    md.complete_transition_to(done)
    assert (md.state, md.producer_id, md.producer_epoch, md.topic_partitions) == (S.COMPLETE_COMMIT, 7, 4, set())


def test_state_tv1_keeps_the_epoch() -> None:
    md = TransactionMetadata(TID, 7, producer_epoch=3)
    md.complete_transition_to(md.prepare_add_partitions({("t", 0)}, 10, 0))
    prep = md.prepare_abort_or_commit(S.PREPARE_ABORT, 20)
    assert (prep.producer_epoch, prep.last_producer_epoch) == (3, -1)
    md.complete_transition_to(prep)
    md.complete_transition_to(md.prepare_complete(30))
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 3)


def test_state_tv2_overflow_moves_to_the_next_producer_id() -> None:
    md = TransactionMetadata(TID, 7, producer_epoch=SHORT_MAX - 1)
    md.complete_transition_to(md.prepare_add_partitions({("t", 0)}, 10, TV2))
    prep = md.prepare_abort_or_commit(S.PREPARE_COMMIT, 20, next_producer_id=8)
    assert (prep.producer_id, prep.producer_epoch, prep.next_producer_id) == (7, SHORT_MAX, 8)
    md.complete_transition_to(prep)
    assert md.next_producer_id == 8
    done = md.prepare_complete(30)
    assert (done.producer_id, done.prev_producer_id, done.producer_epoch, done.next_producer_id) == (8, 7, 0, -1)
    md.complete_transition_to(done)
    assert (md.producer_id, md.previous_producer_id, md.producer_epoch, md.next_producer_id) == (8, 7, 0, -1)
    assert md.last_producer_epoch == SHORT_MAX - 1  # the last epoch the client saw


def test_state_tv2_empty_abort_and_its_checks() -> None:
    md = TransactionMetadata(TID, 7, producer_epoch=2, state=S.COMPLETE_COMMIT, txn_start_timestamp=5)
    prep = md.prepare_abort_or_commit(S.PREPARE_ABORT, 40, TV2, no_partition_added=True)
    assert (prep.txn_start_timestamp, prep.producer_epoch, prep.topic_partitions) == (40, 3, frozenset())
    md.complete_transition_to(prep)
    assert (md.state, md.txn_start_timestamp) == (S.PREPARE_ABORT, 40)
    # a commit from CompleteCommit is not a transition Kafka allows
    md2 = TransactionMetadata(TID, 7, producer_epoch=2, state=S.COMPLETE_COMMIT)
    with pytest.raises(IllegalTransitionError):
        md2.prepare_abort_or_commit(S.PREPARE_COMMIT, 40, TV2)
    # a written transit that skips epochs does not apply
    md3 = TransactionMetadata(TID, 7, producer_epoch=2, state=S.ONGOING, txn_start_timestamp=1)
    bad = md3.prepare_abort_or_commit(S.PREPARE_COMMIT, 40, TV2)
    md3.producer_epoch = 0
    with pytest.raises(IllegalTransitionError):
        md3.complete_transition_to(bad)


# ---------------------------------------------------------------- the coordinator
def test_tv2_commit_returns_the_bumped_epoch_and_markers_carry_it() -> None:
    env = Env()
    assert env.init() == InitProducerIdResult(errors.NONE, 1000, 0)
    assert add2(env, 1000, 0) == errors.NONE
    assert env.md().client_transaction_version == TV2
    env.markers.auto = False
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 1)
    assert env.markers.sent == [(1000, 1, TransactionResult.COMMIT, frozenset(PARTS), 1)]
    # a retry while the markers are written (the client did not hear the answer): still busy;
    # the bumped epoch is not one a client can have yet
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.CONCURRENT_TRANSACTIONS)
    assert end2(env, 1000, 1, commit=True) == EndTxnResult(errors.PRODUCER_FENCED)
    env.markers.ack()
    env.markers.auto = True
    assert env.log.states() == [("Empty", 1000, 0), ("Ongoing", 1000, 0), ("PrepareCommit", 1000, 1),
                                ("CompleteCommit", 1000, 1)]
    assert [v.client_transaction_version for v in values(env)] == [0, TV2, TV2, TV2]
    # a retry after completion: the same answer; the other result is refused
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 1)
    assert end2(env, 1000, 0, commit=False) == EndTxnResult(errors.INVALID_TXN_STATE)
    # the old epoch is fenced for new work; the new one goes on
    assert add2(env, 1000, 0) == errors.PRODUCER_FENCED
    assert add2(env, 1000, 1) == errors.NONE
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.PRODUCER_FENCED)  # a zombie's late retry
    assert end2(env, 1000, 2, commit=True) == EndTxnResult(errors.PRODUCER_FENCED)  # an epoch never given out
    assert end2(env, 1000, 1, commit=False) == EndTxnResult(errors.NONE, 1000, 2)
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 2), ("CompleteAbort", 1000, 2)]
    assert end2(env, 1000, 1, commit=False) == EndTxnResult(errors.NONE, 1000, 2)  # retried abort


def test_tv2_abort_with_no_transaction_bumps_the_epoch() -> None:
    env = Env()
    env.init()
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.INVALID_TXN_STATE)  # nothing to commit
    assert end2(env, 1000, 0, commit=False) == EndTxnResult(errors.NONE, 1000, 1)  # Empty -> abort
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 1), ("CompleteAbort", 1000, 1)]
    assert env.markers.sent == []  # no partitions, no markers
    assert end2(env, 1000, 1, commit=False) == EndTxnResult(errors.NONE, 1000, 2)  # CompleteAbort -> abort
    # a TV1 client's EndTxn there is taken for a retry (no bump), and its commit refused
    assert env.end(1000, 2, commit=False) == EndTxnResult(errors.NONE, 1000, 2)
    assert env.end(1000, 2, commit=True) == EndTxnResult(errors.INVALID_TXN_STATE)


def test_tv2_epoch_overflow_rotates_the_producer_id() -> None:
    env = Env()
    env.init()
    env.md().producer_epoch = SHORT_MAX - 1
    assert add2(env, 1000, SHORT_MAX - 1) == errors.NONE
    assert end2(env, 1000, SHORT_MAX - 1, commit=True) == EndTxnResult(errors.NONE, 1001, 0)
    assert env.markers.sent[-1][:3] == (1000, SHORT_MAX, TransactionResult.COMMIT)
    prepare, complete = values(env)[-2:]
    assert (prepare.producer_id, prepare.producer_epoch, prepare.next_producer_id) == (1000, SHORT_MAX, 1001)
    assert (complete.producer_id, complete.producer_epoch, complete.previous_producer_id,
            complete.next_producer_id) == (1001, 0, 1000, -1)
    # the retry under the old id and last epoch is recognised
    assert end2(env, 1000, SHORT_MAX - 1, commit=True) == EndTxnResult(errors.NONE, 1001, 0)
    assert add2(env, 1000, SHORT_MAX - 1) == errors.INVALID_PRODUCER_ID_MAPPING
    assert add2(env, 1001, 0) == errors.NONE
    # the ids ran out when the rotation needs one: the transaction stays open, retriable
    env.md().producer_epoch = SHORT_MAX - 1
    env.ids.unavailable = True
    assert end2(env, 1001, SHORT_MAX - 1, commit=True) == EndTxnResult(errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert env.md().state is S.ONGOING and env.md().pending_state is None


def test_tv2_rotation_is_reloaded_from_the_log() -> None:
    env = Env()
    env.init()
    env.md().producer_epoch = SHORT_MAX - 1
    add2(env, 1000, SHORT_MAX - 1)
    env.markers.auto = False
    end2(env, 1000, SHORT_MAX - 1, commit=False)
    written = list(env.log.records)  # crash before CompleteAbort
    new = Env(coordinator_epoch=1)
    new.coord.unload_partition(0)
    new.coord.begin_loading(0, 2)
    for p, k, v in written:
        assert new.coord.replay(p, k, v)
    new.coord.finish_loading(0, 2)
    assert new.markers.sent == [(1000, SHORT_MAX, TransactionResult.ABORT, frozenset(PARTS), 2)]
    md = new.md()
    assert (md.state, md.producer_id, md.producer_epoch, md.previous_producer_id) == (S.COMPLETE_ABORT, 1001, 0, 1000)
    assert md.next_producer_id == NO_PRODUCER_ID


def test_tv2_timed_out_transaction_aborted_under_the_finalized_version() -> None:
    env = Env()
    env.coord.config.transaction_version = TV2  # Kafka: "not from client, use server TV"
    r = env.init(timeout=5000)
    add2(env, r.producer_id, r.producer_epoch)
    env.clock.advance(11.0)
    # fenced (0 -> 1), and PrepareAbort bumps again as for any TV2 end
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 2), ("CompleteAbort", 1000, 2)]
    assert env.markers.sent[-1] == (1000, 2, TransactionResult.ABORT, frozenset(PARTS), 1)
    assert end2(env, 1000, 0, commit=True) == EndTxnResult(errors.PRODUCER_FENCED)
    assert env.init(pid=1000, epoch=2, timeout=5000) == InitProducerIdResult(errors.NONE, 1000, 3)


def test_timed_out_tv2_transaction_under_tv1_is_aborted_without_the_bump() -> None:
    env = Env()  # transaction.version 1 finalized (downgraded while the transaction ran)
    r = env.init(timeout=5000)
    add2(env, r.producer_id, r.producer_epoch)
    env.clock.advance(11.0)
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 1), ("CompleteAbort", 1000, 1)]


def test_tv2_init_producer_id_fences_an_open_tv2_transaction() -> None:
    env = Env()
    env.coord.config.transaction_version = TV2
    env.init()
    add2(env, 1000, 0)
    assert env.init() == InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 2), ("CompleteAbort", 1000, 2)]
    assert env.init() == InitProducerIdResult(errors.NONE, 1000, 3)


def test_tv1_transaction_open_across_an_upgrade_ends_the_tv1_way() -> None:
    env = Env()
    env.init()
    assert env.add(1000, 0, PARTS) == errors.NONE  # a TV1 client's AddPartitionsToTxn v3
    assert env.md().client_transaction_version == 0
    # an EndTxn v4 ends it the TV1 way whatever the version written with its partitions
    assert add2(env, 1000, 0, [("audit", 0)]) == errors.NONE
    assert env.md().client_transaction_version == TV2
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 0)
    assert env.log.states()[-1] == ("CompleteCommit", 1000, 0)
