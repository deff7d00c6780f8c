"""Whatever a client sends as a SASL token or a JAAS text, the parsers answer with their own
refusal (AuthenticationFailed, ConfigError), never another exception."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.config import ConfigError
from odradek.protocol import errors
from odradek.security.jaas import parse_jaas
from odradek.security.sasl import PlainMechanism, SaslServer, ScramServerMechanism
from odradek.security.scram import make_credential

CRED = make_credential("SCRAM-SHA-256", "pw", iterations=4096, salt=b"s" * 16)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_scram_tokens(tokens: list[bytes]) -> None:
    s = SaslServer({"SCRAM-SHA-256": lambda: ScramServerMechanism("SCRAM-SHA-256", lambda u, m: CRED)})
    s.handshake("SCRAM-SHA-256")
    for t in tokens:
        r = s.authenticate(t)
        assert r.error_code in (errors.NONE, errors.SASL_AUTHENTICATION_FAILED, errors.ILLEGAL_SASL_STATE)
        assert not r.complete or s.principal is not None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_scram_structured_garbage(first: str, final: str) -> None:
    s = SaslServer({"SCRAM-SHA-256": lambda: ScramServerMechanism("SCRAM-SHA-256", lambda u, m: CRED)})
    s.handshake("SCRAM-SHA-256")
    s.authenticate(f"n,,n=alice,r={first}".encode())
    r = s.authenticate(f"c=biws,r={first}{final},p={final}".encode())
    assert r.error_code == errors.SASL_AUTHENTICATION_FAILED or r.error_code == errors.ILLEGAL_SASL_STATE


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100))
def test_plain_tokens(token: bytes) -> None:
    s = SaslServer({"PLAIN": lambda: PlainMechanism({"alice": "pw"})})
    s.handshake("PLAIN")
    r = s.authenticate(token)
    assert r.error_code == (errors.NONE if token in (b"\x00alice\x00pw", b"alice\x00alice\x00pw")
                            else errors.SASL_AUTHENTICATION_FAILED)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_jaas_text(text: str) -> None:
    with contextlib.suppress(ConfigError):  # any other exception fails the test
        parse_jaas(text)
