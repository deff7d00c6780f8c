"""Settings the broker does not implement are named at start-up; security it cannot provide is refused
(issue 12, item 5).

A server.properties asking for TLS, SASL or an authorizer used to start a plaintext, unauthenticated,
unauthorised broker without a word. Now a listener whose security protocol is not built, or an
authorizer, makes the broker refuse to start (exit code 2, the setting named in its log); any other
setting it does not implement gets a warning naming it: "not implemented, ignored" for Kafka broker
settings, "unknown" for names that are not Kafka broker settings at all.
"""

from __future__ import annotations

import pytest
from integration.broker import Broker, BrokerError, BrokerFactory, free_port


def test_unimplemented_and_unknown_settings_are_named(make_broker: BrokerFactory) -> None:
    broker: Broker = make_broker(overrides={
        "ssl.keystore.location": "/etc/kafka/broker.jks",
        "sasl.enabled.mechanisms": "PLAIN",
        "delegation.token.max.lifetime.ms": "604800000",
        "no.such.setting": "1",
        "num.partitions": "2",  # implemented: not named
    })
    text = broker.log_text()
    warnings = [line for line in text.splitlines() if " WARNING " in line]
    for name in ("ssl.keystore.location", "sasl.enabled.mechanisms", "delegation.token.max.lifetime.ms"):
        assert any(f"'{name}'" in w and "not implemented, ignored" in w for w in warnings), (name, warnings)
    assert any("'no.such.setting'" in w and "unknown" in w for w in warnings), warnings
    assert not any("'num.partitions'" in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"listeners": "SSL://127.0.0.1:{port}"}, "SSL"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}"}, "SASL_PLAINTEXT"),
        ({"listeners": "CLIENT://127.0.0.1:{port}", "listener.security.protocol.map": "CLIENT:SASL_SSL"},
         "SASL_SSL"),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name"),
    ],
    ids=["ssl-listener", "sasl-listener", "mapped-listener", "inter-broker", "authorizer"],
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
        broker.start(timeout=15)
    assert broker.exit_codes == [2]
    errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
    assert any(named in line for line in errors), errors
