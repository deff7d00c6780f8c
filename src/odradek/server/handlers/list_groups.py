"""ListGroups (16): with the state (v4) and type (v5) filters; share groups (KIP-932) listed as type "share",
protocol type "share", as Kafka 4.4 lists them."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasShare, RequestContext

API_KEY = ApiKey.LIST_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5


class Needs(HasGroups, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    states = set(getattr(request, "states_filter", ()) or ())
    types = {t.lower() for t in (getattr(request, "types_filter", ()) or ())}
    # DESCRIBE on the cluster lists every group, otherwise those the principal may DESCRIBE
    everything = ctx.permits(ResourceType.CLUSTER)

    def visible(gid: str) -> bool:
        return everything or ctx.permits(ResourceType.GROUP, gid)

    groups = [g for g in services(ctx).groups.coordinator.list_groups(states or None) if visible(g.group_id)]
    if types and "classic" not in types:
        groups = []
    out = [
        make(m.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value, group_type="classic")
        for g in groups
    ]
    if not types or "consumer" in types:
        out += [
            make(m.ListedGroup, group_id=g.group_id, protocol_type="consumer", group_state=g.state.value, group_type="consumer")
            for g in services(ctx).groups.consumer.list_groups(states or None)
            if visible(g.group_id)
        ]
    share = services(ctx).share
    if share is not None and (not types or "share" in types):
        out += [
            make(m.ListedGroup, group_id=g.group_id, protocol_type="share", group_state=g.state, group_type="share")
            for g in share.groups.list_groups(states or None)
            if visible(g.group_id)
        ]
    return make(m.ListGroupsResponse, throttle_time=0, error_code=errors.NONE, groups=tuple(out))
