"""ConsumerGroupDescribe (69): consumer-protocol groups with epochs, assignor, and each member's
current and target assignment. Groups unknown here (or classic ones) get GROUP_ID_NOT_FOUND.
Every group gets UNSUPPORTED_VERSION while ``group.version`` < 1 is finalized (KIP-584).

Authorization (KafkaApis.handleConsumerGroupDescribe): DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED for it; a group whose members' assignments or target assignments name a
topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED with no members, so
the topic's name and partitions stay hidden; the group's KIP-430 operations when asked for."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers.consumer_group_heartbeat import UNSUPPORTED_MESSAGE, consumer_protocol_enabled
from odradek.server.request_context import HasGroups, HasTopics, RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
MIN_VERSION = 0
MAX_VERSION = 1

_NO_OPS = -(2**31)
UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


class Needs(HasTopics, HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _assignment(m: Any, view: Any, parts: Mapping[uuid.UUID, frozenset[int]]) -> Any:
    tps = []
    for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        tps.append(make(m.TopicPartitions, topic_id=t, topic_name=view.name_of(t) or "", partitions=tuple(sorted(ps))))
    return make(m.Assignment, topic_partitions=tuple(tps))


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    consumer = services(ctx).groups.consumer
    enabled = consumer_protocol_enabled(ctx)
    out = []
    for gid in request.group_ids:
        if not enabled:
            not_here = errors.UNSUPPORTED_VERSION
        elif not ctx.permits(ResourceType.GROUP, gid):
            not_here = errors.GROUP_AUTHORIZATION_FAILED
        else:
            not_here = services(ctx).groups.coordinator_error(gid)
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
                member_type=0 if mm.classic is not None else 1,  # KIP-1099: 0 classic, 1 consumer
            )
            for mm in g.members.values()
        )
        named = {tp.topic_name for mm in members for a in (mm.assignment, mm.target_assignment)
                 for tp in a.topic_partitions if tp.topic_name}
        if not all(ctx.permits(ResourceType.TOPIC, t) for t in named):
            out.append(
                make(m.DescribedGroup, error_code=errors.TOPIC_AUTHORIZATION_FAILED, error_message=UNAUTHORIZED_TOPICS,
                     group_id=gid, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                     members=(), authorized_operations=_NO_OPS)
            )
            continue
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
                authorized_operations=(ctx.authorized_operations(ResourceType.GROUP, gid)
                                       if getattr(request, "include_authorized_operations", False) else _NO_OPS),
            )
        )
    return make(m.ConsumerGroupDescribeResponse, throttle_time=0, groups=tuple(out))
