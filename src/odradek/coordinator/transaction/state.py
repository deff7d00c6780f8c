"""Transaction states and the metadata of one transactional id, after Kafka's
``TransactionState`` and ``TransactionMetadata`` / ``TxnTransitMetadata``
(org.apache.kafka.coordinator.transaction, formerly kafka.coordinator.transaction).

A change of state is two-phase, as in Kafka: a ``prepare_*`` method checks the transition
against the table of valid previous states, records the target as the *pending state* and
returns a :class:`TxnTransitMetadata` (what is written to ``__transaction_state``); once the
write is replicated, :meth:`TransactionMetadata.complete_transition_to` applies it (checking it
as Kafka's completeTransitionTo does), or the coordinator clears the pending state when the
write failed. While a transition is pending no other can be prepared (the coordinator answers
CONCURRENT_TRANSACTIONS).

Each transition carries the client's transaction version (Kafka's clientTransactionVersion):
below 2 the epoch stays through a transaction's end; at 2 (KIP-890 part 2) PrepareCommit /
PrepareAbort bump it (the markers carry the bumped epoch, the producer goes on with it), and
when that exhausts the epochs the next producer id is allocated then, kept in the Prepare
record's NextProducerId and taken (at epoch 0) by the Complete record, whose
PreviousProducerId is the old id. An illegal transition raises :class:`IllegalTransitionError`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class IllegalTransitionError(Exception):
    """A transition Kafka's TransactionMetadata refuses with IllegalStateException (a bug in
    the caller, or a log that contradicts itself)."""


class TransactionState(enum.Enum):
    """Kafka's TransactionState: (id written in the log, name shown by DescribeTransactions /
    ListTransactions, whether a transactional id in this state may expire)."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return VALID_PREVIOUS_STATES[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for s in cls:
            if s.id == state_id:
                return s
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for s in cls:
            if s.state_name == name:
                return s
        return None


_S = TransactionState

# Kafka's TransactionState.validPreviousStates. PrepareAbort from Empty/CompleteCommit/
# CompleteAbort exists for transaction.version 2 clients (an EndTxn(abort) when unsure of the
# server's state: an empty abort that bumps the epoch); older clients get INVALID_TXN_STATE.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT,
                                 _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class TransactionResult(enum.Enum):
    """Kafka's TransactionResult: what the markers say (control record type: ABORT 0, COMMIT 1)."""

    ABORT = 0
    COMMIT = 1


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: ``epoch >= Short.MaxValue - 1`` (the last
    epoch is kept for fencing)."""
    return producer_epoch >= SHORT_MAX - 1


TopicPartition = tuple[str, int]

TV_2 = 2  # Kafka's TransactionVersion.TV_2: the first client transaction version that bumps the epoch


def supports_epoch_bump(client_transaction_version: int) -> bool:
    """Kafka's TransactionVersion.supportsEpochBump."""
    return client_transaction_version >= TV_2


