"""OffsetCommit (8): answered once the commit is replicated (coordinator.runtime). From v10 (KIP-848)
topics are named by id: an id this broker does not know is answered UNKNOWN_TOPIC_ID on each of its
partitions (Kafka's KafkaApis.handleOffsetCommitRequest), and the offsets are kept by topic name."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasTopics, RequestContext

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 2
MAX_VERSION = 10


class Needs(HasTopics, HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    by_id = ctx.api_version >= 10
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    # (the topic's name, or None for an unknown id; its id from v10; its partitions) in the request's order
    order: list[tuple[str | None, uuid.UUID | None, list[int]]] = []
    unknown_ids: list[tuple[uuid.UUID | None, list[int]]] = []
    for t in request.topics:
        tid = t.topic_id if by_id else None
        name: str | None = t.name if not by_id else None
        if by_id:
            meta = services(ctx).topics.by_id.get(tid) if tid is not None else None
            name = meta.name if meta is not None else None
        parts = [p.partition_index for p in t.partitions]
        order.append((name, tid, parts))
        if name is None:
            unknown_ids.append((tid, parts))
            continue
        for p in t.partitions:
            offsets[(name, p.partition_index)] = (
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata or "",
            )
    # partitions of unknown topics are answered first, as Kafka's request layer does
    groups = services(ctx).groups
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
        def error(name: str | None, p: int) -> int:
            if name is None:  # an unknown topic id (v10)
                return errors.GROUP_AUTHORIZATION_FAILED if not group_allowed else errors.UNKNOWN_TOPIC_ID
            return results.get((name, p)) or code or replicated

        topics = tuple(
            make(
                m.OffsetCommitResponseTopic,
                name=name or "",
                topic_id=tid,
                partitions=tuple(
                    make(m.OffsetCommitResponsePartition, partition_index=p, error_code=error(name, p))
                    for p in parts
                ),
            )
            for name, tid, parts in order
        )
        return make(m.OffsetCommitResponse, throttle_time=0, topics=topics)

    if not_here:
        return respond()
    # answered once the commit (and every earlier write of the group's partition) is replicated
    return groups.answer_after_write(ctx, [groups.coordinator.partition_for(request.group_id)], respond)
