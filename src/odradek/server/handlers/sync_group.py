"""SyncGroup (14): the leader's assignment goes to every member once the group record holding
it is replicated (coordinator.runtime: Kafka answers SyncGroup in storeGroup's callback)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.group.coordinator import SyncResult
from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.request_context import RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def answer(r: SyncResult) -> None:
        if not fut.done():
            fut.set_result(
                make(
                    m.SyncGroupResponse,
                    throttle_time=0,
                    error_code=r.error_code,
                    protocol_type=r.protocol_type,
                    protocol_name=r.protocol_name,
                    assignment=r.assignment,
                )
            )

    groups = ctx.services.groups
    not_here = groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        answer(SyncResult(not_here))
        return fut.result()

    def respond(r: SyncResult) -> None:
        # the assignment is given out once the group record holding it is replicated
        def then(code: int) -> None:
            answer(r if code == errors.NONE or r.error_code != errors.NONE else SyncResult(code))

        groups.after_write(ctx, [groups.coordinator.partition_for(request.group_id)], then)

    groups.coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in request.assignments},
        respond,
    )
    if fut.done():
        return fut.result()
    return fut
