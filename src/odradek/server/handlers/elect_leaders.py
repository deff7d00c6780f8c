"""ElectLeaders (43): preferred (0) or unclean (1) leader election for the given partitions
(all, when null). Only the controller answers (NOT_CONTROLLER elsewhere); the election
runs on the controller's event queue."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, RequestContext

API_KEY = ApiKey.ELECT_LEADERS
MIN_VERSION = 0
MAX_VERSION = 2

TP = tuple[str, int]
_MESSAGES = {
    errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
}


class Needs(HasCluster, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _response(m: Any, version: int, results: dict[TP, int], top_error: int = errors.NONE) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in sorted(results.items()):
        msg = _MESSAGES.get(code)
        by_topic.setdefault(t, []).append(make(m.PartitionResult, partition_id=p, error_code=code, error_message=msg))
    out = tuple(make(m.ReplicaElectionResult, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items())
    return make(m.ElectLeadersResponse, throttle_time=0, error_code=top_error, replica_election_results=out)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    version = ctx.api_version
    election_type = int(getattr(request, "election_type", 0))
    wanted: list[TP] | None = None
    if request.topic_partitions is not None:
        wanted = [(tp.topic, int(p)) for tp in request.topic_partitions for p in tp.partitions]
    cluster = svc.cluster
    if election_type not in (0, 1):
        return _response(m, version, {}, errors.INVALID_REQUEST)
    if not ctx.permits(ResourceType.CLUSTER):
        failed = errors.CLUSTER_AUTHORIZATION_FAILED
        return _response(m, version, dict.fromkeys(wanted or [], failed), failed)
    if not cluster.controller.active:
        return _response(m, version, dict.fromkeys(wanted or [], errors.NOT_CONTROLLER), errors.NOT_CONTROLLER)
    def respond(results: dict[TP, int] | None) -> Any:
        if results is None:  # resigned meanwhile
            return _response(m, version, dict.fromkeys(wanted or [], errors.NOT_CONTROLLER), errors.NOT_CONTROLLER)
        return _response(m, version, results)

    return cluster.call_controller("ElectLeaders", respond, election_type=election_type, partitions=wanted)
