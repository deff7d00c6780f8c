"""LeaveGroup (13): one member (v0-2) or a batch of members (v3+); answered once the
coordinator's writes to the group's partition are replicated (coordinator.runtime)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext

API_KEY = ApiKey.LEAVE_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


class Needs(HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    coord = services(ctx).groups.coordinator
    not_here = services(ctx).groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        if ctx.api_version >= 3:
            return make(m.LeaveGroupResponse, throttle_time=0, error_code=not_here, members=())
        return make(m.LeaveGroupResponse, throttle_time=0, error_code=not_here)
    partition = [services(ctx).groups.coordinator.partition_for(request.group_id)]
    answer_after_write = services(ctx).groups.answer_after_write
    if ctx.api_version >= 3:
        members = [(x.member_id, x.group_instance_id) for x in request.members]
        code, results = coord.leave_group(request.group_id, members)
        return answer_after_write(ctx, partition, lambda failed: make(
            m.LeaveGroupResponse,
            throttle_time=0,
            error_code=code or failed,
            members=tuple(
                make(m.MemberResponse, member_id=mid, group_instance_id=iid, error_code=c) for mid, iid, c in results
            ),
        ))
    code, results = coord.leave_group(request.group_id, [(request.member_id, None)])
    if code == 0 and results:
        code = results[0][2]
    return answer_after_write(
        ctx, partition, lambda failed: make(m.LeaveGroupResponse, throttle_time=0, error_code=code or failed)
    )
