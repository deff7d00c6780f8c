"""What the two admin calls that change a share group's offsets (AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92, KIP-932) share: the checks before anything is changed, in Kafka's order
(GroupCoordinatorService.alterShareGroupOffsets / deleteShareGroupOffsets), and the persister's
callbacks as futures."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from odradek.protocol import errors
from odradek.security.acl import ResourceType
from odradek.server.handlers.share_group_heartbeat import (
    UNSUPPORTED_MESSAGE,
    other_group_type,
    share_groups_enabled,
)
from odradek.server.request_context import HasGroups, HasShare, RequestContext
from odradek.server.share_manager import persister_call

__all__ = ["empty_share_group", "persister_call"]

if TYPE_CHECKING:
    from odradek.coordinator.share.share_group import ShareGroup
    from odradek.server.share_services import ShareServices


class Needs(HasGroups, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def empty_share_group(ctx: RequestContext, group_id: str, failed: Callable[..., Any], *,
                      create_missing: bool) -> tuple[ShareServices, ShareGroup] | Any:
    """(share services, the group) when the call may go on, else ``failed(code[, message])``: share
    groups off (UNSUPPORTED_VERSION), the group not authorized (GROUP_AUTHORIZATION_FAILED), not
    coordinated here, a group of another type or (unless ``create_missing``, which makes it empty) an
    unknown one (GROUP_ID_NOT_FOUND), a group with members (NON_EMPTY_GROUP)."""
    svc = services(ctx)
    share = svc.share
    if not share_groups_enabled(ctx) or share is None:
        return failed(errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE)
    if not ctx.permits(ResourceType.GROUP, group_id):
        return failed(errors.GROUP_AUTHORIZATION_FAILED)
    not_here = svc.groups.coordinator_error(group_id)
    if not_here:
        return failed(not_here)
    if other_group_type(ctx, group_id):
        return failed(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    group = share.groups.groups.get(group_id)
    if group is None and not create_missing:
        return failed(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if group is not None and group.members:
        return failed(errors.NON_EMPTY_GROUP, "The group is not empty.")
    if group is None:
        group = share.groups.create_empty(group_id)
    return share, group

