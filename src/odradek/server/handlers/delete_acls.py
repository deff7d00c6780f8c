"""DeleteAcls (31): removes what each filter matches and lists it; needs ALTER on the cluster.
SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import InvalidAcl, ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._acl_common import NO_AUTHORIZER, binding_filter
from odradek.server.request_context import HasSecurity, RequestContext

API_KEY = ApiKey.DELETE_ACLS
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

    def failed(code: int, message: str | None = None) -> Any:
        return make(m.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=())

    if acls is None:
        results = [failed(errors.SECURITY_DISABLED, NO_AUTHORIZER) for _ in request.filters]
    elif not ctx.permits(ResourceType.CLUSTER):
        results = [failed(errors.CLUSTER_AUTHORIZATION_FAILED) for _ in request.filters]
    else:
        results = []
        for f in request.filters:
            try:
                flt = binding_filter(f)
            except InvalidAcl as e:
                results.append(failed(errors.INVALID_REQUEST, str(e)))
                continue
            matched = acls.authorizer.matching(flt)
            try:
                for pattern in {b.pattern for b in matched}:
                    gone = {b.entry for b in matched if b.pattern == pattern}
                    acls.write(pattern, acls.authorizer.entries(pattern) - gone)
            except Exception as e:  # the metadata store could not be written
                results.append(failed(errors.UNKNOWN_SERVER_ERROR, f"Failed to delete ACLs: {e}"))
                continue
            results.append(make(
                m.DeleteAclsFilterResult, error_code=errors.NONE, error_message=None,
                matching_acls=tuple(
                    make(m.DeleteAclsMatchingAcl, error_code=errors.NONE, error_message=None,
                         resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                         pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
                         operation=int(b.entry.operation), permission_type=int(b.entry.permission))
                    for b in matched),
            ))
    return make(m.DeleteAclsResponse, throttle_time=0, filter_results=tuple(results))
