"""Odradek's own clients with security (odradek.client.secure_connect, odradek.security.sasl_client)
against a real broker: the blocking WireClient and the asyncio connector over SASL_SSL with PLAIN
and SCRAM-SHA-256/512 and over mutual TLS; a wrong password and a missing client certificate
are refused with the broker's error."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.client.async_wire import AsyncWireClient
from odradek.client.secure_connect import connector
from odradek.client.wire import WireClient
from odradek.protocol import errors
from odradek.security.inter_broker import ClientSecurity
from odradek.security.sasl_client import SaslClientError

from .security import ADMIN_PASSWORD, ALICE_PASSWORD, SecureBroker, confluent_sasl, make_certs, secure_broker

SCRAM_PASSWORD = "carol-secret"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("client")
    s = secure_broker(base / "broker", make_certs(base / "certs"))
    admin = AdminClient(confluent_sasl(s, "PLAIN", "admin", ADMIN_PASSWORD))
    for f in admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     SCRAM_PASSWORD.encode()),
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     SCRAM_PASSWORD.encode()),
    ]).values():
        f.result(15)
    yield s
    s.broker.stop()


def _ctx(sb: SecureBroker, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def _metadata_brokers(client: WireClient) -> int:
    resp = client.request(3, 9, topics=None, allow_auto_topic_creation=False,
                          include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    return len(resp.brokers)


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", ALICE_PASSWORD),
    ("SCRAM-SHA-256", "carol", SCRAM_PASSWORD),
    ("SCRAM-SHA-512", "dave", SCRAM_PASSWORD),
])
def test_blocking_client_over_sasl_ssl(sb: SecureBroker, mechanism: str, user: str, password: str) -> None:
    with WireClient(sb.sasl_ssl, 10, security=ClientSecurity("SASL_SSL", _ctx(sb), mechanism, user, password)) as c:
        assert _metadata_brokers(c) == 1


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "alice"), ("SCRAM-SHA-256", "carol"),
                                                 ("SCRAM-SHA-512", "nobody")])
def test_wrong_password_is_refused(sb: SecureBroker, mechanism: str, user: str) -> None:
    with pytest.raises(SaslClientError, match=f"error {errors.SASL_AUTHENTICATION_FAILED}"):
        WireClient(sb.sasl_ssl, 10, security=ClientSecurity("SASL_SSL", _ctx(sb), mechanism, user, "wrong"))


def test_blocking_client_over_mutual_tls(sb: SecureBroker) -> None:
    ctx = _ctx(sb, sb.certs.client_cert, sb.certs.client_key)
    with WireClient(sb.ssl, 10, security=ClientSecurity("SSL", ctx)) as c:
        assert _metadata_brokers(c) == 1
    # ssl.client.auth=required: no certificate, no connection
    with pytest.raises((ssl.SSLError, ConnectionError)):
        c = WireClient(sb.ssl, 10, security=ClientSecurity("SSL", _ctx(sb)))
        _metadata_brokers(c)


@pytest.mark.parametrize("listener", ["sasl_ssl", "ssl"])
def test_asyncio_connector(sb: SecureBroker, listener: str) -> None:
    if listener == "ssl":
        sec = ClientSecurity("SSL", _ctx(sb, sb.certs.client_cert, sb.certs.client_key))
        address = sb.ssl
    else:
        sec = ClientSecurity("SASL_SSL", _ctx(sb), "SCRAM-SHA-512", "dave", SCRAM_PASSWORD)
        address = sb.sasl_ssl
    host, _, port = address.rpartition(":")

    async def run() -> int:
        client = AsyncWireClient(host, int(port), "t", 10.0, connector(sec, "t"))
        try:
            resp = await client.request(18, 3, {"client_software_name": "odradek", "client_software_version": "1"})
        finally:
            client.close()
        return int(resp.error_code)

    assert asyncio.run(run()) == errors.NONE


def test_cli_broker_default_over_sasl_ssl_with_command_config(sb: SecureBroker, tmp_path: Path) -> None:
    """``configs --entity-default`` goes through WireClient (confluent-kafka cannot name the default):
    --command-config gives it TLS and SASL too."""
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="dave" password="{SCRAM_PASSWORD}";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={sb.certs.ca}\n")
    base = [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", sb.sasl_ssl, "--command-config",
            str(props), "--entity-type", "brokers", "--entity-default"]
    r = subprocess.run([*base, "--alter", "--add-config", "log.retention.ms=7200000"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([*base, "--describe"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "log.retention.ms=7200000" in r.stdout, (r.stdout, r.stderr)
    props.write_text(props.read_text().replace(SCRAM_PASSWORD, "wrong"))
    r = subprocess.run([*base, "--describe"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert any(line.startswith("Error: SaslAuthenticate refused (error 58)") for line in r.stderr.splitlines()), r.stderr
