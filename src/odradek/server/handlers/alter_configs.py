"""AlterConfigs (33): replaces a resource's whole set of dynamic configs (legacy API)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.config import ConfigError
from odradek.controller.topics import TopicError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.client_metrics import RESOURCE_CLIENT_METRICS
from odradek.server.config_view import RESOURCE_BROKER, RESOURCE_TOPIC
from odradek.server.group_configs import RESOURCE_GROUP
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasAdmin, HasNodeId, RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2


class Needs(HasNodeId, HasAdmin, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def alter_configs_denied(ctx: RequestContext, resource_type: int, name: str) -> tuple[int, str | None]:
    """ALTER_CONFIGS on the topic, on the group for group configs, or on the cluster for broker and client
    metrics configs (Kafka's ConfigAdminManager / AuthHelper)."""
    if resource_type == RESOURCE_TOPIC:
        if not ctx.permits(ResourceType.TOPIC, name):
            return errors.TOPIC_AUTHORIZATION_FAILED, None
    elif resource_type == RESOURCE_GROUP:
        if not ctx.permits(ResourceType.GROUP, name):
            return errors.GROUP_AUTHORIZATION_FAILED, None
    elif not ctx.permits(ResourceType.CLUSTER):
        return errors.CLUSTER_AUTHORIZATION_FAILED, None
    return errors.NONE, None


def apply(svc: Needs, resource_type: int, name: str, new: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    """Install ``new`` as the resource's dynamic configs; (error code, message)."""
    try:
        if resource_type == RESOURCE_TOPIC:
            svc.admin.set_topic_configs(name, new, validate_only=validate_only)
        elif resource_type == RESOURCE_BROKER:
            if name not in ("", str(svc.node_id)):
                return errors.INVALID_REQUEST, f"Unexpected broker id, expected {svc.node_id}"
            svc.admin.set_broker_configs(name, new, validate_only=validate_only)
        elif resource_type == RESOURCE_CLIENT_METRICS:
            svc.admin.set_client_metrics_configs(name, new, validate_only=validate_only)
        elif resource_type == RESOURCE_GROUP:
            svc.admin.set_group_configs(name, new, validate_only=validate_only)
        else:
            return errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
    except TopicError as e:
        return e.error_code, e.message
    except ConfigError as e:
        # Kafka answers an invalid broker config change INVALID_REQUEST (ConfigAdminManager wraps
        # DynamicBrokerConfig's ConfigException), an invalid topic or client metrics config INVALID_CONFIG
        return (errors.INVALID_REQUEST if resource_type == RESOURCE_BROKER else errors.INVALID_CONFIG), str(e)
    return errors.NONE, None


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    out = []
    for res in request.resources:
        new = {c.name: c.value for c in res.configs if c.value is not None}
        code, msg = alter_configs_denied(ctx, res.resource_type, res.resource_name)
        if not code:
            code, msg = apply(services(ctx), res.resource_type, res.resource_name, new, request.validate_only)
        out.append(
            make(
                m.AlterConfigsResourceResponse,
                error_code=code,
                error_message=msg,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return make(m.AlterConfigsResponse, throttle_time=0, responses=tuple(out))
