"""OffsetCommit (8)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def handle(ctx: Any, request: Any) -> Any:
    m = ctx.response_module
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    order: list[tuple[str, list[int]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata or "",
            )
            parts.append(p.partition_index)
        order.append((t.name, parts))
    # partitions of unknown topics are answered first, as Kafka's request layer does
    groups = ctx.broker.groups
    exists = groups.partition_exists
    known = {tp: v for tp, v in offsets.items() if exists(*tp)}
    groups.take_pending_writes()
    results: dict[tuple[str, int], int] = {}
    code = groups.coordinator_error(request.group_id)
    if not code:
        code, results = groups.coordinator.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            known,
        )
    pending = groups.take_pending_writes()
    for tp in offsets:
        if tp not in known:
            results[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION

    def respond(replicated: int = errors.NONE) -> Any:
        topics = tuple(
            make(
                m.OffsetCommitResponseTopic,
                name=name,
                partitions=tuple(
                    make(m.OffsetCommitResponsePartition, partition_index=p,
                         error_code=results.get((name, p)) or code or replicated)
                    for p in parts
                ),
            )
            for name, parts in order
        )
        return make(m.OffsetCommitResponse, throttle_time=0, topics=topics)

    if not pending:
        return respond()
    # cluster mode: acknowledged once replicated, as Kafka's coordinator does (acks=all)
    rm = ctx.broker.replica_manager
    timeout_ms = int(ctx.broker.config.get("offsets.commit.timeout.ms"))

    def replicated(codes: dict[tuple[str, int], int]) -> Any:
        worst = next((c for c in codes.values() if c != errors.NONE), errors.NONE)
        mapped = {
            errors.NONE: errors.NONE,
            errors.NOT_LEADER_OR_FOLLOWER: errors.NOT_COORDINATOR,
        }.get(worst, errors.COORDINATOR_NOT_AVAILABLE)
        return respond(mapped)

    delayed = rm.wait_for_replication(
        {("__consumer_offsets", p): off for p, off in pending.items()}, timeout_ms, replicated
    )
    ctx.connection.park(delayed.future, delayed.cancel)
    return delayed.future
