"""OffsetFetch (9): one group (v1-7) or several (v8+); null topics = all committed. With
require_stable (v7+, KIP-447) a partition whose offset a transaction has committed but not ended
answers UNSTABLE_OFFSET_COMMIT (the client retries). From v10 (KIP-848) topics are named by id: an
unknown id is answered UNKNOWN_TOPIC_ID on each of its partitions, and all committed offsets are
listed by id, leaving out those of topics that no longer exist (Kafka's KafkaApis.fetchOffsetsForGroup
and fetchAllOffsetsForGroup)."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasTopics, RequestContext

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 1
MAX_VERSION = 10


class Needs(HasTopics, HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _topics(ctx: Any, m: Any, group_id: str, topics: Any, topic_cls: Any, part_cls: Any,
            require_stable: bool = False) -> tuple[int, tuple[Any, ...]]:
    coord = services(ctx).groups.coordinator
    pending = services(ctx).groups.txn_offsets
    not_here = services(ctx).groups.coordinator_error(group_id)
    if not ctx.permits(ResourceType.GROUP, group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        return not_here, ()
    by_id = ctx.api_version >= 10
    registry = services(ctx).topics
    wanted: list[tuple[str, int]] | None = None
    unknown: list[Any] = []  # v10: the requested topics whose id this broker does not know
    if topics is not None:
        wanted = []
        for t in topics:
            if by_id:
                meta = registry.by_id.get(t.topic_id) if t.topic_id is not None else None
                if meta is None:
                    unknown.append(t)
                    continue
                name = meta.name
            else:
                name = t.name
            wanted.extend((name, p) for p in t.partition_indexes)
    code, found = coord.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[Any]] = {}
    keys = wanted if wanted is not None else sorted(found)
    describable: dict[str, bool] = {}
    ids: dict[str, uuid.UUID | None] = {}
    for name, p in keys:
        if name not in describable:
            describable[name] = ctx.permits(ResourceType.TOPIC, name)
        if by_id and name not in ids:
            meta = registry.get(name)
            ids[name] = meta.topic_id if meta is not None else None
        if not describable[name]:
            if wanted is not None:  # asked for: refused; all committed: left out
                by_topic.setdefault(name, []).append(make(
                    part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                    error_code=errors.TOPIC_AUTHORIZATION_FAILED))
            continue
        if by_id and wanted is None and ids[name] is None:
            continue  # all committed, by id: a topic deleted since has no id to name it by
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
    out = [make(topic_cls, name=n, topic_id=ids.get(n), partitions=tuple(ps)) for n, ps in by_topic.items()]
    out.extend(
        make(topic_cls, name="", topic_id=t.topic_id, partitions=tuple(
            make(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                 error_code=errors.UNKNOWN_TOPIC_ID)
            for p in t.partition_indexes))
        for t in unknown
    )
    return code, tuple(out)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            # v9: a member of a consumer-protocol group fetches with its member id and epoch
            code = services(ctx).groups.consumer.validate_offset_fetch(
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
