"""ShareGroupHeartbeat (76): the share group protocol of KIP-932 (v1: the client generates its member id).

Gated by the finalized ``share.version`` (KIP-584): below 1 the request is answered UNSUPPORTED_VERSION, as Kafka
4.4's KafkaApis does when share groups are not enabled. Authorization (KafkaApis.handleShareGroupHeartbeatRequest):
READ on the group, else GROUP_AUTHORIZATION_FAILED; DESCRIBE on every subscribed topic, else
TOPIC_AUTHORIZATION_FAILED. A group id a classic or consumer group holds is refused with
GROUP_ID_NOT_FOUND ("Group ... is not a share group"), as Kafka's GroupMetadataManager does. What the heartbeat
changed is written to the group's ``__consumer_offsets`` partition (the ShareGroup* records) and the response waits
for its replication, as Kafka's coordinator answers a write once committed; a failed append is answered with its
error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from odradek.controller.features import SHARE_VERSION
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasFeatures, HasGroups, HasShare, RequestContext

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
MIN_VERSION = 1
MAX_VERSION = 1

UNSUPPORTED_MESSAGE = "The version of API is not supported."


class Needs(HasGroups, HasFeatures, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def share_groups_enabled(ctx: RequestContext) -> bool:
    """Kafka's isShareGroupProtocolEnabled: share.version >= 1 (SV_1) is finalized."""
    return services(ctx).share is not None and services(ctx).features.level(SHARE_VERSION) >= 1


def other_group_type(ctx: RequestContext, group_id: str) -> bool:
    """A classic or KIP-848 consumer group holds ``group_id``."""
    groups = services(ctx).groups
    return group_id in groups.coordinator.groups or group_id in groups.consumer.groups


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module

    def error(code: int, message: str | None = None) -> Any:
        return make(m.ShareGroupHeartbeatResponse, throttle_time=0, error_code=code, error_message=message,
                    member_id=request.member_id or None, member_epoch=int(request.member_epoch),
                    heartbeat_interval=datetime.timedelta(0), assignment=None)

    if not share_groups_enabled(ctx):
        return error(errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE)
    share = services(ctx).share
    assert share is not None
    names = request.subscribed_topic_names
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        return error(errors.GROUP_AUTHORIZATION_FAILED)
    if names and not all(ctx.permits(ResourceType.TOPIC, n) for n in set(names)):
        return error(errors.TOPIC_AUTHORIZATION_FAILED)
    not_here = services(ctx).groups.coordinator_error(request.group_id)
    if not_here:
        return error(not_here)
    if other_group_type(ctx, request.group_id):
        return error(errors.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
    share.coordinator.ensure_topic()  # __share_group_state before the members' first ShareFetch
    r = share.groups.heartbeat(request.group_id, request.member_id, int(request.member_epoch), request.rack_id,
                               list(names) if names is not None else None, ctx.client_id or "",
                               "/" + ctx.client_host)
    code, partitions = share.flush()
    if code:
        return error(code)
    assignment = None
    if r.assignment is not None:
        assignment = make(
            m.Assignment,
            topic_partitions=tuple(
                make(m.TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
                for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))
            ),
        )

    def build(failed: int) -> Any:
        if failed:
            return error(failed)
        return make(
            m.ShareGroupHeartbeatResponse,
            throttle_time=0,
            error_code=r.error_code,
            error_message=r.error_message,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval=datetime.timedelta(milliseconds=r.heartbeat_interval_ms),
            assignment=assignment,
        )

    if not partitions:
        return build(errors.NONE)
    return services(ctx).groups.answer_after_write(ctx, partitions, build)
