"""DescribeClientQuotas (48, KIP-546): the quota configs of the entities matching a filter
(components: EXACT name, DEFAULT entity or any SPECIFIED name per entity type; ``strict``: only
entities with exactly those types)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.quota.client_quotas import Component, QuotaRequestError, entity_parts
from odradek.server.request_context import HasQuotas, RequestContext

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1


class Needs(HasQuotas, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    if not ctx.permits(ResourceType.CLUSTER):  # Kafka: DESCRIBE_CONFIGS on the cluster
        return make(m.DescribeClientQuotasResponse, throttle_time=0, error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None, entries=None)
    components = [Component(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = services(ctx).quotas.describe(components, bool(request.strict))
    except QuotaRequestError as e:
        return make(m.DescribeClientQuotasResponse, throttle_time=0, error_code=e.code, error_message=e.message,
                    entries=None)
    entries = tuple(
        make(
            m.EntryData,
            entity=tuple(make(m.EntityData, entity_type=t, entity_name=n) for t, n in entity_parts(e)),
            values=tuple(make(m.ValueData, key=k, value=v) for k, v in values.items()),
        )
        for e, values in found
    )
    return make(m.DescribeClientQuotasResponse, throttle_time=0, error_code=errors.NONE, error_message=None,
                entries=entries)
