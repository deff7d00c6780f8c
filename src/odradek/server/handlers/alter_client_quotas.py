"""AlterClientQuotas (49, KIP-546): set or remove quota keys of user / client-id entities and of
ip entities (KIP-612), and their defaults (a null name), each entry on its own, written to
/config/users, /config/clients and /config/ips (server.quota.store) and announced under
/config/changes so every broker applies it."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller.store import StoreError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.quota.client_quotas import QuotaRequestError, entity_from_parts
from odradek.server.request_context import HasCluster, HasQuotas, RequestContext

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1


class Needs(HasCluster, HasQuotas, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    svc = services(ctx)
    validate_only = bool(request.validate_only)
    out = []
    changed = False
    allowed = ctx.permits(ResourceType.CLUSTER)  # Kafka: ALTER_CONFIGS on the cluster
    for entry in request.entries:
        parts = [(c.entity_type, c.entity_name) for c in entry.entity]
        code, message = errors.NONE, None
        try:
            if not allowed:
                raise QuotaRequestError(errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
            e = entity_from_parts(parts)
            ops = [(op.key, float(op.value), bool(op.remove)) for op in entry.ops]
            if validate_only:
                svc.quotas.check_ops(ops, e)
            else:
                path = svc.quotas.alter(svc.cluster.store, e, ops)
                if path is not None:
                    svc.cluster.notify_config_change(path)
                    changed = True
        except QuotaRequestError as err:
            code, message = err.code, err.message
        except StoreError as err:
            code, message = errors.REQUEST_TIMED_OUT, f"The metadata store could not be written: {err}"
        out.append(make(m.EntryData, error_code=code, error_message=message,
                        entity=tuple(make(m.EntityData, entity_type=t, entity_name=n) for t, n in parts)))
    if changed:
        svc.quotas.reload(svc.cluster.store)  # this broker applies it at once; others on the notice
    return make(m.AlterClientQuotasResponse, throttle_time=0, entries=tuple(out))
