"""ShareGroupDescribe (77, KIP-932): share groups' members, their assignments and epochs. Authorization
(KafkaApis.handleShareGroupDescribe): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for that group; a
group unknown here, or of another type, is GROUP_ID_NOT_FOUND. Gated by ``share.version``."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.coordinator.share.share_group import ASSIGNOR_NAME
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers.share_group_heartbeat import UNSUPPORTED_MESSAGE, share_groups_enabled
from odradek.server.request_context import HasGroups, HasShare, HasTopics, RequestContext

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
MIN_VERSION = 1
MAX_VERSION = 1

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class Needs(HasTopics, HasGroups, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    share = services(ctx).share
    topics = services(ctx).topics
    out = []
    for gid in request.group_ids:
        def failed(code: int, message: str | None = None, gid: str = gid) -> Any:
            return make(m.DescribedGroup, error_code=code, error_message=message, group_id=gid, group_state="Dead",
                        group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

        if not share_groups_enabled(ctx) or share is None:
            out.append(failed(errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE))
            continue
        if not ctx.permits(ResourceType.GROUP, gid):
            out.append(failed(errors.GROUP_AUTHORIZATION_FAILED))
            continue
        not_here = services(ctx).groups.coordinator_error(gid)
        if not_here:
            out.append(failed(not_here))
            continue
        g = share.groups.groups.get(gid)
        if g is None:
            out.append(failed(errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
            continue
        members = []
        for mem in g.members.values():
            tps = []
            for tid, ps in sorted(mem.assignment.items(), key=lambda kv: str(kv[0])):
                meta = topics.by_id.get(tid)
                tps.append(make(m.TopicPartitions, topic_id=tid, topic_name=meta.name if meta else "",
                                partitions=tuple(sorted(ps))))
            members.append(make(m.Member, member_id=mem.member_id, rack_id=mem.rack_id,
                                member_epoch=mem.member_epoch, client_id=mem.client_id,
                                client_host=mem.client_host, subscribed_topic_names=mem.subscribed_topic_names,
                                assignment=make(m.Assignment, topic_partitions=tuple(tps))))
        out.append(make(m.DescribedGroup, error_code=errors.NONE, error_message=None, group_id=gid,
                        group_state=g.state, group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
                        assignor_name=ASSIGNOR_NAME, members=tuple(members),
                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return make(m.ShareGroupDescribeResponse, throttle_time=0, groups=tuple(out))
