"""DescribeShareGroupOffsets (90, KIP-932; v1 adds KIP-1226's lag): each share-partition's start offset and leader
epoch as the share coordinator keeps them (ReadShareGroupStateSummary through the persister) and, v1, its lag:
the high watermark less the start offset less the records from it whose delivery is complete (-1 when either
is unknown). ``kafka-share-groups --describe`` asks it. Topics null: the partitions of the topics the group
subscribes to. Authorization: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED for the group; DESCRIBE on
each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions. Gated by ``share.version``."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.coordinator.share.share_state import PartitionResult
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers.share_group_heartbeat import UNSUPPORTED_MESSAGE, share_groups_enabled
from odradek.server.request_context import HasGroups, HasLogManager, HasShare, HasTopics, RequestContext

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 1


class Needs(HasTopics, HasLogManager, HasGroups, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def lag(high_watermark: int, start_offset: int, delivery_complete_count: int) -> int:
    """KIP-1226: the records from the start offset not yet delivered to completion; -1 when unknown."""
    if start_offset < 0 or delivery_complete_count < 0 or high_watermark < 0:
        return -1
    return max(0, high_watermark - start_offset - delivery_complete_count)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    svc = services(ctx)
    share = svc.share
    loop = asyncio.get_running_loop()
    # per group: (error, message, [(topic name, topic id, [(partition, future or error)])])
    plan: list[tuple[str, int, str | None, list[tuple[str, Any, list[tuple[int, Any]]]]]] = []
    for g in request.groups:
        gid = g.group_id
        if not share_groups_enabled(ctx) or share is None:
            plan.append((gid, errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE, []))
            continue
        if not ctx.permits(ResourceType.GROUP, gid):
            plan.append((gid, errors.GROUP_AUTHORIZATION_FAILED, None, []))
            continue
        not_here = svc.groups.coordinator_error(gid)
        if not_here:
            plan.append((gid, not_here, None, []))
            continue
        group = share.groups.groups.get(gid)
        if group is None:
            plan.append((gid, errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.", []))
            continue
        wanted: list[tuple[str, list[int] | None]]
        if g.topics is None:
            wanted = [(name, None) for name in sorted(group.topics)]
        else:
            wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        topics = []
        for name, parts in wanted:
            meta = svc.topics.get(name)
            indexes = parts if parts is not None else (list(range(len(meta.partitions))) if meta else [])
            entries: list[tuple[int, Any]] = []
            for p in indexes:
                if not ctx.permits(ResourceType.TOPIC, name):
                    entries.append((p, errors.TOPIC_AUTHORIZATION_FAILED))
                elif meta is None or not 0 <= p < len(meta.partitions):
                    entries.append((p, errors.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    fut: asyncio.Future[PartitionResult] = loop.create_future()

                    def done(r: PartitionResult, fut: asyncio.Future[PartitionResult] = fut) -> None:
                        if not fut.done():
                            fut.set_result(r)

                    share.persister.read_state_summary(gid, meta.topic_id, p, done)
                    entries.append((p, fut))
            topics.append((name, meta.topic_id if meta else None, entries))
        plan.append((gid, errors.NONE, None, topics))

    async def run() -> Any:
        groups = []
        for gid, code, msg, topics in plan:
            out_topics = []
            for name, tid, entries in topics:
                parts = []
                for p, what in entries:
                    if isinstance(what, int):
                        parts.append(make(m.DescribeShareGroupOffsetsResponsePartition, partition_index=p,
                                          start_offset=-1, leader_epoch=-1, lag=-1, error_code=what,
                                          error_message=None))
                        continue
                    r: PartitionResult = await what
                    plog = svc.log_manager.get_log(name, p)
                    hw = plog.high_watermark if plog is not None else -1
                    parts.append(make(m.DescribeShareGroupOffsetsResponsePartition, partition_index=p,
                                      start_offset=r.start_offset if not r.error_code else -1,
                                      leader_epoch=r.leader_epoch if not r.error_code else -1,
                                      lag=lag(hw, r.start_offset, r.delivery_complete_count) if not r.error_code else -1,
                                      error_code=r.error_code, error_message=r.error_message))
                out_topics.append(make(m.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=tid,
                                       partitions=tuple(parts)))
            groups.append(make(m.DescribeShareGroupOffsetsResponseGroup, group_id=gid, topics=tuple(out_topics),
                               error_code=code, error_message=msg))
        return make(m.DescribeShareGroupOffsetsResponse, throttle_time=0, groups=tuple(groups))

    return loop.create_task(run())
