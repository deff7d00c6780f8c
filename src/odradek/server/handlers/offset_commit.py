"""OffsetCommit (8): answered once the commit is replicated (coordinator.runtime)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.request_context import RequestContext

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def handle(ctx: RequestContext, request: Any) -> Any:
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
    groups = ctx.services.groups
    exists = groups.partition_exists
    known = {tp: v for tp, v in offsets.items() if exists(*tp)}
    results: dict[tuple[str, int], int] = {}
    code = not_here = groups.coordinator_error(request.group_id)
    group_allowed = ctx.permits(ResourceType.GROUP, request.group_id)
    if not group_allowed:  # every partition is answered GROUP_AUTHORIZATION_FAILED (Kafka's getErrorResponse)
        code = not_here = errors.GROUP_AUTHORIZATION_FAILED
    # partitions of topics the principal may not READ are refused one by one
    unreadable = {t for t, _ in offsets if group_allowed and not ctx.permits(ResourceType.TOPIC, t)}
    known = {tp: v for tp, v in known.items() if tp[0] not in unreadable}
    if not code:
        code, results = groups.coordinator.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            known,
        )
    for tp in offsets:
        if tp[0] in unreadable:
            results[tp] = errors.TOPIC_AUTHORIZATION_FAILED
        elif tp not in known and group_allowed:
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

    if not_here:
        return respond()
    # answered once the commit (and every earlier write of the group's partition) is replicated
    return groups.answer_after_write(ctx, [groups.coordinator.partition_for(request.group_id)], respond)