@dataclass(frozen=True)
class TxnTransitMetadata:
    """Kafka's TxnTransitMetadata: the metadata a prepared transition leads to."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0


@dataclass(eq=False)
class TransactionMetadata:
    """Kafka's TransactionMetadata for one transactional id (mutable; the coordinator owns it)."""

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None
    # a PrepareEpochFence whose write failed: the next fence does not bump the epoch again
    has_failed_epoch_fence: bool = False

    # -- queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    def snapshot(self) -> TxnTransitMetadata:
        """The current metadata as a transit (Kafka's prepareNoTransit); sets no pending state."""
        return TxnTransitMetadata(
            self.producer_id, self.previous_producer_id, self.next_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state, frozenset(self.topic_partitions),
            self.txn_start_timestamp, self.txn_last_update_timestamp, self.client_transaction_version,
        )

    # -- preparing transitions
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped (not again after a failed fence):
        a new producer (InitProducerId) or the timeout sweep aborts the ongoing transaction."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransitionError("cannot fence a producer whose epoch is Short.MaxValue (overflow)")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(_S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_incr_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata | None:
        """-> Empty with the epoch bumped (InitProducerId). With an expected epoch (KIP-360): the
        current one bumps it, the last one (a retry whose answer was lost) returns the current
        one again; anything else is fenced: None (PRODUCER_FENCED) and nothing is prepared."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"no producer epoch left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(_S.EMPTY, self.producer_id, epoch, last, new_txn_timeout_ms, frozenset(), -1,
                             update_timestamp)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """-> Empty with a new producer id at epoch 0 (the epochs of the old one are exhausted);
        the old epoch is remembered when the client gave it, so that its retry is answered."""
        if self.has_pending_transaction():
            raise IllegalTransitionError("cannot rotate the producer id while a transaction is pending")
        return self._prepare(_S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             new_txn_timeout_ms, frozenset(), -1, update_timestamp)

    def prepare_add_partitions(self, added: frozenset[TopicPartition] | set[TopicPartition],
                               update_timestamp: int, client_transaction_version: int | None = None
                               ) -> TxnTransitMetadata:
        """-> Ongoing with the partitions added; a new transaction starts its clock now and
        takes the client's transaction version (Kafka's prepareAddPartitions)."""
        if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            start = update_timestamp
        else:
            start = self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions) | frozenset(added), start,
                             update_timestamp, client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, new_state: TransactionState, update_timestamp: int,
                                client_transaction_version: int | None = None,
                                next_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        """-> PrepareCommit / PrepareAbort (EndTxn, or an abort by the coordinator). With a
        client transaction version of 2 the epoch is bumped (the last epoch remembers the one
        the client used), ``next_producer_id`` is the id the producer moves to when that bump
        exhausts the epochs, and an abort of no transaction (``no_partition_added``, from
        Empty / CompleteX) starts its clock now."""
        if new_state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError(f"{new_state.state_name} is not PrepareCommit or PrepareAbort")
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if supports_epoch_bump(tv) and epoch < SHORT_MAX:
            epoch, last = epoch + 1, epoch
        start = update_timestamp if no_partition_added else self.txn_start_timestamp
        return self._prepare(new_state, self.producer_id, epoch, last, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), start, update_timestamp,
                             next_producer_id=next_producer_id, client_transaction_version=tv)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (the markers are
        written). With a next producer id (TV2, epochs exhausted) the producer moves to it at
        epoch 0; the last epoch stays the one the client last saw."""
        new_state = _S.COMPLETE_COMMIT if self.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        if supports_epoch_bump(self.client_transaction_version):
            pid, epoch, last = self.producer_id, self.producer_epoch, self.last_producer_epoch
            if self.next_producer_id != NO_PRODUCER_ID:
                pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch, last = self.producer_id, self.producer_epoch, self.producer_epoch
        return self._prepare(new_state, pid, epoch, last, self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             update_timestamp)

    def prepare_dead(self) -> TxnTransitMetadata:
        """-> Dead: the transactional id expires (a tombstone is written, then it is forgotten)."""
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, new_state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                 timeout_ms: int, partitions: frozenset[TopicPartition], start: int,
                 update_timestamp: int, *, next_producer_id: int = NO_PRODUCER_ID,
                 client_transaction_version: int | None = None) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing a transition to {new_state.state_name} while "
                f"{self.pending_state.state_name} is pending")
        if producer_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {producer_id}")
        if new_state != _S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"illegal new producer epoch {epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.state_name} -> {new_state.state_name} is not a valid transition")
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        transit = TxnTransitMetadata(producer_id, self.producer_id, next_producer_id, epoch, last_epoch, timeout_ms,
                                     new_state, partitions, start, update_timestamp, tv)
        self.pending_state = new_state
        return transit

    # -- completing
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a prepared transition once its record is written (Kafka's completeTransitionTo),
        checking that it is the pending one and consistent with the current metadata."""
        to = self.pending_state
        if to is None:
            raise IllegalTransitionError(f"{self.transactional_id}: completing a transition with none pending")
        if to != t.txn_state:
            self._fail(t)
        if to == _S.EMPTY:  # InitProducerId
            if (self.producer_epoch != t.producer_epoch and not self._valid_epoch_bump(t)) \
                    or t.topic_partitions or t.txn_start_timestamp != -1:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to == _S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if not self._valid_epoch(t) or not self.topic_partitions <= t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif to in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):  # EndTxn
            bump = supports_epoch_bump(t.client_transaction_version)
            # TV2: an abort from Empty / CompleteX starts its clock with the abort
            empty_abort = bump and to == _S.PREPARE_ABORT and self.state in (_S.EMPTY, _S.COMPLETE_COMMIT,
                                                                              _S.COMPLETE_ABORT)
            valid_epoch = self._valid_epoch(t) or (bump and t.producer_id == self.producer_id
                                                   and t.producer_epoch == self.producer_epoch + 1)
            if not valid_epoch or set(self.topic_partitions) != set(t.topic_partitions) \
                    or self.txn_timeout_ms != t.txn_timeout_ms \
                    or (self.txn_start_timestamp != t.txn_start_timestamp and not empty_abort):
                self._fail(t)
            if bump:
                self.txn_start_timestamp = t.txn_start_timestamp
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
        elif to in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):  # markers written
            rotated = (supports_epoch_bump(t.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID
                       and t.producer_id == self.next_producer_id and t.producer_epoch == 0)
            if (not self._valid_epoch(t) and not rotated) or self.txn_timeout_ms != t.txn_timeout_ms \
                    or t.txn_start_timestamp == -1:
                self._fail(t)
            if rotated:
                self.previous_producer_id = self.producer_id
                self.producer_id = t.producer_id
                self.producer_epoch = 0
            self.last_producer_epoch = t.last_producer_epoch if supports_epoch_bump(t.client_transaction_version) \
                else self.last_producer_epoch
            self.next_producer_id = NO_PRODUCER_ID
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
        elif to == _S.PREPARE_EPOCH_FENCE:
            self._fail(t)  # never written: the fence goes straight on to PrepareAbort
        else:
            raise IllegalTransitionError(
                f"{self.transactional_id}: a transition to Dead is completed by removing the transactional id, "
                "not by applying it")
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def _valid_epoch(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _valid_epoch_bump(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0 and t.producer_id != self.producer_id)

    def _fail(self, t: TxnTransitMetadata) -> None:
        raise IllegalTransitionError(
            f"{self.transactional_id}: transition from {self.state.state_name} to {t} does not match the metadata")

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransitMetadata) -> TransactionMetadata:
        """Metadata as loaded from the log (Kafka's TransactionLog.readTxnRecordValue): the last
        epoch is not in the log and starts unknown."""
        return cls(transactional_id, t.producer_id, t.prev_producer_id, t.next_producer_id, t.producer_epoch,
                   NO_PRODUCER_EPOCH, t.txn_timeout_ms, t.txn_state, set(t.topic_partitions),
                   t.txn_start_timestamp, t.txn_last_update_timestamp, t.client_transaction_version)
