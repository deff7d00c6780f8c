"""AlterUserScramCredentials (51, KIP-554): the client sends the salted password
(PBKDF2 done client-side), the broker derives and stores StoredKey/ServerKey as Kafka does
(``/config/users/<user>``); needs ALTER on the cluster."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.security.scram import MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS, credential_from_salted
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasSecurity, RequestContext

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
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
    ops: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for d in request.deletions:
        ops[str(d.name)].append(("delete", d))
    for u in request.upsertions:
        ops[str(u.name)].append(("upsert", u))

    def result(user: str, code: int, message: str | None = None) -> Any:
        return make(m.AlterUserScramCredentialsResult, user=user, error_code=code, error_message=message)

    if not ctx.permits(ResourceType.CLUSTER):
        return make(m.AlterUserScramCredentialsResponse, throttle_time=0,
                    results=tuple(result(u, errors.CLUSTER_AUTHORIZATION_FAILED) for u in ops))
    assert store is not None
    results = []
    for user, changes in ops.items():
        mechs = [MECHANISM_TYPES.get(int(c.mechanism)) for _, c in changes]
        if not user:
            results.append(result(user, errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif len(set(mechs)) != len(mechs):
            results.append(result(user, errors.DUPLICATE_RESOURCE,
                                  "A user credential cannot be altered twice in the same request"))
        elif any(mech is None for mech in mechs):
            results.append(result(user, errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
        elif any(kind == "upsert" and not MIN_ITERATIONS <= int(c.iterations) <= MAX_ITERATIONS
                 for kind, c in changes):
            results.append(result(user, errors.UNACCEPTABLE_CREDENTIAL,
                                  f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"))
        elif any(kind == "delete" and MECHANISM_TYPES[int(c.mechanism)] not in store.describe(user)
                 for kind, c in changes):
            results.append(result(user, errors.RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist"))
        else:
            for kind, c in changes:
                mech = MECHANISM_TYPES[int(c.mechanism)]
                if kind == "delete":
                    store.delete(user, mech)
                else:
                    store.upsert(user, mech, credential_from_salted(mech, bytes(c.salted_password), bytes(c.salt),
                                                                    int(c.iterations)))
            results.append(result(user, errors.NONE))
    return make(m.AlterUserScramCredentialsResponse, throttle_time=0, results=tuple(results))
