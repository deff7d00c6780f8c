"""DeleteGroups (42): only empty groups; their offsets go too. An empty share group (KIP-932) is removed with the
state of its share-partitions in __share_group_state (server.share_services.ShareServices.delete_group); its
records in __consumer_offsets are tombstoned. Answered once the tombstones are replicated."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasShare, RequestContext

API_KEY = ApiKey.DELETE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 2


class Needs(HasGroups, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    groups = services(ctx).groups
    allowed = {g for g in request.groups_names if ctx.permits(ResourceType.GROUP, g)}
    mine = [g for g in request.groups_names if g in allowed and not groups.coordinator_error(g)]
    share = services(ctx).share
    shared = [g for g in mine if share is not None and g in share.groups.groups]
    results = groups.coordinator.delete_groups([g for g in mine if g not in shared])
    for g in shared:  # a share group (KIP-932): only when it has no members
        assert share is not None
        results[g] = share.delete_group(g)
    for g in request.groups_names:
        if g not in allowed:
            results[g] = errors.GROUP_AUTHORIZATION_FAILED
        elif g not in results:
            results[g] = groups.coordinator_error(g)
    # answered once the tombstones (classic and share groups') are replicated (coordinator.runtime)
    parts = [groups.coordinator.partition_for(g) for g in mine]

    def build(failed: int) -> Any:
        return make(
            m.DeleteGroupsResponse,
            throttle_time=0,
            results=tuple(
                make(m.DeletableGroupResult, group_id=g, error_code=c or (failed if g in mine else 0))
                for g, c in results.items()
            ),
        )

    return groups.answer_after_write(ctx, parts, build)
