"""OffsetDelete (47): not for topics an active group subscribes to. Needs DELETE on the group and READ on
each topic: a partition of a topic the principal may not read is answered TOPIC_AUTHORIZATION_FAILED and
kept (KafkaApis.handleOffsetDeleteRequest)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0


class Needs(HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    code = not_here = services(ctx).groups.coordinator_error(request.group_id)
    if not ctx.permits(ResourceType.GROUP, request.group_id):
        code = not_here = errors.GROUP_AUTHORIZATION_FAILED
    results: dict[tuple[str, int], int] = {}
    denied: dict[tuple[str, int], int] = {}
    if not code:  # partitions of topics the principal may not READ are neither deleted nor told about
        unreadable = {t for t, _ in wanted if not ctx.permits(ResourceType.TOPIC, t)}
        denied = {tp: errors.TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp[0] in unreadable}
        code, results = services(ctx).groups.coordinator.delete_offsets(
            request.group_id, [tp for tp in wanted if tp not in denied])
        results = {**results, **denied}

    def build(failed: int) -> Any:
        top = code or failed
        topics = tuple(
            make(
                m.OffsetDeleteResponseTopic,
                name=t.name,
                partitions=tuple(
                    make(m.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                         error_code=results.get((t.name, p.partition_index), 0))
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
        return make(m.OffsetDeleteResponse, error_code=top, throttle_time=0, topics=topics if not top else ())

    if not_here:
        return build(errors.NONE)
    # answered once the tombstones are replicated (coordinator.runtime)
    groups = services(ctx).groups
    return groups.answer_after_write(ctx, [groups.coordinator.partition_for(request.group_id)], build)
