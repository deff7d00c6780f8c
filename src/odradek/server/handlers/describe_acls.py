"""DescribeAcls (29): the bindings a filter matches, grouped by resource pattern; needs DESCRIBE on
the cluster. SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import AclBinding, InvalidAcl, ResourcePattern, ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._acl_common import NO_AUTHORIZER, binding_filter
from odradek.server.request_context import HasSecurity, RequestContext

API_KEY = ApiKey.DESCRIBE_ACLS
MIN_VERSION = 1
MAX_VERSION = 3


class Needs(HasSecurity, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    acls = services(ctx).security.acls

    def failed(code: int, message: str | None) -> Any:
        return make(m.DescribeAclsResponse, throttle_time=0, error_code=code, error_message=message, resources=())

    if acls is None:
        return failed(errors.SECURITY_DISABLED, NO_AUTHORIZER)
    if not ctx.permits(ResourceType.CLUSTER):
        return failed(errors.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        flt = binding_filter(request)
    except InvalidAcl as e:
        return failed(errors.INVALID_REQUEST, str(e))
    grouped: dict[ResourcePattern, list[AclBinding]] = {}
    for b in acls.authorizer.matching(flt):
        grouped.setdefault(b.pattern, []).append(b)
    resources = tuple(
        make(m.DescribeAclsResource, resource_type=int(p.resource_type), resource_name=p.name,
             pattern_type=int(p.pattern_type),
             acls=tuple(make(m.AclDescription, principal=b.entry.principal, host=b.entry.host,
                             operation=int(b.entry.operation), permission_type=int(b.entry.permission))
                        for b in sorted(bs, key=lambda b: (b.entry.principal, b.entry.host, b.entry.operation))))
        for p, bs in sorted(grouped.items(), key=lambda kv: (kv[0].resource_type, kv[0].name, kv[0].pattern_type))
    )
    return make(m.DescribeAclsResponse, throttle_time=0, error_code=errors.NONE, error_message=None,
                resources=resources)
