"""The client security a broker derives for its inter-broker listener (odradek.security.inter_broker):
Kafka's setting names, and a refusal (ConfigError) for what cannot authenticate."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from odradek.config import BrokerConfig, ConfigError
from odradek.security.inter_broker import inter_broker_security

from .tls_handshake import memory_handshake

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="pw";'


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, str]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1", common_name="broker0").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem"))
    return {"ssl.truststore.location": str(tmp_path / "ca.pem"), "ssl.keystore.location": str(tmp_path / "server.pem")}


def test_plaintext_listener() -> None:
    sec = inter_broker_security(BrokerConfig({}), "PLAINTEXT")
    assert (sec.protocol, sec.ssl_context, sec.uses_sasl) == ("PLAINTEXT", None, False)


def test_sasl_ssl_with_scram_from_the_listener_jaas(stores: dict[str, str]) -> None:
    cfg = BrokerConfig({**stores, "listener.security.protocol.map": "INTERNAL:SASL_SSL",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    sec = inter_broker_security(cfg, "INTERNAL")
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == ("SASL_SSL", "SCRAM-SHA-512", "broker", "pw")
    assert sec.ssl_context is not None and sec.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert sec.ssl_context.check_hostname  # ssl.endpoint.identification.algorithm=https by default


def test_endpoint_identification_can_be_turned_off(stores: dict[str, str]) -> None:
    cfg = BrokerConfig({**stores, "ssl.endpoint.identification.algorithm": ""})
    sec = inter_broker_security(cfg, "SSL")
    assert sec.ssl_context is not None and not sec.ssl_context.check_hostname


@pytest.mark.parametrize(("props", "match"), [
    ({}, "GSSAPI"),  # Kafka's default mechanism, not implemented
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "plain.sasl.jaas.config"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN",
      "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
     "username and password"),
])
def test_unusable_sasl_settings_are_refused(props: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        inter_broker_security(BrokerConfig(props), "SASL_PLAINTEXT")


def test_ssl_without_truststore_trusts_the_system_cas() -> None:
    sec = inter_broker_security(BrokerConfig({}), "SSL")
    assert sec.ssl_context is not None and sec.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_client_stores_reloaded_when_the_files_change(tmp_path: Path, stores: dict[str, str]) -> None:
    """A renewed CA in the trust store reaches the next inter-broker connection without a restart."""
    import time

    cfg = BrokerConfig({**stores, "listener.security.protocol.map": "INTERNAL:SSL"})
    sec = inter_broker_security(cfg, "INTERNAL")
    first = sec.current_ssl_context()
    assert first is sec.ssl_context
    new_ca = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    new_ca.issue_cert("127.0.0.1").configure_cert(server)
    assert first is not None and not memory_handshake(first, server)
    new_ca.cert_pem.write_to_path(stores["ssl.truststore.location"])
    time.sleep(1.1)  # the files are looked at once a second at most
    second = sec.current_ssl_context()
    assert second is not None and second is not first and memory_handshake(second, server)
    Path(stores["ssl.truststore.location"]).write_text("not a certificate")  # a broken file keeps the last good one
    time.sleep(1.1)
    assert sec.current_ssl_context() is second
