"""ShareAcknowledge (79, KIP-932): acknowledgements of a share session's records without a fetch (epoch -1 closes
the session and releases what the member still holds); v2 (KIP-1222) answers the acquisition lock timeout too.
Authorization as ShareFetch; gated by ``share.version``."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers.share_fetch import topic_allowed
from odradek.server.handlers.share_group_heartbeat import UNSUPPORTED_MESSAGE, share_groups_enabled
from odradek.server.request_context import HasNodeId, HasShare, RequestContext
from odradek.server.share_manager import TopicIdPartition, ack_batches

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
MIN_VERSION = 1
MAX_VERSION = 2


class Needs(HasNodeId, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module

    def lock_timeout(ms: int) -> dict[str, Any]:
        """v2's AcquisitionLockTimeoutMs (KIP-1222)."""
        return {"acquisition_lock_timeout": datetime.timedelta(milliseconds=ms)} if ctx.api_version >= 2 else {}

    def error(code: int, message: str | None = None) -> Any:
        return make(m.ShareAcknowledgeResponse, throttle_time=0, error_code=code, error_message=message,
                    responses=(), node_endpoints=(), **lock_timeout(0))

    if not share_groups_enabled(ctx):
        return error(errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE)
    share = services(ctx).share
    assert share is not None
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not ctx.permits(ResourceType.GROUP, group_id):
        return error(errors.GROUP_AUTHORIZATION_FAILED)
    denied: dict[TopicIdPartition, int] = {}
    acks: dict[TopicIdPartition, list[Any]] = {}
    for t in request.topics:
        ok = t.topic_id is not None and topic_allowed(ctx, t.topic_id)
        for p in t.partitions:
            tp = (t.topic_id, int(p.partition_index))
            if not ok:
                denied[tp] = errors.UNKNOWN_TOPIC_ID if t.topic_id is None else errors.TOPIC_AUTHORIZATION_FAILED
            else:
                acks[tp] = ack_batches(p.acknowledgement_batches)
    node = services(ctx).node_id

    async def run() -> Any:
        answer = await share.manager.acknowledge(group_id, member_id, int(request.share_session_epoch), acks)
        codes = {tp: (pa.acknowledge_error_code, pa.acknowledge_error_message) for tp, pa in answer.partitions.items()}
        codes.update({tp: (c, None) for tp, c in denied.items()})
        by_topic: dict[Any, list[Any]] = {}
        for (t, p), (code, msg) in sorted(codes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            by_topic.setdefault(t, []).append(make(
                m.PartitionData, partition_index=p, error_code=code, error_message=msg,
                current_leader=make(m.LeaderIdAndEpoch, leader_id=node, leader_epoch=-1)))
        return make(m.ShareAcknowledgeResponse, throttle_time=0, error_code=answer.error_code,
                    error_message=answer.error_message,
                    responses=tuple(make(m.ShareAcknowledgeTopicResponse, topic_id=t, partitions=tuple(ps))
                                    for t, ps in by_topic.items()),
                    node_endpoints=(), **lock_timeout(answer.lock_timeout_ms))

    return asyncio.get_running_loop().create_task(run())
