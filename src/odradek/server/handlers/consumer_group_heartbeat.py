"""ConsumerGroupHeartbeat (68): the consumer group protocol of KIP-848 (v0: the coordinator may
assign the member id; v1: the client generates it and may subscribe with a regex).

Gated by the finalized ``group.version`` (KIP-584): below 1 the request is answered
UNSUPPORTED_VERSION, as Kafka 4.0's KafkaApis does when the consumer protocol is not enabled.

Authorization (KafkaApis.handleConsumerGroupHeartbeat): READ on the group, else
GROUP_AUTHORIZATION_FAILED; then DESCRIBE on every topic named in SubscribedTopicNames, else
TOPIC_AUTHORIZATION_FAILED for the whole request (the member is not changed). A regex subscription
is not refused: it matches only the topics the principal may DESCRIBE (ConsumerMember.may_describe,
Kafka's GroupMetadataManager resolving regexes through the authorizer). A share group's id is refused with
GROUP_ID_NOT_FOUND, as Kafka's getOrMaybeCreateConsumerGroup does for a group of another type."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from odradek.controller.features import GROUP_VERSION
from odradek.coordinator.group.consumer_model import HeartbeatRequest
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasFeatures, HasGroups, HasShare, RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 1

UNSUPPORTED_MESSAGE = "The version of API is not supported."


class Needs(HasGroups, HasFeatures, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """Kafka's isConsumerGroupProtocolEnabled: group.version >= 1 (GV_1) is finalized."""
    return services(ctx).features.level(GROUP_VERSION) >= 1


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    if not consumer_protocol_enabled(ctx):
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=0, error_code=errors.UNSUPPORTED_VERSION,
                    error_message=UNSUPPORTED_MESSAGE, member_id=None, member_epoch=0,
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    rebalance = request.rebalance_timeout
    owned = request.topic_partitions
    names = request.subscribed_topic_names
    req = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000) if rebalance is not None else -1,
        subscribed_topic_names=list(names) if names is not None else None,
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        topic_partitions=(
            [(tp.topic_id, [int(p) for p in tp.partitions]) for tp in owned if tp.topic_id is not None]
            if owned is not None
            else None
        ),
        may_describe=ctx.resource_filter(AclOperation.DESCRIBE, ResourceType.TOPIC),
    )
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        not_here = errors.GROUP_AUTHORIZATION_FAILED
    elif names and not all(ctx.permits(ResourceType.TOPIC, n) for n in set(names)):
        not_here = errors.TOPIC_AUTHORIZATION_FAILED
    else:
        not_here = services(ctx).groups.coordinator_error(request.group_id)
    share = services(ctx).share
    if not not_here and share is not None and request.group_id in share.groups.groups:
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=0, error_code=errors.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {request.group_id} is not a consumer group.",
                    member_id=request.member_id or None, member_epoch=int(request.member_epoch),
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    if not_here:
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=0, error_code=not_here, error_message=None,
                    member_id=request.member_id or None, member_epoch=int(request.member_epoch),
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    r = services(ctx).groups.consumer.heartbeat(req, ctx.api_version, ctx.client_id or "", "/" + ctx.client_host)
    assignment = None
    if r.assignment is not None:
        assignment = make(
            m.Assignment,
            topic_partitions=tuple(
                make(m.TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
                for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))
            ),
        )
    return make(
        m.ConsumerGroupHeartbeatResponse,
        throttle_time=0,
        error_code=r.error_code,
        error_message=r.error_message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=r.heartbeat_interval_ms),
        assignment=assignment,
    )
