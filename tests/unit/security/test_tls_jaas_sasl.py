"""Pure parts of odradek.security: certificate principals, JAAS parsing, the SASL state machine."""

from __future__ import annotations

import os
import ssl

import pytest
import trustme
from scramp import ScramClient

from odradek.config import ConfigError
from odradek.protocol import errors
from odradek.security.jaas import parse_jaas, plain_users
from odradek.security.sasl import (
    AuthenticationFailed,
    PlainMechanism,
    SaslServer,
    SaslState,
    ScramServerMechanism,
)
from odradek.security.scram import ScramCredential, make_credential
from odradek.security.tls import (
    ReloadingServerContext,
    certificate_principal,
    distinguished_name,
    map_principal,
    parse_mapping_rules,
    server_context,
)

from .tls_handshake import memory_handshake

CERT = {"subject": ((("countryName", "US"),), (("organizationName", "Example, Inc"),),
                    (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}


def test_distinguished_name_is_rfc2253_most_specific_first() -> None:
    assert distinguished_name(CERT) == "CN=alice,OU=eng,O=Example\\, Inc,C=US"


def test_principal_mapping_rules() -> None:
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=eng,.*$/$1/U, RULE:^CN=([^,]*),.*$/svc-$1/, DEFAULT")
    assert map_principal("CN=alice,OU=eng,O=x,C=US", rules) == "ALICE"
    assert map_principal("CN=bob,OU=ops,C=US", rules) == "svc-bob"
    assert map_principal("O=nobody", rules) == "O=nobody"
    assert certificate_principal(CERT, parse_mapping_rules(None)) == "User:CN=alice,OU=eng,O=Example\\, Inc,C=US"
    assert certificate_principal(None, rules) == "User:ANONYMOUS"
    with pytest.raises(ConfigError):
        parse_mapping_rules("RULE:no-slashes")


def test_jaas_plain_users() -> None:
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                       ' username="admin" password="a;b" user_admin="a;b" user_alice=alice-secret ;')
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert plain_users(entry) == {"admin": "a;b", "alice": "alice-secret"}
    for bad in ("PlainLoginModule", 'PlainLoginModule required user_a="x"', "PlainLoginModule maybe a=b;"):
        with pytest.raises(ConfigError):
            parse_jaas(bad)


def _plain_server() -> SaslServer:
    return SaslServer({"PLAIN": lambda: PlainMechanism({"alice": "secret"})})


def test_sasl_plain_state_machine() -> None:
    s = _plain_server()
    assert s.allows(18) and s.allows(17) and not s.allows(3) and not s.allows(36)
    assert s.handshake("PLAIN").error_code == errors.NONE
    assert s.allows(36) and not s.allows(3)
    r = s.authenticate(b"\x00alice\x00secret")
    assert r.error_code == errors.NONE and s.state is SaslState.COMPLETE and s.principal == "User:alice"
    assert s.allows(3)


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00bob\x00secret", b"alice\x00secret",
                                   b"mallory\x00alice\x00secret", b"\xff\x00alice\x00secret"])
def test_sasl_plain_refusals(token: bytes) -> None:
    s = _plain_server()
    s.handshake("PLAIN")
    r = s.authenticate(token)
    assert r.error_code == errors.SASL_AUTHENTICATION_FAILED and r.error_message
    assert s.state is SaslState.FAILED and s.principal is None and not s.allows(3)


def test_unknown_mechanism_and_out_of_order() -> None:
    s = _plain_server()
    h = s.handshake("GSSAPI")
    assert h.error_code == errors.UNSUPPORTED_SASL_MECHANISM and h.mechanisms == ["PLAIN"]
    s2 = _plain_server()
    assert s2.authenticate(b"x").error_code == errors.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_scramp_client(mechanism: str) -> None:
    cred = make_credential(mechanism, "pw", iterations=4096)
    assert ScramCredential.parse(cred.format()) == cred
    store = {("alice", mechanism): cred}

    def run(password: str) -> SaslServer:
        s = SaslServer({mechanism: lambda: ScramServerMechanism(mechanism, lambda u, m: store.get((u, m)))})
        s.handshake(mechanism)
        c = ScramClient([mechanism], "alice", password)
        r1 = s.authenticate(c.get_client_first().encode())
        assert r1.error_code == errors.NONE
        c.set_server_first(r1.token.decode())
        r2 = s.authenticate(c.get_client_final().encode())
        if r2.error_code == errors.NONE:
            c.set_server_final(r2.token.decode())  # the server proves it knows the credential
        return s

    assert run("pw").principal == "User:alice"
    bad = run("wrong")
    assert bad.state is SaslState.FAILED and bad.principal is None


def test_scram_unknown_user() -> None:
    s = SaslServer({"SCRAM-SHA-256": lambda: ScramServerMechanism("SCRAM-SHA-256", lambda u, m: None)})
    s.handshake("SCRAM-SHA-256")
    c = ScramClient(["SCRAM-SHA-256"], "nobody", "pw")
    assert s.authenticate(c.get_client_first().encode()).error_code == errors.SASL_AUTHENTICATION_FAILED


