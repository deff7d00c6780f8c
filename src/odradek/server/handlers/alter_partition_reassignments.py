"""AlterPartitionReassignments (45, KIP-455): start or cancel (replicas = null) partition
reassignments. Answered by the controller (NOT_CONTROLLER elsewhere), which runs them on
its event queue (controller.reassignment). v1 (KIP-860) may forbid a change of replication
factor (allow_replication_factor_change false): such a partition is answered INVALID_REPLICATION_FACTOR,
and the response repeats the flag."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, RequestContext

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 1

TP = tuple[str, int]


class Needs(HasCluster, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _response(m: Any, request: Any, results: dict[TP, tuple[int, str | None]], top: int = errors.NONE,
              top_msg: str | None = None) -> Any:
    topics = tuple(
        make(m.ReassignableTopicResponse, name=t.name, partitions=tuple(
            make(m.ReassignablePartitionResponse, partition_index=p.partition_index,
                 error_code=results.get((t.name, p.partition_index), (top, top_msg))[0],
                 error_message=results.get((t.name, p.partition_index), (top, top_msg))[1])
            for p in t.partitions
        ))
        for t in request.topics
    )
    return make(m.AlterPartitionReassignmentsResponse, throttle_time=0, error_code=top, error_message=top_msg,
                allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
                responses=topics)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    wanted: dict[TP, list[int] | None] = {
        (t.name, int(p.partition_index)): (list(p.replicas) if p.replicas is not None else None)
        for t in request.topics for p in t.partitions
    }
    cluster = svc.cluster
    if not ctx.permits(ResourceType.CLUSTER):
        return _response(m, request, {}, errors.CLUSTER_AUTHORIZATION_FAILED, None)
    if not cluster.controller.active:
        return _response(m, request, {}, errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    def respond(results: dict[TP, tuple[int, str | None]] | None) -> Any:
        if results is None:  # resigned meanwhile
            return _response(m, request, {}, errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        return _response(m, request, results)

    return cluster.call_controller("AlterReassignments", respond, requests=wanted,
                                   allow_replication_factor_change=getattr(request, "allow_replication_factor_change",
                                                                           True))
