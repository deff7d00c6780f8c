"""ShareFetch (78, KIP-932): acknowledgements piggy-backed, then records acquired for the member from the share
session's partitions (server.share_manager.SharePartitionManager.fetch); v1 as librdkafka's share consumer sends
it. v2 (Kafka 4.4's KafkaShareConsumer): ShareAcquireMode
1 (KIP-1206's record-limit mode) makes ``max_records`` a hard limit; IsRenewAck (KIP-1222) applies the
acknowledgements, renewals among them, and fetches nothing.

The response is encoded by hand (protocol.share_fetch_response) with the records as file regions of the log, sent
with sendfile as a Fetch response's are.

Authorization (KafkaApis.handleShareFetchRequest): READ on the group, else GROUP_AUTHORIZATION_FAILED for the whole
request; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions. Gated by ``share.version``."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.protocol.share_fetch_response import (
    SharePartitionData,
    ShareTopicData,
    encode_share_fetch_response,
)
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult, RawResponse
from odradek.server.handlers.share_group_heartbeat import UNSUPPORTED_MESSAGE, share_groups_enabled
from odradek.server.request_context import HasNodeId, HasShare, HasTopics, RequestContext
from odradek.server.share_manager import FetchAnswer, PartitionAnswer, TopicIdPartition, ack_batches

API_KEY = ApiKey.SHARE_FETCH
MIN_VERSION = 1
MAX_VERSION = 2
RECORD_LIMIT_MODE = 1  # ShareAcquireMode 1:record-limit (KIP-1206)


class Needs(HasNodeId, HasTopics, HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def topic_allowed(ctx: RequestContext, topic_id: uuid.UUID | None) -> bool:
    meta = services(ctx).topics.by_id.get(topic_id) if topic_id is not None else None
    return meta is None or ctx.permits(ResourceType.TOPIC, meta.name)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module

    def error(code: int, message: str | None = None) -> Any:
        return make(m.ShareFetchResponse, throttle_time=0, error_code=code, error_message=message,
                    acquisition_lock_timeout=datetime.timedelta(0), responses=(), node_endpoints=())

    if not share_groups_enabled(ctx):
        return error(errors.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE)
    share = services(ctx).share
    assert share is not None
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    if not ctx.permits(ResourceType.GROUP, group_id):
        return error(errors.GROUP_AUTHORIZATION_FAILED)
    if not member_id:
        return error(errors.INVALID_REQUEST, "Member id must not be empty.")
    denied: dict[TopicIdPartition, int] = {}
    add: list[TopicIdPartition] = []
    acks: dict[TopicIdPartition, list[Any]] = {}
    for t in request.topics:
        ok = topic_allowed(ctx, t.topic_id)
        for p in t.partitions:
            tp = (t.topic_id, int(p.partition_index))
            if t.topic_id is None or not ok:
                denied[tp] = errors.UNKNOWN_TOPIC_ID if t.topic_id is None else errors.TOPIC_AUTHORIZATION_FAILED
                continue
            add.append(tp)
            if p.acknowledgement_batches:
                acks[tp] = ack_batches(p.acknowledgement_batches)
    forget = [(t.topic_id, int(p)) for t in request.forgotten_topics_data if t.topic_id is not None
              for p in t.partitions]
    max_wait = int(request.max_wait.total_seconds() * 1000)

    async def run() -> Any:
        answer = await share.manager.fetch(
            group_id, member_id, int(request.share_session_epoch), add, forget, acks, max_wait,
            int(request.max_bytes), max(1, int(request.max_records)), int(request.batch_size),
            strict=int(getattr(request, "share_acquire_mode", 0)) == RECORD_LIMIT_MODE,
            renew_only=bool(getattr(request, "is_renew_ack", False)),
        )
        if int(request.share_session_epoch) == 0 and not answer.error_code:
            watch = share.manager.watch_session(group_id, member_id)
            if watch is not None:  # the session ends with its connection
                ctx.connection.park(*watch)
        return build(ctx, m, answer, denied)

    return asyncio.get_running_loop().create_task(run())


def build(ctx: RequestContext, m: Any, answer: FetchAnswer, denied: dict[TopicIdPartition, int]) -> RawResponse:
    """The response, hand-encoded (protocol.share_fetch_response) so that the records go out with sendfile."""
    node = services(ctx).node_id
    parts: dict[TopicIdPartition, PartitionAnswer] = dict(answer.partitions)
    for tp, code in denied.items():
        parts[tp] = PartitionAnswer(error_code=code)
    topics: dict[uuid.UUID | None, ShareTopicData] = {}
    counts: dict[int, int] = {}
    for (t, p), pa in sorted(parts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        topics.setdefault(t, ShareTopicData(t)).partitions.append(SharePartitionData(
            p, pa.error_code, pa.error_message, pa.acknowledge_error_code, pa.acknowledge_error_message,
            node if pa.error_code == errors.NONE else -1, pa.leader_epoch, pa.records, pa.records_size,
            [(a.first_offset, a.last_offset, a.delivery_count) for a in pa.acquired],
        ))
        for code in (pa.error_code, pa.acknowledge_error_code):
            if code:
                counts[code] = counts.get(code, 0) + 1
    if answer.error_code:
        counts[answer.error_code] = counts.get(answer.error_code, 0) + 1
    body, size = encode_share_fetch_response(
        list(topics.values()), error_code=answer.error_code, error_message=answer.error_message,
        acquisition_lock_timeout_ms=answer.lock_timeout_ms,
    )
    return RawResponse(body, size, counts or None)
