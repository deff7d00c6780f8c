"""ApiVersions (18): advertises exactly the versions the handlers implement."""

from __future__ import annotations

import struct
from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.server.request_context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def _versions() -> list[tuple[int, int, int]]:
    from odradek.server.handlers import registry

    return sorted((k, h.min_version, h.max_version) for k, h in registry.items())


def unsupported_version_response() -> bytes:
    """v0 body with UNSUPPORTED_VERSION: clients retry at a version listed here."""
    vs = _versions()
    out = bytearray(struct.pack(">hi", errors.UNSUPPORTED_VERSION, len(vs)))
    for k, lo, hi in vs:
        out += struct.pack(">hhh", k, lo, hi)
    return bytes(out)


def handle(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    keys = tuple(make(m.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, lo, hi in _versions())
    return make(
        m.ApiVersionsResponse,
        error_code=errors.NONE,
        api_keys=keys,
        throttle_time=0,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
