"""DescribeGroups (15): a missing group is reported as Dead, with no error up to v5 and, from v6
(KIP-1043), with GROUP_ID_NOT_FOUND and the message "Group <id> not found." (Kafka's
GroupMetadataManager.describeGroups).

A consumer-protocol (KIP-848) group is described too, with its state, protocol type
``consumer``, its server assignor as the protocol, and per member a ConsumerProtocolSubscription
v0 (subscribed topics) and ConsumerProtocolAssignment v0 (current partitions, by topic name),
so tools written for classic groups can read it; ConsumerGroupDescribe (69) gives the details.
"""

from __future__ import annotations

from typing import Any, Protocol

from odradek.coordinator.group.classic import GroupState
from odradek.coordinator.group.consumer_protocol import encode_assignment, encode_subscription
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasTopics, RequestContext

API_KEY = ApiKey.DESCRIBE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 6


class Needs(HasTopics, HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    coord = services(ctx).groups.coordinator
    out = []
    consumer = services(ctx).groups.consumer
    for gid in request.groups:
        not_here = services(ctx).groups.coordinator_error(gid)
        if not ctx.permits(ResourceType.GROUP, gid):
            not_here = errors.GROUP_AUTHORIZATION_FAILED
        if not_here:
            out.append(
                make(m.DescribedGroup, error_code=not_here, group_id=gid, group_state="", protocol_type="",
                     protocol_data="", members=(), authorized_operations=-(2**31))
            )
            continue
        # KIP-430: the operations the principal may do on the group, when the client asks
        ops = (ctx.authorized_operations(ResourceType.GROUP, gid)
               if getattr(request, "include_authorized_operations", False) else -(2**31))
        cg = consumer.describe(gid)
        if cg is not None:
            out.append(_consumer_group(m, consumer, cg, ops))
            continue
        g = coord.describe(gid)
        if g is None:  # describe() leaves out Dead groups, as Kafka removes them
            missing = ctx.api_version >= 6  # KIP-1043: an error, where older versions only say Dead
            out.append(
                make(m.DescribedGroup, error_code=errors.GROUP_ID_NOT_FOUND if missing else errors.NONE,
                     error_message=f"Group {gid} not found." if missing else None, group_id=gid,
                     group_state="Dead", protocol_type="", protocol_data="", members=(),
                     authorized_operations=-(2**31))
            )
            continue
        stable = g.state == GroupState.STABLE
        members = tuple(
            make(
                m.DescribedGroupMember,
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                member_metadata=mm.metadata(g.protocol_name) if stable and g.protocol_name else b"",
                member_assignment=mm.assignment if stable else b"",
            )
            for mm in g.members.values()
        )
        out.append(
            make(
                m.DescribedGroup,
                error_code=errors.NONE,
                group_id=gid,
                group_state=g.state.value,
                protocol_type=g.protocol_type or "",
                protocol_data=(g.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=ops,
            )
        )
    return make(m.DescribeGroupsResponse, throttle_time=0, groups=tuple(out))


def _consumer_group(m: Any, consumer: Any, g: Any, ops: int) -> Any:
    members = []
    for mm in g.members.values():
        by_name: dict[str, list[int]] = {}
        for t, ps in mm.assigned.items():
            name = consumer.topics.name_of(t)
            if name is not None:
                by_name[name] = sorted(ps)
        members.append(
            make(
                m.DescribedGroupMember,
                member_id=mm.member_id,
                group_instance_id=mm.instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                member_metadata=encode_subscription(consumer.member_topics(mm)),
                member_assignment=encode_assignment(by_name),
            )
        )
    return make(
        m.DescribedGroup,
        error_code=errors.NONE,
        group_id=g.group_id,
        group_state=g.state.value,
        protocol_type="consumer",
        protocol_data=g.assignor_name or consumer.preferred_assignor(g),
        members=tuple(members),
        authorized_operations=ops,
    )
