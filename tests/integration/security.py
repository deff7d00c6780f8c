"""Certificates made at test time (trustme) and a broker with PLAINTEXT, SSL (mutual TLS) and
SASL_SSL listeners, for the security tests."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme

from .broker import HOST, Broker, free_port

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" user_alice="{ALICE_PASSWORD}";'
)


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA the broker trusts (PEM)
    server: Path  # the broker's key and chain
    client_cert: Path
    client_key: Path
    client_pem: Path  # key and certificate in one file (kafka-python, aiokafka)
    rogue_cert: Path  # a client certificate from a CA the broker does not trust
    rogue_key: Path
    rogue_ca: Path
    expired_cert: Path  # issued by the trusted CA, expired yesterday
    expired_key: Path


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Odradek Test CA")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="broker0")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Odradek",
                           organization_unit_name="tests")
    rogue_ca = trustme.CA(organization_name="Rogue CA")
    rogue = rogue_ca.issue_cert("mallory@example.com", common_name="alice")
    now = datetime.datetime.now(datetime.UTC)
    expired = ca.issue_cert("old@example.com", common_name="alice", not_before=now - datetime.timedelta(days=30),
                            not_after=now - datetime.timedelta(days=1))
    paths = Certs(d / "ca.pem", d / "server.pem", d / "client.crt", d / "client.key", d / "client.pem",
                  d / "rogue.crt", d / "rogue.key", d / "rogue-ca.pem", d / "expired.crt", d / "expired.key")
    expired.cert_chain_pems[0].write_to_path(str(paths.expired_cert))
    expired.private_key_pem.write_to_path(str(paths.expired_key))
    ca.cert_pem.write_to_path(str(paths.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths.server))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths.client_pem))
    rogue.cert_chain_pems[0].write_to_path(str(paths.rogue_cert))
    rogue.private_key_pem.write_to_path(str(paths.rogue_key))
    rogue_ca.cert_pem.write_to_path(str(paths.rogue_ca))
    return paths


@dataclass
class SecureBroker:
    broker: Broker
    ssl_port: int
    sasl_ssl_port: int
    certs: Certs

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap

    @property
    def ssl(self) -> str:
        return f"{HOST}:{self.ssl_port}"

    @property
    def sasl_ssl(self) -> str:
        return f"{HOST}:{self.sasl_ssl_port}"


def secure_broker(base: Path, certs: Certs, extra: dict[str, str] | None = None) -> SecureBroker:
    port, ssl_port, sasl_port = free_port(), free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://{HOST}:{port},SSL://{HOST}:{ssl_port},SASL_SSL://{HOST}:{sasl_port}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "odradek.authentication.timeout.ms": "1500",
        "connection.failed.authentication.delay.ms": "100",
    }
    overrides.update(extra or {})
    b = Broker(base, overrides, port=port, name="secure")
    b.start()
    return SecureBroker(b, ssl_port, sasl_port, certs)


def confluent_ssl(sb: SecureBroker, *, cert: Path | None = None, key: Path | None = None) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap.servers": sb.ssl, "security.protocol": "SSL",
                               "ssl.ca.location": str(sb.certs.ca)}
    conf["ssl.certificate.location"] = str(cert or sb.certs.client_cert)
    conf["ssl.key.location"] = str(key or sb.certs.client_key)
    return conf


def confluent_sasl(sb: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": sb.sasl_ssl, "security.protocol": "SASL_SSL", "ssl.ca.location": str(sb.certs.ca),
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
