"""The client side of SASL authentication (Kafka's SaslClientAuthenticator, KIP-152), free of I/O:
what a broker's own clients (replica fetcher, controller channel, transaction channel,
ControlledShutdown) and the CLI's blocking client say to authenticate.

Exchange, as a generator of requests (``(api_key, version, fields)``) that is sent each decoded
response::

    SaslHandshake v1  {mechanism}                 -> error_code, mechanisms
    SaslAuthenticate v2  {auth_bytes: token}      -> error_code, error_message, auth_bytes, ...
    ... until the mechanism has nothing more to send and the server's last reply checked out

Mechanisms: PLAIN (RFC 4616, one token ``NUL user NUL password``) and SCRAM-SHA-256/512
(RFC 5802 / RFC 7677, no channel binding: ``n,,``): client-first ``n=<user>,r=<nonce>``; the
server's ``r=<nonce+server>,s=<salt>,i=<iterations>``; client-final ``c=biws,r=...,p=<proof>``
where ``proof = ClientKey XOR HMAC(H(ClientKey), AuthMessage)``; the server's ``v=<signature>``
is checked against ``HMAC(ServerKey, AuthMessage)`` so that a server which does not know the
password is not trusted either.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Generator
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.security.scram import MECHANISMS, salted_password

SASL_HANDSHAKE = 17
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE = 36
SASL_AUTHENTICATE_VERSION = 2
CLIENT_MECHANISMS = ("PLAIN", *MECHANISMS)

Request = tuple[int, int, dict[str, Any]]


class SaslClientError(ConnectionError):
    """Authentication failed: the server refused us, or its replies do not check out (a
    connection error: the broker's clients close the connection and retry after their back-off)."""


class ClientMechanism(Protocol):
    """One client exchange: ``first()`` then ``next(server_token)`` until ``complete``."""

    complete: bool

    def first(self) -> bytes: ...

    def next(self, token: bytes) -> bytes | None: ...


class PlainClient:
    def __init__(self, user: str, password: str) -> None:
        self.user = user
        self.password = password
        self.complete = False

    def first(self) -> bytes:
        return b"\x00" + self.user.encode() + b"\x00" + self.password.encode()

    def next(self, token: bytes) -> bytes | None:
        self.complete = True
        return None


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """RFC 5802's client; ``nonce`` may be given for tests (otherwise 24 random bytes)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise SaslClientError(f"unknown SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self.user = user
        self.password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_saslname(user)},r={self._nonce}"
        self._server_signature = b""
        self._step = 0
        self.complete = False

    def first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def next(self, token: bytes) -> bytes | None:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslClientError("SCRAM server message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_final(text).encode()
        attrs = _attributes(text)
        if "e" in attrs:
            raise SaslClientError(f"SCRAM server error: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            raise SaslClientError("SCRAM server signature is not base64") from None
        if not signature or not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("SCRAM server signature does not match: the server does not know our password")
        self.complete = True
        return None

    def _client_final(self, server_first: str) -> str:
        attrs = _attributes(server_first)
        nonce, salt_b64, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("SCRAM server nonce does not extend the client's")
        if salt_b64 is None or not iterations.isdigit():
            raise SaslClientError("SCRAM server-first message without salt or iteration count")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except ValueError:
            raise SaslClientError("SCRAM salt is not base64") from None
        n = int(iterations)
        if not 1 <= n <= 1_000_000:
            raise SaslClientError(f"SCRAM iteration count {n} out of range")
        h = self._hash
        salted = salted_password(self.mechanism, self.password.encode(), salt, n)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        stored_key = h(client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", h).digest()
        self._server_signature = hmac.new(server_key, auth_message, h).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}"


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


def client_mechanism(mechanism: str, user: str, password: str) -> ClientMechanism:
    mechanism = mechanism.upper()
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    if mechanism in MECHANISMS:
        return ScramClient(mechanism, user, password)
    raise SaslClientError(f"SASL mechanism {mechanism} is not implemented (only {', '.join(CLIENT_MECHANISMS)})")


def exchange(mechanism: str, user: str, password: str) -> Generator[Request, Any, None]:
    """Yield the requests of one authentication; each ``send`` gives the decoded (kio) response.
    Returns once authenticated; raises :class:`SaslClientError` otherwise."""
    mech = client_mechanism(mechanism, user, password)
    resp = yield SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": mechanism.upper()}
    if int(resp.error_code) != errors.NONE:
        raise SaslClientError(f"SaslHandshake for {mechanism} refused (error {int(resp.error_code)}); "
                              f"the server offers {list(resp.mechanisms)}")
    token: bytes | None = mech.first()
    while token is not None:
        resp = yield SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token}
        if int(resp.error_code) != errors.NONE:
            raise SaslClientError(f"SaslAuthenticate refused (error {int(resp.error_code)}): {resp.error_message}")
        token = mech.next(bytes(resp.auth_bytes))
    if not mech.complete:
        raise SaslClientError(f"{mechanism} exchange ended before it completed")
