"""CreateAcls (30): needs ALTER on the cluster; each creation answered on its own (Kafka's
AclApis.handleCreateAcls). SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._acl_common import NO_AUTHORIZER, enum_value
from odradek.server.request_context import HasSecurity, RequestContext

API_KEY = ApiKey.CREATE_ACLS
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

    def result(code: int, message: str | None = None) -> Any:
        return make(m.AclCreationResult, error_code=code, error_message=message)

    if acls is None:
        results = [result(errors.SECURITY_DISABLED, NO_AUTHORIZER) for _ in request.creations]
    elif not ctx.permits(ResourceType.CLUSTER):
        results = [result(errors.CLUSTER_AUTHORIZATION_FAILED) for _ in request.creations]
    else:
        results = []
        for c in request.creations:
            binding = AclBinding(
                ResourcePattern(enum_value(ResourceType, c.resource_type), str(c.resource_name),
                                enum_value(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL))),
                AccessControlEntry(str(c.principal), str(c.host), enum_value(AclOperation, c.operation),
                                   enum_value(AclPermissionType, c.permission_type)),
            )
            try:
                validate_binding(binding)
            except InvalidAcl as e:
                results.append(result(errors.INVALID_REQUEST, str(e)))
                continue
            entries = acls.authorizer.entries(binding.pattern)
            if binding.entry not in entries:
                try:
                    acls.write(binding.pattern, entries | {binding.entry})
                except Exception as e:  # the metadata store could not be written
                    results.append(result(errors.UNKNOWN_SERVER_ERROR, f"Failed to create ACL: {e}"))
                    continue
            results.append(result(errors.NONE))
    return make(m.CreateAclsResponse, throttle_time=0, results=tuple(results))
