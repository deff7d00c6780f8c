"""DescribeConfigs (32): topic, broker and client metrics (KIP-714) resources, with synonyms and documentation."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.config import ConfigError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.client_metrics import (
    CLIENT_METRICS_CONFIGS,
    RESOURCE_CLIENT_METRICS,
    SRC_CLIENT_METRICS_CONFIG,
)
from odradek.server.client_metrics import name_error as client_metrics_name_error
from odradek.server.config_view import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    Entry,
    broker_default_entries,
    broker_entries,
    topic_entries,
)
from odradek.server.group_configs import RESOURCE_GROUP, SRC_GROUP_CONFIG
from odradek.server.group_configs import defs as group_config_defs
from odradek.server.group_configs import store_name as group_store_name
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasConfig, HasNodeId, HasTopics, RequestContext

API_KEY = ApiKey.DESCRIBE_CONFIGS
MIN_VERSION = 1
MAX_VERSION = 4


class Needs(HasNodeId, HasConfig, HasTopics, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    include_synonyms = getattr(request, "include_synonyms", False)
    include_docs = getattr(request, "include_documentation", False)
    results = []
    for res in request.resources:
        code = errors.NONE
        msg = None
        entries = []
        if res.resource_type == RESOURCE_TOPIC:
            meta = svc.topics.get(res.resource_name)
            if not ctx.permits(ResourceType.TOPIC, res.resource_name):
                code, msg = errors.TOPIC_AUTHORIZATION_FAILED, None
            elif meta is None:
                code, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                entries = topic_entries(svc.config, meta.configs)
        elif res.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER) and not ctx.permits(ResourceType.CLUSTER):
            code, msg = errors.CLUSTER_AUTHORIZATION_FAILED, None
        elif res.resource_type == RESOURCE_BROKER:
            if res.resource_name not in ("", str(svc.node_id)):
                code, msg = errors.INVALID_REQUEST, f"Unexpected broker id, expected {svc.node_id}"
            elif res.resource_name == "":
                entries = broker_default_entries(svc.config)
            else:
                entries = broker_entries(svc.config)
        elif res.resource_type == RESOURCE_BROKER_LOGGER:
            entries = []
        elif res.resource_type == RESOURCE_CLIENT_METRICS:
            # Kafka's ConfigHelper: DESCRIBE_CONFIGS on the cluster; only the subscription's own configs
            if not ctx.permits(ResourceType.CLUSTER):
                code, msg = errors.CLUSTER_AUTHORIZATION_FAILED, None
            elif (why := client_metrics_name_error(res.resource_name)) is not None:
                code, msg = errors.INVALID_REQUEST, why
            else:
                entries = [
                    Entry(k, v, SRC_CLIENT_METRICS_CONFIG, False, False, CLIENT_METRICS_CONFIGS[k].type,
                          CLIENT_METRICS_CONFIGS[k].doc, [(k, v, SRC_CLIENT_METRICS_CONFIG)])
                    for k, v in sorted(svc.topics.client_metrics_configs(res.resource_name).items())
                    if k in CLIENT_METRICS_CONFIGS
                ]
        elif res.resource_type == RESOURCE_GROUP:
            # Kafka's ConfigHelper: DESCRIBE_CONFIGS on the group; every group config, the group's own
            # value (GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG)
            if not ctx.permits(ResourceType.GROUP, res.resource_name):
                code, msg = errors.GROUP_AUTHORIZATION_FAILED, None
            else:
                try:
                    own = svc.topics.group_configs(group_store_name(res.resource_name))
                except ConfigError as e:
                    code, msg = errors.INVALID_REQUEST, str(e)
                else:
                    entries = []
                    for k, d in group_config_defs(svc.config).items():
                        value, src = (own[k], SRC_GROUP_CONFIG) if k in own else (d.default, 5)
                        entries.append(Entry(k, value, src, False, False, d.type, d.doc, [(k, value, src)]))
        else:
            code, msg = errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        keys = set(res.configuration_keys) if res.configuration_keys else None
        configs = tuple(
            make(
                m.DescribeConfigsResourceResult,
                name=e.name,
                value=None if e.sensitive else e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_sensitive=e.sensitive,
                synonyms=tuple(
                    make(m.DescribeConfigsSynonym, name=n, value=v, source=s) for n, v, s in e.synonyms
                )
                if include_synonyms
                else (),
                config_type=e.type,
                documentation=e.doc if include_docs else None,
                is_default=e.source == 5,
            )
            for e in entries
            if keys is None or e.name in keys
        )
        results.append(
            make(
                m.DescribeConfigsResult,
                error_code=code,
                error_message=msg,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return make(m.DescribeConfigsResponse, throttle_time=0, results=tuple(results))
