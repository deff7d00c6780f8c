"""The server side of SASL authentication on one connection (Kafka's SaslServerAuthenticator,
KIP-152), as a state machine free of I/O.

States: ``HANDSHAKE`` (a SaslHandshake names the mechanism; ApiVersions may come first) →
``AUTHENTICATE`` (SaslAuthenticate tokens until the mechanism completes) → ``COMPLETE``, or
``FAILED`` (the connection is closed after ``connection.failed.authentication.delay.ms``).
Mechanisms: PLAIN (RFC 4616, users from the listener's JAAS config) and SCRAM-SHA-256/512
(RFC 5802/7677, credentials from the metadata store; HMAC and hashes from the standard library).
"""

from __future__ import annotations

import base64
import enum
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.security.scram import MECHANISMS, CredentialLookup, ScramCredential, decode_saslname

log = logging.getLogger("odradek.security")

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
    """RFC 5802 server, as Kafka's ScramSaslServer runs it: client-first → server-first,
    client-final → server-final. As in Kafka, the final message's nonce need only end with the
    server's nonce (librdkafka before 2.1 sends the client nonce twice), and the proof is checked
    against the message as received. The credential (StoredKey, ServerKey) never leaves here."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._lookup = lookup
        self._step = 0
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None
        self.complete = False
        self.user: str | None = None

    def _fail(self, why: str) -> AuthenticationFailed:
        log.info("SCRAM exchange (%s) refused: %s", self.mechanism, why)
        self.user = None
        return AuthenticationFailed(f"{SCRAM_FAILED_MESSAGE} {self.mechanism}")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise self._fail("not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(text).encode()
        if self._step == 1:
            self._step = 2
            return self._client_final(text).encode()
        raise self._fail("a token after the exchange completed")

    def _client_first(self, text: str) -> str:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise self._fail("malformed client-first message or channel binding requested")
        authzid = parts[1]
        self._gs2 = f"{parts[0]},{authzid},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        user, cnonce = attrs.get("n"), attrs.get("r")
        if not user or not cnonce:
            raise self._fail("client-first message without user or nonce")
        user = decode_saslname(user)
        if authzid and decode_saslname(authzid.removeprefix("a=")) != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        cred = self._lookup(user, self.mechanism)
        if cred is None:
            raise AuthenticationFailed(f"Authentication failed: Invalid user credentials ({self.mechanism})")
        self.user = user
        self._cred = cred
        self._nonce = cnonce + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        cred = self._cred
        assert cred is not None
        head, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise self._fail("client-final message without proof")
        attrs = _attributes(head)
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise self._fail("channel binding does not match the client-first message")
        if not attrs.get("r", "").endswith(self._nonce):
            raise self._fail("invalid client nonce in the final client message")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise self._fail("proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{head}".encode()
        h = self._hash
        client_signature = hmac.new(cred.stored_key, auth_message, h).digest()
        if len(proof) != len(client_signature):
            raise self._fail("proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(h(client_key).digest(), cred.stored_key):
            raise self._fail("invalid proof")
        self.complete = True
        server_signature = hmac.new(cred.server_key, auth_message, h).digest()
        return "v=" + base64.b64encode(server_signature).decode()


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and len(key) == 1 and key not in out:
            out[key] = value
    return out


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
    complete: bool = False  # this token finished the exchange (first authentication or re-authentication)


class SaslServer:
    """A connection's authentication (SaslServerAuthenticator without its transport)."""

    def __init__(self, mechanisms: Mapping[str, MechanismFactory], reauthentication: bool = False) -> None:
        self._factories = mechanisms
        self.reauthentication = reauthentication  # connections.max.reauth.ms > 0
        self.state = SaslState.HANDSHAKE
        self.mechanism_name: str | None = None
        self._mechanism: Mechanism | None = None
        self.principal: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: tokens come as bare frames, not SaslAuthenticate
        self.reauthenticating = False  # KIP-368: a new exchange on an authenticated connection

    @property
    def enabled(self) -> list[str]:
        return list(self._factories)

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may come now (Kafka closes the connection otherwise)."""
        if self.state is SaslState.COMPLETE:
            return True
        if self.state is SaslState.HANDSHAKE:
            return api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS)
        if self.state is SaslState.AUTHENTICATE:
            return api_key == ApiKey.SASL_AUTHENTICATE
        return False

    def handshake(self, mechanism: str, raw_tokens: bool = False) -> HandshakeResult:
        if self.state is SaslState.COMPLETE and self.reauthentication and not raw_tokens and not self.reauthenticating:
            # re-authentication (KIP-368): the same mechanism, then the same principal
            if mechanism != self.mechanism_name:
                self.state = SaslState.FAILED
                return HandshakeResult(errors.ILLEGAL_SASL_STATE, self.enabled)
            same = self._factories[mechanism]
            self._mechanism = same()
            self.reauthenticating = True
            return HandshakeResult(errors.NONE, self.enabled)
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
        if self.reauthenticating and self._mechanism is not None:
            return self._reauthenticate(self._mechanism, token)
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
            return AuthenticateResult(errors.NONE, None, reply, complete=True)
        return AuthenticateResult(errors.NONE, None, reply)

    def _reauthenticate(self, mechanism: Mechanism, token: bytes) -> AuthenticateResult:
        try:
            reply = mechanism.evaluate(token)
        except AuthenticationFailed as e:
            self.state = SaslState.FAILED
            self.reauthenticating = False
            return AuthenticateResult(errors.SASL_AUTHENTICATION_FAILED, str(e), b"")
        if mechanism.complete:
            self.reauthenticating = False
            if f"User:{mechanism.user}" != self.principal:
                self.state = SaslState.FAILED
                return AuthenticateResult(errors.SASL_AUTHENTICATION_FAILED,
                                          "Cannot change principals during re-authentication", b"")
            return AuthenticateResult(errors.NONE, None, reply, complete=True)
        return AuthenticateResult(errors.NONE, None, reply)
