"""DescribeCluster (60): the cluster's live brokers on the listener the client came in through, and its
controller, from the same metadata cache as Metadata (Kafka's MetadataCache). v2 (KIP-1073) lists fenced
brokers too when asked (include_fenced_brokers), each with is_fenced. Fencing is a KRaft notion: a
ZooKeeper-mode broker that is registered is live (is_fenced false), and one that is not is absent, so the
answer is the same with or without the flag."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller.zk_data import live_broker_endpoints
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import (
    HasAdvertisedEndpoint,
    HasCluster,
    HasClusterId,
    HasNodeId,
    HasRack,
    RequestContext,
)

API_KEY = ApiKey.DESCRIBE_CLUSTER
MIN_VERSION = 0
MAX_VERSION = 2  # v2: include_fenced_brokers and is_fenced (KIP-1073)


class Needs(HasNodeId, HasClusterId, HasRack, HasCluster, HasAdvertisedEndpoint, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    endpoint_type = getattr(request, "endpoint_type", 1)
    if endpoint_type not in (1,):
        return make(
            m.DescribeClusterResponse, throttle_time=0, error_code=errors.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="Only brokers can be described", endpoint_type=endpoint_type, cluster_id=svc.cluster_id,
            controller_id=-1, brokers=(), cluster_authorized_operations=-(2**31),
        )
    cluster = svc.cluster
    if cluster.embedded:
        host, port = svc.advertised_endpoint(ctx.listener)
        brokers = (make(m.DescribeClusterBroker, broker_id=svc.node_id, host=host, port=port, rack=svc.rack,
                        is_fenced=False),)
        controller_id = svc.node_id
    else:
        brokers = tuple(make(m.DescribeClusterBroker, broker_id=b, host=h, port=p, rack=r, is_fenced=False)
                        for b, h, p, r in live_broker_endpoints(cluster.live_brokers, ctx.listener))
        controller_id = cluster.controller_id
    return make(
        m.DescribeClusterResponse,
        throttle_time=0,
        error_code=errors.NONE,
        error_message=None,
        endpoint_type=1,
        cluster_id=svc.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
        cluster_authorized_operations=(ctx.cluster_authorized_operations()
                                       if getattr(request, "include_cluster_authorized_operations", False)
                                       else -(2**31)),
    )
