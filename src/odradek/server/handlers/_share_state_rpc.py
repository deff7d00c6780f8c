"""What the five share-state RPCs (KIP-932: Initialize/Read/Write/Delete/ReadSummary ShareGroupState, 83-87) share:
each partition of the request goes to the share coordinator (coordinator.share_runtime) and the response is
answered once every partition's is (its records appended and replicated). These are the requests Kafka's
DefaultStatePersister sends a share coordinator; the broker's own share-partition manager calls the coordinator
directly. Authorization (KafkaApis): CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED in every
partition's result."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from odradek.coordinator.share.share_state import PartitionResult, SharePartitionKey
from odradek.protocol import errors
from odradek.security.acl import ResourceType
from odradek.server.request_context import HasShare, RequestContext

# (share coordinator runtime, key, kio partition data, done)
Call = Callable[[Any, SharePartitionKey, Any, Callable[[PartitionResult], None]], None]


class Needs(HasShare, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def serve(ctx: RequestContext, request: Any, call: Call,
          build: Callable[[list[tuple[uuid.UUID | None, list[tuple[Any, PartitionResult]]]]], Any]) -> Any:
    """Run ``call`` for every partition of ``request.topics`` and answer ``build`` of the results, in order."""
    share = services(ctx).share
    denied = not ctx.permits(ResourceType.CLUSTER)
    loop = asyncio.get_running_loop()
    topics: list[tuple[uuid.UUID | None, list[tuple[Any, asyncio.Future[PartitionResult]]]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            fut: asyncio.Future[PartitionResult] = loop.create_future()
            if denied or share is None:
                fut.set_result(PartitionResult(error_code=errors.CLUSTER_AUTHORIZATION_FAILED if denied
                                               else errors.UNSUPPORTED_VERSION))
            elif t.topic_id is None:
                fut.set_result(PartitionResult(error_code=errors.INVALID_REQUEST,
                                               error_message="The topic id cannot be null."))
            else:
                def done(r: PartitionResult, fut: asyncio.Future[PartitionResult] = fut) -> None:
                    if not fut.done():
                        fut.set_result(r)

                call(share.coordinator, SharePartitionKey(request.group_id, t.topic_id, int(p.partition)), p, done)
            parts.append((p, fut))
        topics.append((t.topic_id, parts))

    async def run() -> Any:
        out = []
        for tid, parts in topics:
            out.append((tid, [(p, await fut) for p, fut in parts]))
        return build(out)

    return loop.create_task(run())
