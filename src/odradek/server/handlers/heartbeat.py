"""Heartbeat (12)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext

API_KEY = ApiKey.HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 4


class Needs(HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    groups = services(ctx).groups
    m = ctx.response_module
    not_here = groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    if not_here:
        return make(m.HeartbeatResponse, throttle_time=0, error_code=not_here)
    code = groups.coordinator.heartbeat(
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None)
    )
    # a read of the group's state: after the coordinator's pending writes (Kafka's CoordinatorRuntime)
    return groups.answer_after_write(
        ctx, [groups.coordinator.partition_for(request.group_id)],
        lambda failed: make(m.HeartbeatResponse, throttle_time=0, error_code=code or failed),
    )
