"""SaslAuthenticate (36): one token of the connection's SASL exchange (KIP-152).

A refused token is answered with SASL_AUTHENTICATION_FAILED and its message after
``connection.failed.authentication.delay.ms`` (KIP-306), and the connection is closed once the
answer is written.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.SASL_AUTHENTICATE
MIN_VERSION = 0
MAX_VERSION = 2

_ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    conn = ctx.connection
    sasl = conn.sasl
    if sasl is None:
        return make(m.SaslAuthenticateResponse, error_code=errors.ILLEGAL_SASL_STATE,
                    error_message="SaslAuthenticate request received on a listener without SASL",
                    auth_bytes=b"", session_lifetime=_ZERO)
    result = sasl.authenticate(bytes(request.auth_bytes))
    lifetime = _ZERO
    if result.error_code == errors.NONE and result.complete and sasl.principal is not None:
        # KIP-368: the session lasts connections.max.reauth.ms; the client re-authenticates before it ends
        lifetime = datetime.timedelta(milliseconds=conn.sasl_authenticated(sasl.principal))
    response = make(m.SaslAuthenticateResponse, error_code=result.error_code, error_message=result.error_message,
                    auth_bytes=result.token, session_lifetime=lifetime)
    if result.error_code == errors.NONE:
        return response
    conn.close_after_response()
    delay = conn.failed_authentication_delay_s
    if delay <= 0:
        return response
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def answer() -> None:
        if not fut.done():
            fut.set_result(response)

    timer = loop.call_later(delay, answer)
    ctx.park(fut, timer.cancel)
    return fut
