"""ListConfigResources (74): v0 is KIP-714's ListClientMetricsResources (the client metrics subscriptions'
names, what ``kafka-client-metrics --list`` shows); v1 (KIP-1142) lists the resources of the asked types that
have configs: topics, brokers, broker loggers and client metrics subscriptions (every one of them when none is
asked). Needs DESCRIBE_CONFIGS on the cluster, as Kafka's KafkaApis.handleListConfigResources; a type this
broker has no configs for (GROUP: KIP-848's group configs) is refused with INVALID_REQUEST."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.client_metrics import RESOURCE_CLIENT_METRICS
from odradek.server.config_view import RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, HasNodeId, HasTopics, RequestContext

API_KEY = ApiKey.LIST_CONFIG_RESOURCES
MIN_VERSION = 0
MAX_VERSION = 1

SUPPORTED = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS)


class Needs(HasNodeId, HasTopics, HasCluster, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    svc = services(ctx)

    def respond(code: int, resources: tuple[Any, ...] = ()) -> Any:
        return make(m.ListConfigResourcesResponse, throttle_time=0, error_code=code, config_resources=resources)

    if not ctx.permits(ResourceType.CLUSTER):
        return respond(errors.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.api_version == 0:
        return respond(errors.NONE, tuple(make(m.ConfigResource, resource_name=n)
                                          for n in svc.topics.client_metrics_names()))
    asked = [int(t) for t in request.resource_types] or list(SUPPORTED)
    if any(t not in SUPPORTED for t in asked):
        return respond(errors.INVALID_REQUEST)
    brokers = sorted(svc.cluster.live_brokers) if not svc.cluster.embedded else [svc.node_id]
    out: list[Any] = []
    for t in dict.fromkeys(asked):
        if t == RESOURCE_TOPIC:
            names = sorted(svc.topics.topics)
        elif t in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
            names = [str(b) for b in brokers]
        else:
            names = svc.topics.client_metrics_names()
        out += [make(m.ConfigResource, resource_name=n, resource_type=t) for n in names]
    return respond(errors.NONE, tuple(out))
