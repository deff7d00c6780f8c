"""DescribeCluster (60)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1  # v2 lists fenced brokers (KRaft)


def handle(ctx: Any, request: Any) -> Any:
    broker = ctx.broker
    m = ctx.response_module
    endpoint_type = getattr(request, "endpoint_type", 1)
    if endpoint_type not in (1,):
        return make(
            m.DescribeClusterResponse, throttle_time=0, error_code=errors.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="Only brokers can be described", endpoint_type=endpoint_type, cluster_id=broker.cluster_id,
            controller_id=-1, brokers=(), cluster_authorized_operations=-(2**31),
        )
    host, port = broker.advertised_endpoint(ctx.connection.listener)
    brokers = (make(m.DescribeClusterBroker, broker_id=broker.node_id, host=host, port=port, rack=broker.rack, is_fenced=False),)
    return make(
        m.DescribeClusterResponse,
        throttle_time=0,
        error_code=errors.NONE,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=brokers,
        cluster_authorized_operations=-(2**31),
    )
