"""OffsetFetch (9): one group (v1-7) or several (v8+); null topics = all committed. With
require_stable (v7+, KIP-447) a partition whose offset a transaction has committed but not ended
answers UNSTABLE_OFFSET_COMMIT (the client retries)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.request_context import RequestContext

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def _topics(ctx: Any, m: Any, group_id: str, topics: Any, topic_cls: Any, part_cls: Any,
            require_stable: bool = False) -> tuple[int, tuple[Any, ...]]:
    coord = ctx.services.groups.coordinator
    pending = ctx.services.groups.txn_offsets
    not_here = ctx.services.groups.coordinator_error(group_id)
    if not ctx.permits(ResourceType.GROUP, group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        return not_here, ()
    wanted = None
    if topics is not None:
        wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
    code, found = coord.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[Any]] = {}
    keys = wanted if wanted is not None else sorted(found)
    describable: dict[str, bool] = {}
    for name, p in keys:
        if name not in describable:
            describable[name] = ctx.permits(ResourceType.TOPIC, name)
        if not describable[name]:
            if wanted is not None:  # asked for: refused; all committed: left out
                by_topic.setdefault(name, []).append(make(
                    part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                    error_code=errors.TOPIC_AUTHORIZATION_FAILED))
            continue
        om = found.get((name, p))
        unstable = require_stable and pending.has_pending(group_id, (name, p))
        if unstable:  # KIP-447: a transaction's offsets for it are not decided yet; the client retries
            om = None
        by_topic.setdefault(name, []).append(
            make(
                part_cls,
                partition_index=p,
                committed_offset=om.offset if om else -1,
                committed_leader_epoch=om.leader_epoch if om else -1,
                metadata=om.metadata if om else "",
                error_code=errors.UNSTABLE_OFFSET_COMMIT if unstable else errors.NONE,
            )
        )
    return code, tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())


def handle(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            # v9: a member of a consumer-protocol group fetches with its member id and epoch
            code = ctx.services.groups.consumer.validate_offset_fetch(
                g.group_id, getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1))
            )
            if code:
                groups.append(make(m.OffsetFetchResponseGroup, group_id=g.group_id, topics=(), error_code=code))
                continue
            code, topics = _topics(ctx, m, g.group_id, g.topics, m.OffsetFetchResponseTopics,
                                   m.OffsetFetchResponsePartitions, bool(request.require_stable))
            groups.append(make(m.OffsetFetchResponseGroup, group_id=g.group_id, topics=topics, error_code=code))
        return make(m.OffsetFetchResponse, throttle_time=0, groups=tuple(groups))
    code, topics = _topics(ctx, m, request.group_id, request.topics, m.OffsetFetchResponseTopic,
                           m.OffsetFetchResponsePartition, bool(getattr(request, "require_stable", False)))
    return make(m.OffsetFetchResponse, throttle_time=0, topics=topics, error_code=code)
