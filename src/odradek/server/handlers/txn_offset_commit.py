"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets inside its
transaction (send_offsets_to_transaction). They are written to the group's __consumer_offsets
partition in a transactional batch and become visible only when the transaction commits
(coordinator.group.txn_offsets); v3+ carry the consumer's member id, generation and group
instance id, and a consumer fenced by a rebalance cannot commit (KIP-447)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.server.request_context import RequestContext

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
