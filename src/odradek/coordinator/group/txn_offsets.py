"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98; fencing of KIP-447), after
Kafka's GroupMetadata.pendingTransactionalOffsetCommits and the group coordinator's
handleTxnCompletion.

A TxnOffsetCommit writes ordinary OffsetCommit records to the group's ``__consumer_offsets``
partition, but in a *transactional* batch of the producer (producer id and epoch, no sequence).
The offsets stay pending, invisible to OffsetFetch, until the transaction's marker lands in that
partition: COMMIT makes them the group's committed offsets, ABORT drops them. Loading a
partition replays the same way (a transactional batch's offsets are pending until the control
batch of its producer follows).

Pure state: no I/O; the runtime writes the batch and calls :meth:`PendingTxnOffsets.complete`
when the marker is appended or replayed.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.group.classic import ClassicGroup, GroupState, OffsetAndMetadata
from odradek.protocol import errors

TopicPartition = tuple[str, int]


class PendingTxnOffsets:
    """producer id -> group -> partition -> offset, committed by a transaction not ended yet."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    def add(self, producer_id: int, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def complete(
        self, producer_id: int, commit: bool, in_partition: Callable[[str], bool]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """The transaction of ``producer_id`` ended in the ``__consumer_offsets`` partition whose
        groups ``in_partition`` accepts: its pending offsets of those groups leave; returned
        (to be applied) when it committed, empty when it aborted."""
        groups = self._by_producer.get(producer_id)
        if not groups:
            return {}
        done = {g: offs for g, offs in groups.items() if in_partition(g)}
        for g in done:
            del groups[g]
        if not groups:
            del self._by_producer[producer_id]
        return done if commit else {}

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        """Whether a transaction has pending offsets of the group (of ``tp`` when given):
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT then (KIP-447)."""
        for groups in self._by_producer.values():
            offs = groups.get(group_id)
            if offs and (tp is None or tp in offs):
                return True
        return False

    def drop(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the pending offsets of the groups of an unloaded partition."""
        for pid in list(self._by_producer):
            groups = self._by_producer[pid]
            for g in [g for g in groups if in_partition(g)]:
                del groups[g]
            if not groups:
                del self._by_producer[pid]


def validate_txn_commit(
    g: ClassicGroup | None, member_id: str, generation_id: int, group_instance_id: str | None
) -> int:
    """Kafka's GroupCoordinator.doTxnCommitOffsets checks (KIP-447): a consumer that lost its
    partitions in a rebalance cannot commit through a transaction any more. A commit without
    member (generation -1, empty member id) is accepted, as for producers that do not pass
    the consumer's group metadata."""
    if g is None:
        return errors.ILLEGAL_GENERATION if generation_id >= 0 else errors.NONE
    if g.is_in(GroupState.DEAD):
        return errors.COORDINATOR_NOT_AVAILABLE
    if group_instance_id is not None:
        static_id = g.static_member_id(group_instance_id)
        if static_id is not None and static_id != member_id:
            return errors.FENCED_INSTANCE_ID
    if member_id and member_id not in g.members:
        return errors.UNKNOWN_MEMBER_ID
    if generation_id >= 0 and generation_id != g.generation_id:
        return errors.ILLEGAL_GENERATION
    return errors.NONE
