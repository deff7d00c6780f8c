"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets inside its
transaction (send_offsets_to_transaction). They are written to the group's __consumer_offsets
partition in a transactional batch and become visible only when the transaction commits
(coordinator.group.txn_offsets); v3+ carry the consumer's member id, generation and group
instance id, and a consumer fenced by a rebalance cannot commit (KIP-447). Before the first
commit of a transaction, the transaction coordinator confirms the group's __consumer_offsets
partition is in the transaction (KIP-890 part 1, as for Produce): a commit without
AddOffsetsToTxn cannot leave offsets pending for ever."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.server.request_context import RequestContext
from odradek.server.txn_verification import coordinator_verdict

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4  # v5 is transaction.version 2 (KIP-890 part 2)


def handle(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    groups = ctx.services.groups
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    order: list[tuple[str, list[int]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (
                int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata or "",
            )
            parts.append(p.partition_index)
        order.append((t.name, parts))
    results: dict[tuple[str, int], int] = {}
    code = not_here = groups.coordinator_error(request.group_id)
    if not request.group_id:
        code = not_here = errors.INVALID_GROUP_ID
    if not code and (int(request.producer_id) < 0 or int(request.producer_epoch) < 0):
        code = not_here = errors.INVALID_REQUEST  # no transactional batch can be written without them
    if not code:
        # KIP-890: the group's __consumer_offsets partition must be in the transaction (AddOffsetsToTxn)
        verdict = coordinator_verdict(ctx.services, request.transactional_id, "__consumer_offsets",
                                      groups.coordinator.partition_for(request.group_id), int(request.producer_id),
                                      int(request.producer_epoch))
        if verdict != errors.NONE:
            code = not_here = _verification_error(verdict, ctx.api_version)
    if not code:
        code, results = groups.commit_txn_offsets(
            request.group_id, int(request.producer_id), int(request.producer_epoch),
            getattr(request, "member_id", "") or "", int(getattr(request, "generation_id", -1)),
            getattr(request, "group_instance_id", None), offsets,
        )

    def respond(replicated: int = errors.NONE) -> Any:
        topics = tuple(
            make(m.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(
                make(m.TxnOffsetCommitResponsePartition, partition_index=p,
                     error_code=results.get((name, p)) or code or replicated)
                for p in parts))
            for name, parts in order
        )
        return make(m.TxnOffsetCommitResponse, throttle_time=0, topics=topics)

    if not_here or code:
        return respond()
    return groups.answer_after_write(ctx, [groups.coordinator.partition_for(request.group_id)], respond)


def _verification_error(code: int, version: int) -> int:
    """The coordinator's verdict as TxnOffsetCommit answers it: retriable while the coordinator
    is busy or moving; a fenced producer gets PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3);
    INVALID_TXN_STATE when the group's partition is not in the transaction."""
    if code in (errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS,
                errors.CONCURRENT_TRANSACTIONS):
        return errors.COORDINATOR_LOAD_IN_PROGRESS
    if code == errors.PRODUCER_FENCED:
        return errors.INVALID_PRODUCER_EPOCH if version < 3 else errors.PRODUCER_FENCED
    if code == errors.INVALID_PRODUCER_ID_MAPPING:
        return code
    return errors.INVALID_TXN_STATE
