"""Transaction verification state of one producer on one partition (KIP-890 part 1; Kafka's
VerificationGuard and VerificationStateEntry).

Before the first transactional batch of a producer's transaction is appended to a partition, its
leader asks the transaction coordinator whether the partition is in the producer's ongoing
transaction (AddPartitionsToTxn with VerifyOnly, or the TV2 add). The answer may take a round trip
to another broker, and in that time the transaction can end: the coordinator writes its ABORT
marker, and the producer may even begin another transaction. A verified answer must then not let
the batch in, or it would open a transaction the coordinator does not know (a hanging
transaction), or join the producer's next one and be committed with it (an aborted record read
by read_committed consumers: Jepsen's G1a).

So the leader creates a :class:`VerificationStateEntry` before it asks, holding a fresh
:class:`VerificationGuard`; the append carries the guard it was given and is refused
(INVALID_TXN_STATE) unless the producer has a transaction open on the partition or the entry still
holds that very guard. Any transactional batch or marker of the producer appended to the partition
clears the entry (the transaction then either has its first offset here or has ended), so a
verification that raced with a marker can never be used, and neither can a stale one from an
earlier transaction (the ABA case: Kafka's guards are compared by identity for this reason).

The entry also keeps the lowest sequence seen while verifying, so that a higher sequence of the
same epoch is not appended while a lower one waits to be verified again (Kafka's
maybeUpdateLowestSequenceAndEpoch: an OUT_OF_ORDER_SEQUENCE loop otherwise). Unverified entries
expire with the producer ids (``producer.id.expiration.ms``)."""

from __future__ import annotations


class VerificationGuard:
    """A token compared by identity: the one a verification started with."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"VerificationGuard@{id(self):x}"


class VerificationStateEntry:
    """Kafka's VerificationStateEntry: the guard of the verification under way, when it began,
    and the lowest sequence (with its epoch) of the batches waiting for it."""

    __slots__ = ("epoch", "guard", "lowest_sequence", "timestamp_ms")

    def __init__(self, timestamp_ms: int, sequence: int, epoch: int) -> None:
        self.timestamp_ms = timestamp_ms
        self.guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch lowers the bar; a higher epoch resets it."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
