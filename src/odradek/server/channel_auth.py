"""A connection's authentication: who is on the other end, and which requests it may send yet (Kafka's
channel authenticators: SslAuthenticator, SaslServerAuthenticator, with KIP-368's re-authentication).

One :class:`ChannelAuthenticator` per connection, driven by it:

- :meth:`~ChannelAuthenticator.start`: on a SASL listener a :class:`SaslServer` is made and the frame
  decoder's bound lowered to ``sasl.server.max.receive.size`` until authentication ends; on a TLS or
  SASL listener the exchange must end within ``odradek.authentication.timeout.ms`` (the timer calls
  the connection's ``on_timeout`` with the reason);
- :meth:`~ChannelAuthenticator.refusal`: why a request of an API key must close the connection now —
  before SASL authentication ends only ApiVersions, SaslHandshake and SaslAuthenticate are served (Kafka
  closes the connection otherwise); a SASL session past ``connections.max.reauth.ms`` ends with its next
  request that is not a re-authentication (KIP-368);
- :meth:`~ChannelAuthenticator.tls_handshaken` and :meth:`~ChannelAuthenticator.sasl_authenticated` set
  the principal (an SSL listener: the certificate's mapped subject, ``User:ANONYMOUS`` without one; SASL:
  the user) and, once the connection is authenticated, restore the decoder's bound and stop the timer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.protocol.api_keys import ApiKey
from odradek.security.sasl import SaslState
from odradek.security.tls import ANONYMOUS

if TYPE_CHECKING:
    from odradek.protocol.framing import FrameDecoder
    from odradek.security.listeners import ListenerSecurity
    from odradek.security.sasl import SaslServer
    from odradek.security.tls_channel import TlsChannel

# requests a session past its re-authentication deadline (KIP-368) may still send: the re-authentication
_REAUTHENTICATION = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class ChannelAuthenticator:
    def __init__(self, security: ListenerSecurity | None, decoder: FrameDecoder, max_request_bytes: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.security = security
        self.decoder = decoder
        self.max_request_bytes = max_request_bytes  # socket.request.max.bytes, once authenticated
        self.monotonic = monotonic
        self.principal = ANONYMOUS
        self.tls: TlsChannel | None = None  # set by a TlsConnection (odradek.server.tls_connection)
        self.sasl: SaslServer | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._session_expires = 0.0  # monotonic end of the SASL session (KIP-368), 0 for none

    def start(self, loop: asyncio.AbstractEventLoop, on_timeout: Callable[[str], None]) -> None:
        sec = self.security
        if sec is None:
            return
        self.sasl = sec.sasl_server()
        if self.sasl is not None:
            # Kafka's sasl.server.max.receive.size: no large request before authentication
            self.decoder.max_size = min(self.decoder.max_size, sec.max_unauthenticated_bytes)
        if self.tls is not None or self.sasl is not None:
            self._timer = loop.call_later(sec.auth_timeout_s, self._expired, on_timeout)

    def _expired(self, on_timeout: Callable[[str], None]) -> None:
        self._timer = None
        if not self.authenticated:
            what = "TLS handshake" if self.tls is not None and not self.tls.handshaken else "SASL authentication"
            on_timeout(f"{what} not finished within odradek.authentication.timeout.ms")

    @property
    def authenticated(self) -> bool:
        if self.tls is not None and not self.tls.handshaken:
            return False
        return self.sasl is None or self.sasl.state is SaslState.COMPLETE

    def _maybe_authenticated(self) -> None:
        if not self.authenticated:
            return
        self.decoder.max_size = self.max_request_bytes
        self.cancel()

    def tls_handshaken(self) -> None:
        assert self.tls is not None and self.security is not None
        if self.sasl is None:  # SSL: the principal is the certificate's (ANONYMOUS without one)
            self.principal = self.security.certificate_principal(self.tls.peer_certificate())
        self._maybe_authenticated()

    def sasl_authenticated(self, principal: str) -> int:
        """SaslAuthenticate completed (or a re-authentication did): requests run as ``principal``;
        the session's lifetime in ms (``connections.max.reauth.ms``, 0 for unlimited) is returned."""
        self.principal = principal
        self._maybe_authenticated()
        lifetime_ms = self.security.max_reauth_ms if self.security is not None else 0
        self._session_expires = self.monotonic() + lifetime_ms / 1000.0 if lifetime_ms > 0 else 0.0
        return lifetime_ms

    @property
    def failed_authentication_delay_s(self) -> float:
        return self.security.failed_auth_delay_s if self.security is not None else 0.0

    def refusal(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` must close the connection now, or None when it may be served."""
        sasl = self.sasl
        if sasl is not None and not sasl.allows(api_key):
            # Kafka's SaslServerAuthenticator: anything else before authentication ends the connection
            return f"unexpected request (api {api_key}) during SASL authentication ({sasl.state.value})"
        if self._session_expires and api_key not in _REAUTHENTICATION and self.monotonic() > self._session_expires:
            # KIP-368: a session that was not re-authenticated in time ends with its next request
            return "SASL session expired without re-authentication (connections.max.reauth.ms)"
        return None

    def cancel(self) -> None:
        """Stop the authentication timer (authenticated, or the connection closed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
