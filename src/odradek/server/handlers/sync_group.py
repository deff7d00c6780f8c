"""SyncGroup (14): the leader's assignment goes to every member once the group record holding
it is replicated (coordinator.runtime: Kafka answers SyncGroup in storeGroup's callback)."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Protocol

from odradek.coordinator.group.coordinator import SyncResult
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext

API_KEY = ApiKey.SYNC_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


class Needs(HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


class _WaitingSync:
    """A SyncGroup waiting for the leader's assignment: one object and the bound method the
    coordinator keeps, not closures and cells per member (see join_group._WaitingJoin)."""

    __slots__ = ("ctx", "group_id", "fut")

    def __init__(self, ctx: RequestContext, group_id: str, fut: asyncio.Future[Any]) -> None:
        self.ctx = ctx
        self.group_id = group_id
        self.fut = fut

    def respond(self, r: SyncResult) -> None:
        # the assignment is given out once the group record holding it is replicated
        groups = services(self.ctx).groups
        groups.after_write(self.ctx, [groups.coordinator.partition_for(self.group_id)], partial(self._then, r))

    def _then(self, r: SyncResult, code: int) -> None:
        self.answer(r if code == errors.NONE or r.error_code != errors.NONE else SyncResult(code))

    def answer(self, r: SyncResult) -> None:
        if not self.fut.done():
            self.fut.set_result(
                make(
                    self.ctx.response_module.SyncGroupResponse,
                    throttle_time=0,
                    error_code=r.error_code,
                    protocol_type=r.protocol_type,
                    protocol_name=r.protocol_name,
                    assignment=r.assignment,
                )
            )


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    waiting = _WaitingSync(ctx, request.group_id, fut)
    groups = services(ctx).groups
    not_here = groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        waiting.answer(SyncResult(not_here))
        return fut.result()
    groups.coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in request.assignments},
        waiting.respond,
    )
    if fut.done():
        return fut.result()
    return fut
