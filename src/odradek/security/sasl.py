"""The server side of SASL authentication on one connection (Kafka's SaslServerAuthenticator,
KIP-152), as a state machine free of I/O.

States: ``HANDSHAKE`` (a SaslHandshake names the mechanism; ApiVersions may come first) →
``AUTHENTICATE`` (SaslAuthenticate tokens until the mechanism completes) → ``COMPLETE``, or
``FAILED`` (the connection is closed after ``connection.failed.authentication.delay.ms``).
Mechanisms: PLAIN (RFC 4616, users from the listener's JAAS config) and SCRAM-SHA-256/512
(RFC 5802/7677, credentials from the metadata store, the exchange by ``scramp``).
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from scramp import ScramException, ScramMechanism

from odradek.protocol import errors
from odradek.security.scram import CredentialLookup, decode_saslname

AUTH_FAILED_MESSAGE = "Authentication failed: Invalid username or password"
SCRAM_FAILED_MESSAGE = "Authentication failed during authentication due to invalid credentials with SASL mechanism"


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class AuthenticationFailed(Exception):
    """The client's credentials were refused (SASL_AUTHENTICATION_FAILED)."""


class Mechanism(Protocol):
    """One SASL exchange: each client token gives the server's reply; ``complete`` once done."""

    complete: bool
    user: str | None

    def evaluate(self, token: bytes) -> bytes: ...


class PlainMechanism:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``; authzid empty or equal to authcid."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed(AUTH_FAILED_MESSAGE)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.user = user
        self.complete = True
        return b""


class ScramServerMechanism:
    """RFC 5802 server: client-first → server-first, client-final → server-final."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0
        self.complete = False
        self.user: str | None = None

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        user = decode_saslname(username)
        cred = self._lookup(user, self.mechanism)
        if cred is None:
            raise AuthenticationFailed(f"Authentication failed: Invalid user credentials ({self.mechanism})")
        self.user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode()
            if self._step == 0:
                self._step = 1
                self._server.set_client_first(text)
                first: str = self._server.get_server_first()
                return first.encode()
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(text)
                final: str = self._server.get_server_final()
                self.complete = True
                return final.encode()
        except (ScramException, UnicodeDecodeError, ValueError, KeyError):
            self.user = None
            raise AuthenticationFailed(f"{SCRAM_FAILED_MESSAGE} {self.mechanism}") from None
        raise AuthenticationFailed("Unexpected SASL token after the SCRAM exchange completed")


MechanismFactory = Callable[[], Mechanism]


@dataclass(frozen=True)
class HandshakeResult:
    error_code: int
    mechanisms: list[str]


@dataclass(frozen=True)
class AuthenticateResult:
    error_code: int
    error_message: str | None
    token: bytes


class SaslServer:
    """A connection's authentication (SaslServerAuthenticator without its transport)."""

    def __init__(self, mechanisms: Mapping[str, MechanismFactory]) -> None:
        self._factories = mechanisms
        self.state = SaslState.HANDSHAKE
        self.mechanism_name: str | None = None
        self._mechanism: Mechanism | None = None
        self.principal: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens come as bare frames, not SaslAuthenticate

    @property
    def enabled(self) -> list[str]:
        return list(self._factories)

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may come now (Kafka closes the connection otherwise)."""
        if self.state is SaslState.COMPLETE:
            return True
        if self.state is SaslState.HANDSHAKE:
            return api_key in (17, 18)  # SaslHandshake, ApiVersions
        if self.state is SaslState.AUTHENTICATE:
            return api_key == 36  # SaslAuthenticate
        return False

    def handshake(self, mechanism: str, raw_tokens: bool = False) -> HandshakeResult:
        if self.state is not SaslState.HANDSHAKE:
            return HandshakeResult(errors.ILLEGAL_SASL_STATE, self.enabled)
        factory = self._factories.get(mechanism)
        if factory is None:
            self.state = SaslState.FAILED
            return HandshakeResult(errors.UNSUPPORTED_SASL_MECHANISM, self.enabled)
        self.mechanism_name = mechanism
        self.raw_tokens = raw_tokens
        self._mechanism = factory()
        self.state = SaslState.AUTHENTICATE
        return HandshakeResult(errors.NONE, self.enabled)

    def authenticate(self, token: bytes) -> AuthenticateResult:
        if self.state is not SaslState.AUTHENTICATE or self._mechanism is None:
            self.state = SaslState.FAILED
            return AuthenticateResult(errors.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request", b"")
        try:
            reply = self._mechanism.evaluate(token)
        except AuthenticationFailed as e:
            self.state = SaslState.FAILED
            return AuthenticateResult(errors.SASL_AUTHENTICATION_FAILED, str(e), b"")
        if self._mechanism.complete:
            self.state = SaslState.COMPLETE
            self.principal = f"User:{self._mechanism.user}"
        return AuthenticateResult(errors.NONE, None, reply)
