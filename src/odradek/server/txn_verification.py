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
INVALID_TXN_STATE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.protocol import errors
from odradek.protocol.records import BATCH_HEADER_SIZE, read_header

if TYPE_CHECKING:
    from odradek.server.request_context import BrokerServices

_RETRIABLE = (errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS,
              errors.CONCURRENT_TRANSACTIONS)
ABORTABLE_SINCE_PRODUCE_VERSION = 11


@dataclass(frozen=True)
class RemoteCheck:
    """The coordinator is on another broker (cluster mode): ask it with
    :meth:`odradek.server.txn_channel.TxnChannel.verify`, then map its answer with
    :func:`produce_error`."""

    broker_id: int
    producer_id: int
    producer_epoch: int


def verify_transactional_append(
    svc: BrokerServices, transactional_id: str, topic: str, partition: int, records: bytes | memoryview | None,
    produce_version: int,
) -> tuple[int, str | None] | RemoteCheck:
    """(error, message): NONE when the append may go on (its batches are validated by the
    append itself); a :class:`RemoteCheck` when the coordinator must be asked over the network."""
    txn = svc.txn
    if not txn.verification_enabled or not records or len(records) < BATCH_HEADER_SIZE:
        return errors.NONE, None
    try:
        h = read_header(records, 0)
    except Exception:  # malformed: the append's own validation answers it
        return errors.NONE, None
    if not h.is_transactional or h.producer_id < 0:
        return errors.NONE, None
    code = coordinator_verdict(svc, transactional_id, topic, partition, h.producer_id, h.producer_epoch)
    if isinstance(code, RemoteCheck):
        return code
    return produce_error(code, transactional_id, topic, partition, h.producer_id, h.producer_epoch, produce_version)


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


def coordinator_verdict(svc: BrokerServices, transactional_id: str, topic: str, partition: int, producer_id: int,
                        producer_epoch: int) -> int | RemoteCheck:
    """The coordinator's answer (AddPartitionsToTxn VerifyOnly) for the producer's first
    transactional write to the partition: NONE without asking when the transaction is open on
    the partition already at this epoch or verification is off; a :class:`RemoteCheck` when the
    coordinator is another broker; NOT_COORDINATOR when none is known."""
    txn = svc.txn
    if not txn.verification_enabled:
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
        return RemoteCheck(broker, producer_id, producer_epoch)
    return coord.verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])[
        (topic, partition)]
