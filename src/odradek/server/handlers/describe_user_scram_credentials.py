"""DescribeUserScramCredentials (50, KIP-554): each user's mechanisms and iterations, never the
credentials; needs DESCRIBE on the cluster."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.security.scram import MECHANISM_NUMBERS
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasSecurity, RequestContext

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


class Needs(HasSecurity, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    store = services(ctx).security.credentials
    if not ctx.permits(ResourceType.CLUSTER):
        return make(m.DescribeUserScramCredentialsResponse, throttle_time=0,
                    error_code=errors.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=())
    assert store is not None
    asked = [str(u.name) for u in request.users] if request.users else None
    counts = Counter(asked or ())
    results = []
    for user in (asked if asked is not None else store.users()):
        if counts[user] > 1:
            results.append(make(m.DescribeUserScramCredentialsResult, user=user, error_code=errors.DUPLICATE_RESOURCE,
                                error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                                              f"single request: {user}", credential_infos=()))
            continue
        infos = store.describe(user)
        if not infos:
            if asked is None:
                continue
            results.append(make(m.DescribeUserScramCredentialsResult, user=user, error_code=errors.RESOURCE_NOT_FOUND,
                                error_message=f"Attempt to describe nonexistent user: {user}", credential_infos=()))
            continue
        results.append(make(
            m.DescribeUserScramCredentialsResult, user=user, error_code=errors.NONE, error_message=None,
            credential_infos=tuple(make(m.CredentialInfo, mechanism=MECHANISM_NUMBERS[mech], iterations=it)
                                   for mech, it in sorted(infos.items())),
        ))
    return make(m.DescribeUserScramCredentialsResponse, throttle_time=0, error_code=errors.NONE, error_message=None,
                results=tuple(results))
