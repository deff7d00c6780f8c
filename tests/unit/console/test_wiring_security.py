"""odradek.console.wiring.has_security: when the console stops serving anonymous users."""

from __future__ import annotations

from odradek.config import BrokerConfig
from odradek.console.wiring import has_security


def test_has_security() -> None:
    assert not has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092"}))
    assert has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"}))
    assert has_security(BrokerConfig({"listeners": "SSL://127.0.0.1:9093"}))
    assert has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092",
                                      "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}))
    # a listener named freely, mapped to a secure protocol
    assert has_security(BrokerConfig({"listeners": "CLIENT://127.0.0.1:9092",
                                      "listener.security.protocol.map": "CLIENT:SASL_SSL"}))
