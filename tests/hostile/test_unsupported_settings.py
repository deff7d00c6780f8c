"""Settings the broker does not implement are named at start-up; security it cannot provide is refused
(issue 12, item 5).

A server.properties asking for security the broker cannot provide used to start a plaintext,
unauthenticated broker without a word. Now a TLS or SASL listener it cannot serve as configured (no
key store, no mechanism it implements), a cluster whose inter-broker listener is not PLAINTEXT, or an
authorizer it does not implement makes the broker refuse to start (exit code 2, the setting named in
its log); any other
setting it does not implement gets a warning naming it: "not implemented, ignored" for Kafka broker
settings, "unknown" for names that are not Kafka broker settings at all.
"""

from __future__ import annotations

import pytest
from integration.broker import Broker, BrokerError, BrokerFactory, free_port


def test_unimplemented_and_unknown_settings_are_named(make_broker: BrokerFactory) -> None:
    broker: Broker = make_broker(overrides={
        "ssl.keystore.location": "/etc/kafka/broker.jks",  # implemented: not named (no SSL listener uses it)
        "sasl.kerberos.service.name": "kafka",
        "delegation.token.max.lifetime.ms": "604800000",
        "no.such.setting": "1",
        "num.partitions": "2",  # implemented: not named
    })
    text = broker.log_text()
    warnings = [line for line in text.splitlines() if " WARNING " in line]
    for name in ("sasl.kerberos.service.name", "delegation.token.max.lifetime.ms"):
        assert any(f"'{name}'" in w and "not implemented, ignored" in w for w in warnings), (name, warnings)
    assert any("'no.such.setting'" in w and "unknown" in w for w in warnings), warnings
    assert not any("'num.partitions'" in w or "'ssl.keystore.location'" in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"listeners": "SSL://127.0.0.1:{port}"}, "ssl.keystore.location"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}"}, "sasl.enabled.mechanisms"),
        ({"listeners": "CLIENT://127.0.0.1:{port}", "listener.security.protocol.map": "CLIENT:SASL_SSL",
          "sasl.enabled.mechanisms": "PLAIN"}, "ssl.keystore.location"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN"},
         "plain.sasl.jaas.config"),
        # an inter-broker protocol no listener has (Kafka's KafkaConfig check)
        ({"zookeeper.connect": "127.0.0.1:1", "broker.id": "1", "security.inter.broker.protocol": "SSL"},
         "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
        ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name"),
    ],
    ids=["ssl-without-keystore", "sasl-without-mechanism", "mapped-listener", "plain-without-users", "inter-broker",
         "unknown-authorizer"],
)
def test_security_that_is_not_built_is_refused(
    make_broker: BrokerFactory, overrides: dict[str, str], named: str
) -> None:
    port = free_port()
    broker: Broker = make_broker(
        overrides={k: v.format(port=port) for k, v in overrides.items()}, start=False
    )
    broker.port = port
    with pytest.raises(BrokerError, match="during start-up"):
        broker.start(timeout=60)
    assert broker.exit_codes == [2]
    errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
    assert any(named in line for line in errors), errors
