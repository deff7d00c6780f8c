"""AlterShareGroupOffsets (91, KIP-932): set the start offset of a share group's share-partitions
(``kafka-share-groups --reset-offsets``). Only for a group with no members (NON_EMPTY_GROUP otherwise); a group
not known yet is created empty. Each partition's state starts again at the given offset under the next state
epoch (InitializeShareGroupState: a new snapshot without batches, as Kafka's group coordinator does), and the
share-partitions here are dropped so that the next fetch reads it. Authorization: READ on the group, else
GROUP_AUTHORIZATION_FAILED; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it. Gated by
``share.version``."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.coordinator.share.share_state import PartitionResult
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_group_admin import empty_share_group, persister_call
from odradek.server.request_context import HasTopics, RequestContext

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 0


class Needs(HasTopics, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    svc = services(ctx)

    def failed(code: int, message: str | None = None) -> Any:
        return make(m.AlterShareGroupOffsetsResponse, throttle_time=0, error_code=code, error_message=message,
                    responses=())

    gid = request.group_id
    checked = empty_share_group(ctx, gid, failed, create_missing=True)
    if not isinstance(checked, tuple):
        return checked
    share, group = checked
    before = share.groups.image(gid)

    async def one(topic_id: Any, p: int, start: int) -> PartitionResult:
        summary = await persister_call(lambda done: share.persister.read_state_summary(gid, topic_id, p, done))
        if summary.error_code:
            return summary
        epoch = summary.state_epoch + 1 if summary.start_offset >= 0 else summary.state_epoch
        r = await persister_call(lambda done: share.persister.initialize_state(gid, topic_id, p, epoch, start, done))
        share.manager.partitions.pop((gid, topic_id, p), None)
        return r

    plan = []
    for t in request.topics:
        meta = svc.topics.get(t.topic_name)
        entries: list[tuple[int, Any]] = []
        for part in t.partitions:
            p = int(part.partition_index)
            if not ctx.permits(ResourceType.TOPIC, t.topic_name):
                entries.append((p, errors.TOPIC_AUTHORIZATION_FAILED))
            elif meta is None or not 0 <= p < len(meta.partitions):
                entries.append((p, errors.UNKNOWN_TOPIC_OR_PARTITION))
            elif int(part.start_offset) < 0:
                entries.append((p, errors.INVALID_REQUEST))
            else:
                entries.append((p, asyncio.ensure_future(one(meta.topic_id, p, int(part.start_offset)))))
        if meta is not None and ctx.permits(ResourceType.TOPIC, t.topic_name):
            group.topics.setdefault(meta.name, (meta.topic_id, len(meta.partitions)))
        plan.append((t.topic_name, meta.topic_id if meta else None, entries))
    share.groups.record_change(gid, before)  # the share-state topics (ShareGroupStatePartitionMetadata)
    share.flush()

    async def run() -> Any:
        out = []
        for name, tid, entries in plan:
            parts = []
            for p, what in entries:
                code, msg = (what, None) if isinstance(what, int) else ((r := await what).error_code, r.error_message)
                parts.append(make(m.AlterShareGroupOffsetsResponsePartition, partition_index=p, error_code=code,
                                  error_message=msg))
            out.append(make(m.AlterShareGroupOffsetsResponseTopic, topic_name=name, topic_id=tid,
                            partitions=tuple(parts)))
        return make(m.AlterShareGroupOffsetsResponse, throttle_time=0, error_code=errors.NONE, error_message=None,
                    responses=tuple(out))

    return asyncio.get_running_loop().create_task(run())

