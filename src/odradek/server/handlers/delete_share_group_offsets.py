"""DeleteShareGroupOffsets (92, KIP-932): forget a share group's state for whole topics
(``kafka-share-groups --delete-offsets``): DeleteShareGroupState for each of their partitions, the
share-partitions here dropped and the topics no longer the group's. Only for a group with no members
(NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND for an unknown one). Authorization: DELETE on the group, else
GROUP_AUTHORIZATION_FAILED; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it. Gated by
``share.version``."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol

from odradek.coordinator.share.share_state import PartitionResult
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_group_admin import empty_share_group, persister_call
from odradek.server.request_context import HasTopics, RequestContext

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
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
    gid = request.group_id

    def failed(code: int, message: str | None = None) -> Any:
        return make(m.DeleteShareGroupOffsetsResponse, throttle_time=0, error_code=code, error_message=message,
                    responses=())

    checked = empty_share_group(ctx, gid, failed, create_missing=False)
    if not isinstance(checked, tuple):
        return checked
    share, group = checked

    async def topic(topic_id: Any, count: int) -> tuple[int, str | None]:
        results: list[PartitionResult] = []
        for p in range(count):
            share.manager.partitions.pop((gid, topic_id, p), None)
            results.append(await persister_call(functools.partial(share.persister.delete_state, gid, topic_id, p)))
        bad = next((r for r in results if r.error_code), None)
        return (bad.error_code, bad.error_message) if bad is not None else (errors.NONE, None)

    before = share.groups.image(gid)
    plan: list[tuple[str, Any, Any]] = []
    for t in request.topics:
        meta = svc.topics.get(t.topic_name)
        if not ctx.permits(ResourceType.TOPIC, t.topic_name):
            plan.append((t.topic_name, None, errors.TOPIC_AUTHORIZATION_FAILED))
        elif meta is None:
            plan.append((t.topic_name, None, errors.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            group.topics.pop(meta.name, None)
            plan.append((t.topic_name, meta.topic_id,
                         asyncio.ensure_future(topic(meta.topic_id, len(meta.partitions)))))
    share.groups.record_change(gid, before)  # the share-state topics (ShareGroupStatePartitionMetadata)
    share.flush()

    async def run() -> Any:
        out = []
        for name, tid, what in plan:
            code, msg = (what, None) if isinstance(what, int) else await what
            out.append(make(m.DeleteShareGroupOffsetsResponseTopic, topic_name=name, topic_id=tid, error_code=code,
                            error_message=msg))
        return make(m.DeleteShareGroupOffsetsResponse, throttle_time=0, error_code=errors.NONE, error_message=None,
                    responses=tuple(out))

    return asyncio.get_running_loop().create_task(run())
