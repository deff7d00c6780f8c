"""ConsumerGroupDescribe (69): consumer-protocol groups with epochs, assignor, and each member's
current and target assignment. Groups unknown here (or classic ones) get GROUP_ID_NOT_FOUND.
Every group gets UNSUPPORTED_VERSION while ``group.version`` < 1 is finalized (KIP-584)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers.consumer_group_heartbeat import UNSUPPORTED_MESSAGE, consumer_protocol_enabled
from odradek.server.request_context import RequestContext

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

_NO_OPS = -(2**31)


def _assignment(m: Any, view: Any, parts: Mapping[uuid.UUID, frozenset[int]]) -> Any:
    tps = []
    for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        tps.append(make(m.TopicPartitions, topic_id=t, topic_name=view.name_of(t) or "", partitions=tuple(sorted(ps))))
    return make(m.Assignment, topic_partitions=tuple(tps))


def handle(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    consumer = ctx.services.groups.consumer
    enabled = consumer_protocol_enabled(ctx)
    out = []
    for gid in request.group_ids:
        not_here = ctx.services.groups.coordinator_error(gid) if enabled else errors.UNSUPPORTED_VERSION
        if enabled and not ctx.permits(ResourceType.GROUP, gid):
            not_here = errors.GROUP_AUTHORIZATION_FAILED
        g = consumer.describe(gid) if gid and not not_here else None
        if g is None:
            code = not_here or (errors.INVALID_GROUP_ID if not gid else errors.GROUP_ID_NOT_FOUND)
            message = UNSUPPORTED_MESSAGE if not enabled else f"Group {gid} not found." if gid else None
            out.append(
                make(m.DescribedGroup, error_code=code, error_message=message,
                     group_id=gid, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                     members=(), authorized_operations=_NO_OPS)
            )
            continue
        members = tuple(
            make(
                m.Member,
                member_id=mm.member_id,
                instance_id=mm.instance_id,
                rack_id=mm.rack_id,
                member_epoch=mm.member_epoch,
                client_id=mm.client_id,
                client_host=mm.client_host,
                subscribed_topic_names=tuple(mm.subscribed_topic_names),
                subscribed_topic_regex=mm.subscribed_topic_regex,
                assignment=_assignment(m, consumer.topics, mm.assigned),
                target_assignment=_assignment(m, consumer.topics, g.target.get(mm.member_id, {})),
                member_type=1,
            )
            for mm in g.members.values()
        )
        out.append(
            make(
                m.DescribedGroup,
                error_code=errors.NONE,
                group_id=gid,
                group_state=g.state.value,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name or consumer.preferred_assignor(g),
                members=members,
                authorized_operations=_NO_OPS,
            )
        )
    return make(m.ConsumerGroupDescribeResponse, throttle_time=0, groups=tuple(out))
