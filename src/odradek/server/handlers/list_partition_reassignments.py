"""ListPartitionReassignments (46, KIP-455): the reassignments in progress (all, or the
partitions asked for), with their replicas, adding and removing replicas. The controller
answers (NOT_CONTROLLER elsewhere)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, RequestContext

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 0

TP = tuple[str, int]


class Needs(HasCluster, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _response(m: Any, ongoing: dict[TP, tuple[list[int], list[int], list[int]]], top: int = errors.NONE,
              top_msg: str | None = None) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(t, []).append(make(
            m.OngoingPartitionReassignment, partition_index=p, replicas=tuple(replicas),
            adding_replicas=tuple(adding), removing_replicas=tuple(removing),
        ))
    topics = tuple(make(m.OngoingTopicReassignment, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return make(m.ListPartitionReassignmentsResponse, throttle_time=0, error_code=top, error_message=top_msg,
                topics=topics)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    wanted: list[TP] | None = None
    if request.topics is not None:
        wanted = [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    cluster = svc.cluster
    if not ctx.permits(ResourceType.CLUSTER):
        return _response(m, {}, errors.CLUSTER_AUTHORIZATION_FAILED, None)
    if not cluster.controller.active:
        return _response(m, {}, errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    def respond(ongoing: dict[TP, tuple[list[int], list[int], list[int]]] | None) -> Any:
        if ongoing is None:  # resigned meanwhile
            return _response(m, {}, errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        return _response(m, ongoing)

    return cluster.call_controller("ListReassignments", respond, partitions=wanted)
