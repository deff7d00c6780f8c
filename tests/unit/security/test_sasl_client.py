"""The client side of SASL (odradek.security.sasl_client) against the broker's server side
(odradek.security.sasl): PLAIN and SCRAM-SHA-256/512 complete; a wrong password, a server that
does not know the password and a nonce that does not extend the client's are refused."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.protocol import errors
from odradek.security.sasl import AuthenticationFailed, PlainMechanism, ScramServerMechanism
from odradek.security.sasl_client import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    PlainClient,
    SaslClientError,
    ScramClient,
    exchange,
)
from odradek.security.scram import make_credential


def _scram_server(mechanism: str, password: str) -> ScramServerMechanism:
    cred = make_credential(mechanism, password, 4096)
    return ScramServerMechanism(mechanism, lambda user, mech: cred if (user, mech) == ("broker", mechanism) else None)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_completes_against_the_server(mechanism: str) -> None:
    server = _scram_server(mechanism, "broker-secret")
    client = ScramClient(mechanism, "broker", "broker-secret")
    token: bytes | None = client.first()
    while token is not None:
        token = client.next(server.evaluate(token))
    assert client.complete and server.complete and server.user == "broker"


def test_scram_wrong_password_is_refused_by_the_server() -> None:
    server = _scram_server("SCRAM-SHA-256", "broker-secret")
    client = ScramClient("SCRAM-SHA-256", "broker", "wrong")
    final = client.next(server.evaluate(client.first()))
    assert final is not None
    with pytest.raises(AuthenticationFailed):
        server.evaluate(final)


def test_scram_client_refuses_a_server_that_does_not_know_the_password() -> None:
    client = ScramClient("SCRAM-SHA-256", "broker", "broker-secret", nonce="abc")
    client.next(b"r=abcdef,s=" + base64.b64encode(b"salt") + b",i=4096")
    with pytest.raises(SaslClientError, match="signature"):
        client.next(b"v=" + base64.b64encode(b"x" * 32))
    assert not client.complete


@pytest.mark.parametrize("server_first", [b"r=zzz,s=c2FsdA==,i=4096", b"r=abc,s=c2FsdA==,i=4096",
                                          b"r=abcd,i=4096", b"r=abcd,s=c2FsdA==,i=0"])
def test_scram_client_refuses_bad_server_first(server_first: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "broker", "pw", nonce="abc")
    with pytest.raises(SaslClientError):
        client.next(server_first)


def test_plain_client_token_is_accepted() -> None:
    server = PlainMechanism({"broker": "pw"})
    client = PlainClient("broker", "pw")
    assert client.next(server.evaluate(client.first())) is None
    assert client.complete and server.user == "broker"


def _resp(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**{"error_code": errors.NONE, "error_message": None, "auth_bytes": b"",
                              "mechanisms": (), **fields})


def test_exchange_sends_handshake_then_authenticate() -> None:
    steps = exchange("plain", "broker", "pw")
    api, _, fields = next(steps)
    assert (api, fields) == (SASL_HANDSHAKE, {"mechanism": "PLAIN"})
    api, _, fields = steps.send(_resp(mechanisms=("PLAIN",)))
    assert (api, fields) == (SASL_AUTHENTICATE, {"auth_bytes": b"\x00broker\x00pw"})
    with pytest.raises(StopIteration):
        steps.send(_resp())


def test_exchange_raises_on_refusals() -> None:
    steps = exchange("SCRAM-SHA-512", "broker", "pw")
    next(steps)
    with pytest.raises(SaslClientError, match="SaslHandshake"):
        steps.send(_resp(error_code=errors.UNSUPPORTED_SASL_MECHANISM, mechanisms=("PLAIN",)))
    steps = exchange("PLAIN", "broker", "pw")
    next(steps)
    steps.send(_resp())
    with pytest.raises(SaslClientError, match="Invalid username"):
        steps.send(_resp(error_code=errors.SASL_AUTHENTICATION_FAILED, error_message="Invalid username or password"))
