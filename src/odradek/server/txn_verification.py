"""The partition leader's check before a transactional append (KIP-890 part 1, Kafka's
ReplicaManager.appendRecords with AddPartitionsToTxnManager): the first transactional batch of
a producer's transaction on a partition is appended only if the transaction coordinator has
the partition in the producer's ongoing transaction (AddPartitionsToTxn with VerifyOnly).
This closes the hanging-transaction hole: a late or retried produce after the transaction
ended would otherwise open a transaction the coordinator does not know, blocking
read_committed consumers at the last stable offset for good.

Later batches of the same transaction (the partition's producer state has the transaction
open at the same epoch) need no check. The coordinator of the transactional id is asked
directly when this broker hosts it, over the inter-broker channel when another broker does
(cluster mode: a :class:`RemoteCheck` for the caller to send). Errors as Kafka maps the coordinator's answer for
Produce: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; a coordinator that is moving or busy
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS) -> NOT_ENOUGH_REPLICAS (retriable); a partition not in the
transaction -> TRANSACTION_ABORTABLE for Produce v11+ (clients that know it), else
INVALID_TXN_STATE.

With transaction.version 2 (KIP-890 part 2) a Produce v12 or TxnOffsetCommit v5 comes without
the client's AddPartitionsToTxn: the leader adds the partition to the transaction itself
(AddPartitionsToTxn v5 without VerifyOnly, Kafka's AddPartitionsToTxnManager with the
``addPartition`` operation), from its first batch of a transaction on the partition; the
coordinator's answer maps to Produce's errors as above. That add writes to
``__transaction_state``, so it is asynchronous even when this broker is the coordinator
(a :class:`RemoteCheck` whose ``broker_id`` is None), and it happens whether or not
transaction.partition.verification.enable is set (the partition would otherwise never be in
the transaction)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from odradek.protocol import errors
from odradek.protocol.records import BATCH_HEADER_SIZE, read_header
from odradek.server.request_context import HasFeatures, HasNowMs, HasReplicaManager, HasTxn
from odradek.server.txn_version import TV_2, transaction_version

if TYPE_CHECKING:
    from odradek.log.verification_state import VerificationGuard


class VerificationNeeds(HasTxn, HasFeatures, HasReplicaManager, HasNowMs, Protocol):
    """What the verification uses of the broker's services (a handler's Needs includes it)."""

_RETRIABLE = (errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS,
              errors.CONCURRENT_TRANSACTIONS)
ABORTABLE_SINCE_PRODUCE_VERSION = 11


@dataclass(frozen=True)
class RemoteCheck:
    """An answer to wait for: the coordinator is on another broker (``broker_id``, cluster
    mode), or the partition is being added to the transaction (``add``, transaction.version 2;
    ``broker_id`` None when this broker is the coordinator). Run it with :func:`run_check`, then
    map its answer with :func:`produce_error`."""

    broker_id: int | None
    producer_id: int
    producer_epoch: int
    add: bool = False


Codes = dict[tuple[str, int], int]


def run_check(svc: VerificationNeeds, check: RemoteCheck, transactional_id: str, partitions: list[tuple[str, int]],
              then: Callable[[Codes], None]) -> None:
    """Ask the coordinator (AddPartitionsToTxn: VerifyOnly, or v5 adding the partitions) and
    call ``then`` with its error per partition."""
    txn = svc.txn
    if check.broker_id is None:
        def added(code: int) -> None:
            then(dict.fromkeys(partitions, code))

        txn.coordinator.add_partitions(transactional_id, check.producer_id, check.producer_epoch, partitions, added,
                                       TV_2)
        return
    channel = txn.channel
    if channel is None:
        then(dict.fromkeys(partitions, errors.NOT_COORDINATOR))
        return
    send = channel.add_partitions if check.add else channel.verify
    send(check.broker_id, transactional_id, check.producer_id, check.producer_epoch, partitions, then)


@dataclass(frozen=True)
class Verification:
    """What a transactional produce to one partition carries to its append: whether the append needs
    a verified transaction (``required``), and the guard its verification began with (None when the
    producer's transaction is open on the partition already; :mod:`odradek.log.verification_state`)."""

    required: bool
    guard: VerificationGuard | None = None


NOT_REQUIRED = Verification(False)


def verify_transactional_append(
    svc: VerificationNeeds, transactional_id: str, topic: str, partition: int, records: bytes | memoryview | None,
    produce_version: int, now_ms: int,
) -> tuple[tuple[int, str | None] | RemoteCheck, Verification]:
    """(error, message): NONE when the append may go on (its batches are validated by the
    append itself); a :class:`RemoteCheck` when the coordinator's answer must be waited for; and
    the :class:`Verification` the append is to carry. The guard is taken before the coordinator is
    asked, so that a marker written meanwhile voids the answer (Kafka's
    ReplicaManager.maybeStartTransactionVerificationForPartition)."""
    txn = svc.txn
    add = produce_version >= 12 and transaction_version(svc.features) >= TV_2
    if not (txn.verification_enabled or add) or not records or len(records) < BATCH_HEADER_SIZE:
        return (errors.NONE, None), NOT_REQUIRED
    try:
        h = read_header(records, 0)
    except Exception:  # malformed: the append's own validation answers it
        return (errors.NONE, None), NOT_REQUIRED
    if not h.is_transactional or h.producer_id < 0:
        return (errors.NONE, None), NOT_REQUIRED
    verification = start_verification(svc, topic, partition, h.producer_id, h.producer_epoch, add,
                                      h.base_sequence, now_ms)
    code = coordinator_verdict(svc, transactional_id, topic, partition, h.producer_id, h.producer_epoch, add)
    if isinstance(code, RemoteCheck):
        return code, verification
    return produce_error(code, transactional_id, topic, partition, h.producer_id, h.producer_epoch,
                         produce_version), verification


def start_verification(svc: VerificationNeeds, topic: str, partition: int, producer_id: int, producer_epoch: int,
                       add: bool, sequence: int = -1, now_ms: int | None = None) -> Verification:
    """The :class:`Verification` a transactional write to a partition this broker leads carries to its
    append, its guard taken now (before the coordinator is asked); :data:`NOT_REQUIRED` when
    transaction.partition.verification.enable is off and the partition is not to be added (TV2)."""
    if not (svc.txn.verification_enabled or add):
        return NOT_REQUIRED
    rm = svc.replica_manager
    plog = rm.get_log(topic, partition)
    guard = None
    if plog is not None and rm.leading(topic, partition) is not None:
        guard = plog.maybe_start_transaction_verification(
            producer_id, sequence, producer_epoch, svc.now_ms() if now_ms is None else now_ms)
    return Verification(True, guard)


def produce_error(code: int, transactional_id: str, topic: str, partition: int, producer_id: int,
                  producer_epoch: int, produce_version: int) -> tuple[int, str | None]:
    """The coordinator's verdict as Produce answers it (Kafka's AddPartitionsToTxnManager)."""
    if code == errors.NONE:
        return code, None
    if code == errors.PRODUCER_FENCED:
        return errors.INVALID_PRODUCER_EPOCH, f"producer {producer_id} epoch {producer_epoch} is fenced"
    if code in _RETRIABLE:
        return errors.NOT_ENOUGH_REPLICAS, f"the transaction coordinator could not verify the transaction ({code})"
    msg = f"{topic}-{partition} is not in the ongoing transaction of {transactional_id!r} (error {code})"
    if code == errors.TRANSACTION_ABORTABLE and produce_version >= ABORTABLE_SINCE_PRODUCE_VERSION:
        return errors.TRANSACTION_ABORTABLE, msg
    return errors.INVALID_TXN_STATE, msg


def coordinator_verdict(svc: VerificationNeeds, transactional_id: str, topic: str, partition: int, producer_id: int,
                        producer_epoch: int, add: bool = False) -> int | RemoteCheck:
    """The coordinator's answer (AddPartitionsToTxn VerifyOnly) for the producer's first
    transactional write to the partition: NONE without asking when the transaction is open on
    the partition already at this epoch or verification is off; a :class:`RemoteCheck` when the
    coordinator is another broker, or when the partition is to be added (``add``, TV2);
    NOT_COORDINATOR when none is known."""
    txn = svc.txn
    if not txn.verification_enabled and not add:
        return errors.NONE
    plog = svc.replica_manager.get_log(topic, partition)
    if plog is None:
        return errors.NONE
    entry = plog.producer_entry(producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == producer_epoch:
        return errors.NONE  # the transaction is open here already: verified at its first batch
    coord = txn.coordinator
    if coord.partition_for(transactional_id) not in coord.owned_partitions():
        broker = txn.coordinator_broker(transactional_id)
        if broker is None or txn.channel is None:
            return errors.NOT_COORDINATOR
        return RemoteCheck(broker, producer_id, producer_epoch, add)
    if add:
        return RemoteCheck(None, producer_id, producer_epoch, True)
    return coord.verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])[
        (topic, partition)]
