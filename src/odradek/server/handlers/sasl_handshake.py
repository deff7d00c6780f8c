"""SaslHandshake (17). v1 (KIP-152): the tokens follow in SaslAuthenticate requests; v0: they
follow as bare size-prefixed frames (the connection handles them, see ``Connection._on_raw_token``).

On a SASL listener it chooses the connection's mechanism (UNSUPPORTED_SASL_MECHANISM with the
enabled ones otherwise); elsewhere, or once authenticated, it is ILLEGAL_SASL_STATE, as Kafka's
KafkaApis answers it.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.SASL_HANDSHAKE
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    sasl = ctx.connection.sasl
    if sasl is None:
        return make(m.SaslHandshakeResponse, error_code=errors.ILLEGAL_SASL_STATE, mechanisms=())
    result = sasl.handshake(str(request.mechanism), raw_tokens=ctx.api_version == 0)
    if result.error_code != errors.NONE:
        ctx.connection.close_after_response()
    return make(m.SaslHandshakeResponse, error_code=result.error_code, mechanisms=tuple(result.mechanisms))
