"""ApiVersions (18): advertises exactly the versions the handlers implement (the transaction
requests of KIP-890 part 2 only with transaction.version 2 finalized: server.txn_version); v3+
also the supported features, the finalized features and their epoch (KIP-584, tagged fields)."""

from __future__ import annotations

import struct
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasFeatures, RequestContext
from odradek.server.txn_version import advertised, transaction_version

API_KEY = ApiKey.API_VERSIONS
MIN_VERSION = 0
MAX_VERSION = 4


class Needs(HasFeatures, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _versions() -> list[tuple[int, int, int]]:
    from odradek.server.handlers import registry

    return sorted((k, h.min_version, h.max_version) for k, h in registry.items())


def unsupported_version_response(transaction_version_level: int) -> bytes:
    """v0 body with UNSUPPORTED_VERSION: clients retry at a version listed here (the same list
    as a successful ApiVersions under the finalized transaction.version)."""
    vs = advertised(_versions(), transaction_version_level)
    out = bytearray(struct.pack(">hi", errors.UNSUPPORTED_VERSION, len(vs)))
    for k, lo, hi in vs:
        out += struct.pack(">hhh", k, lo, hi)
    return bytes(out)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    versions = advertised(_versions(), transaction_version(services(ctx).features))
    keys = tuple(make(m.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, lo, hi in versions)
    if ctx.api_version < 3:
        return make(m.ApiVersionsResponse, error_code=errors.NONE, api_keys=keys, throttle_time=0)
    features = services(ctx).features
    finalized, epoch = features.snapshot()
    # KIP-1022: a supported range starting at 0 is shown from 1 below v4 (clients before it reject
    # 0), and a feature supported only at 0 is left out there; finalized levels show as [level, level]
    alter_v0 = ctx.api_version < 4
    supported = tuple(
        make(m.SupportedFeatureKey, name=n, min_version=max(lo, 1) if alter_v0 else lo, max_version=hi)
        for n, (lo, hi) in sorted(features.supported.items())
        if not (alter_v0 and hi == 0)
    )
    final = tuple(
        make(m.FinalizedFeatureKey, name=n, min_version_level=lvl, max_version_level=lvl)
        for n, lvl in sorted(finalized.items())
    )
    return make(
        m.ApiVersionsResponse,
        error_code=errors.NONE,
        api_keys=keys,
        throttle_time=0,
        supported_features=supported,
        finalized_features_epoch=epoch,
        finalized_features=final,
        zk_migration_ready=False,
    )