def test_scram_final_nonce_may_repeat_the_client_nonce() -> None:
    """librdkafka before 2.1 sends r=<client nonce><server nonce>; Kafka's ScramSaslServer checks
    that the nonce ends with the server's, and verifies the proof over the message as sent."""
    import base64
    import hashlib
    import hmac

    cred = make_credential("SCRAM-SHA-256", "pw", iterations=4096, salt=b"s" * 16)
    mech = ScramServerMechanism("SCRAM-SHA-256", lambda u, m: cred)
    server_first = mech.evaluate(b"n,,n=alice,r=abc").decode()
    nonce = server_first.split(",")[0][2:]
    assert nonce.startswith("abc")
    without_proof = f"c=biws,r=abc{nonce}"
    auth = f"n=alice,r=abc,{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"s" * 16, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    sig = hmac.new(hashlib.sha256(client_key).digest(), auth, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True))).decode()
    final = mech.evaluate(f"{without_proof},p={proof}".encode()).decode()
    assert mech.complete and mech.user == "alice" and final.startswith("v=")
    # a nonce that does not end with the server's is refused
    mech2 = ScramServerMechanism("SCRAM-SHA-256", lambda u, m: cred)
    mech2.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed):
        mech2.evaluate(f"c=biws,r=abcXYZ,p={proof}".encode())


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    users = {"alice": "secret", "bob": "b"}
    s = SaslServer({"PLAIN": lambda: PlainMechanism(users)}, reauthentication=True)
    s.handshake("PLAIN")
    assert s.authenticate(b"\x00alice\x00secret").complete
    # KIP-368: a new exchange on the authenticated connection, requests still allowed meanwhile
    assert s.handshake("PLAIN").error_code == errors.NONE and s.allows(0)
    r = s.authenticate(b"\x00alice\x00secret")
    assert r.error_code == errors.NONE and r.complete and s.principal == "User:alice"
    s.handshake("PLAIN")
    r = s.authenticate(b"\x00bob\x00b")
    assert r.error_code == errors.SASL_AUTHENTICATION_FAILED and "principals" in (r.error_message or "")
    assert s.state is SaslState.FAILED
    # without connections.max.reauth.ms a second handshake is an illegal state
    t = SaslServer({"PLAIN": lambda: PlainMechanism(users)})
    t.handshake("PLAIN")
    t.authenticate(b"\x00alice\x00secret")
    assert t.handshake("PLAIN").error_code == errors.ILLEGAL_SASL_STATE


def _handshake_trusting(ctx: ssl.SSLContext, ca: trustme.CA) -> bool:
    """An in-memory TLS handshake against ``ctx`` by a client trusting only ``ca``."""
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return memory_handshake(client_ctx, ctx)


def test_tls_stores_reloaded_when_the_files_change(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old_ca, new_ca = trustme.CA(), trustme.CA()
    keystore = tmp_path / "server.pem"
    old_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    now = [0.0]
    holder = ReloadingServerContext({"ssl.keystore.location": str(keystore)}.get, clock=lambda: now[0])
    first = holder.current()
    assert _handshake_trusting(first, old_ca) and not _handshake_trusting(first, new_ca)
    new_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    os.utime(keystore, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    assert holder.current() is first  # checked at most once a second
    now[0] = 2.0
    second = holder.current()
    assert second is not first and _handshake_trusting(second, new_ca)
    keystore.write_text("not a key")  # a broken file keeps what was served
    now[0] = 4.0
    assert holder.current() is second


def test_an_expired_or_future_key_store_certificate_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime

    ca = trustme.CA()
    begin = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    end = datetime.datetime(2030, 6, 1, tzinfo=datetime.UTC)
    cert = ca.issue_cert("127.0.0.1", common_name="broker0", not_before=begin, not_after=end)
    path = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(path))
    settings = {"ssl.keystore.location": str(path)}
    inside = datetime.datetime(2030, 3, 1, tzinfo=datetime.UTC).timestamp()
    assert server_context(settings.get, lambda: inside) is not None
    with pytest.raises(ConfigError) as e:
        server_context(settings.get, lambda: end.timestamp() + 1)
    msg = str(e.value)
    assert "ssl.keystore.location" in msg and str(path) in msg and "CN=broker0" in msg
    assert "expired on Jun  1 00:00:00 2030 GMT" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="not valid before Jan  1 00:00:00 2030 GMT"):
        server_context(settings.get, lambda: begin.timestamp() - 1)
    # the same certificate given inline: the setting is named, not a temporary file
    inline = {"ssl.keystore.certificate.chain": b"".join(b.bytes() for b in cert.cert_chain_pems).decode(),
              "ssl.keystore.key": cert.private_key_pem.bytes().decode()}
    with pytest.raises(ConfigError, match=r"^ssl.keystore.certificate.chain: the certificate .* expired on "):
        server_context(inline.get, lambda: end.timestamp() + 1)
