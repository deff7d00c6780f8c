"""JoinGroup (11): classic rebalance protocol; v4+ first join gets MEMBER_ID_REQUIRED."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Protocol

from odradek.coordinator.group.coordinator import JoinResult
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext

API_KEY = ApiKey.JOIN_GROUP
MIN_VERSION = 0
MAX_VERSION = 9


class Needs(HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


class _WaitingJoin:
    """A JoinGroup waiting for the rebalance to complete. One object (and the bound method the
    coordinator keeps) rather than nested closures: 10,000 members waiting in one group were
    ~10 GC-tracked closures and cells each, all walked by every full garbage collection
    during the storm (hundreds of ms with the event loop held)."""

    __slots__ = ("ctx", "group_id", "fut")

    def __init__(self, ctx: RequestContext, group_id: str, fut: asyncio.Future[Any]) -> None:
        self.ctx = ctx
        self.group_id = group_id
        self.fut = fut

    def respond(self, r: JoinResult) -> None:
        # after the coordinator's writes to the group's partition are replicated
        groups = services(self.ctx).groups
        groups.after_write(self.ctx, [groups.coordinator.partition_for(self.group_id)], partial(self._then, r))

    def _then(self, r: JoinResult, code: int) -> None:
        self.answer(r if code == errors.NONE or r.error_code != errors.NONE else JoinResult(code, member_id=r.member_id))

    def answer(self, r: JoinResult) -> None:
        fut = self.fut
        if fut.done():
            return
        ctx = self.ctx
        m = ctx.response_module
        members = tuple(
            make(m.JoinGroupResponseMember, member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in r.members
        )
        fut.set_result(
            make(
                m.JoinGroupResponse,
                throttle_time=0,
                error_code=r.error_code,
                generation_id=r.generation_id,
                protocol_type=r.protocol_type,
                protocol_name=r.protocol_name if ctx.api_version >= 7 else (r.protocol_name or ""),
                leader=r.leader,
                skip_assignment=r.skip_assignment,
                member_id=r.member_id,
                members=members,
            )
        )


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    waiting = _WaitingJoin(ctx, request.group_id, fut)
    groups = services(ctx).groups

    not_here = groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        waiting.answer(JoinResult(not_here, member_id=request.member_id))
        return fut.result()
    rebalance = getattr(request, "rebalance_timeout", None)
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    services(ctx).groups.coordinator.join_group(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        ctx.client_id or "",
        "/" + ctx.client_host,
        session_ms,
        rebalance_ms,
        request.protocol_type,
        [(p.name, bytes(p.metadata)) for p in request.protocols],
        ctx.api_version >= 4,
        waiting.respond,
    )
    if fut.done():
        return fut.result()
    return fut
