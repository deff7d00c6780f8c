"""KIP-890 part 1's verification guard (odradek.log.verification_state): a verified answer that raced
with the transaction's marker, or one left from an earlier transaction, never lets a transactional
batch into the log; a batch of an open transaction needs no guard; a lower sequence waiting for its
verification holds back higher ones; unanswered verifications expire."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log import FetchIsolation, Log, ProducerStateError
from odradek.log.txn_marker import ControlRecordType
from odradek.protocol import errors
from odradek.protocol.records import validate_batches

from .log_helpers import NOW, region_bytes
from .test_txn_log import end_txn, new_log, txn_batch

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT
PID = 42


def append(log: Log, data: bytearray, guard: object | None, *, required: bool = True) -> int:
    info = log.append_as_leader(data, validate_batches(data), 0, NOW, require_verification=required,
                                verification_guard=guard)  # type: ignore[arg-type]
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def refused(log: Log, data: bytearray, guard: object | None) -> int:
    with pytest.raises(ProducerStateError) as e:
        append(log, data, guard)
    return e.value.error_code


def test_a_verified_first_batch_goes_in_and_the_rest_of_its_transaction_needs_no_guard(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    guard = log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    assert guard is not None
    assert append(log, txn_batch(PID, 0), guard) == 0
    assert log.producer_state.verification_states == {}  # cleared by the append
    assert log.maybe_start_transaction_verification(PID, 2, 0, NOW) is None  # open here: nothing to verify
    assert append(log, txn_batch(PID, 2), None) == 2


def test_a_verification_that_raced_with_the_abort_marker_is_void(tmp_path: Path) -> None:
    """The G1a a network partition found: the coordinator answered "in the transaction", its ABORT
    marker was appended before the produce was, and the late batch must not open a transaction that
    the producer's next commit would then commit."""
    log = new_log(tmp_path)
    guard = log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    end_txn(log, PID, ABORT)  # the transaction ends while the verification is on its way
    assert refused(log, txn_batch(PID, 0, value=b"late"), guard) == errors.INVALID_TXN_STATE
    assert log.first_unstable_offset() is None  # no hanging transaction
    # the producer's next transaction, verified anew, commits only its own records
    nxt = log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    assert append(log, txn_batch(PID, 0, value=b"next"), nxt) == 1
    end_txn(log, PID, COMMIT)
    data, aborted = log.read_isolated(0, 1 << 20, FetchIsolation.TXN_COMMITTED, True)
    assert [(a.first_offset, a.last_offset) for a in aborted] == [(0, 0)]  # the marker alone
    raw = region_bytes(data)
    assert b"next" in raw and b"late" not in raw


def test_a_guard_from_an_earlier_transaction_is_not_the_current_one(tmp_path: Path) -> None:
    """Kafka's ABA case: verify, marker, a new verification begins; the stale answer arrives."""
    log = new_log(tmp_path)
    stale = log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    end_txn(log, PID, ABORT)
    fresh = log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    assert fresh is not None and fresh is not stale
    assert refused(log, txn_batch(PID, 0), stale) == errors.INVALID_TXN_STATE
    assert append(log, txn_batch(PID, 0), fresh) == 1


def test_no_guard_no_append_when_verification_is_required(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    assert refused(log, txn_batch(PID, 0), None) == errors.INVALID_TXN_STATE
    assert append(log, txn_batch(PID, 0), None, required=False) == 0  # verification off: as before


def test_a_lower_sequence_waiting_for_verification_holds_back_higher_ones(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    guard = log.maybe_start_transaction_verification(PID, 5, 0, NOW)
    assert log.maybe_start_transaction_verification(PID, 0, 0, NOW) is guard  # one entry, its bar lowered to 0
    assert refused(log, txn_batch(PID, 5), guard) == errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, txn_batch(PID, 0, n=5), guard) == 0
    assert append(log, txn_batch(PID, 5), None) == 5


def test_unanswered_verifications_expire_with_producer_ids(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    ps = log.producer_state
    ps.expiration_ms = 1000
    log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    ps.remove_expired_producers(NOW + 999)
    assert PID in ps.verification_states
    ps.remove_expired_producers(NOW + 1000)
    assert ps.verification_states == {}


def test_a_follower_clears_the_entry_with_the_transactional_batches_it_replicates(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.maybe_start_transaction_verification(PID, 0, 0, NOW)
    batch = txn_batch(PID, 0)
    log.append_as_follower(batch, validate_batches(batch), NOW)
    assert log.producer_state.verification_states == {}
