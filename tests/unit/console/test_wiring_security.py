"""odradek.console.wiring.has_security: when the console stops serving anonymous users."""

from __future__ import annotations

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.console.wiring import has_security, login_token, metrics_need_login


def test_has_security() -> None:
    assert not has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092"}))
    assert has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"}))
    assert has_security(BrokerConfig({"listeners": "SSL://127.0.0.1:9093"}))
    assert has_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092",
                                      "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}))
    # a listener named freely, mapped to a secure protocol
    assert has_security(BrokerConfig({"listeners": "CLIENT://127.0.0.1:9092",
                                      "listener.security.protocol.map": "CLIENT:SASL_SSL"}))


def test_metrics_login_needs_a_way_to_log_in() -> None:
    plain = {"listeners": "PLAINTEXT://127.0.0.1:9092"}
    assert not metrics_need_login(BrokerConfig(plain))
    with pytest.raises(ConfigError, match="http.auth.token"):
        metrics_need_login(BrokerConfig({**plain, "http.metrics.auth.required": "true"}))
    assert metrics_need_login(BrokerConfig({**plain, "http.metrics.auth.required": "true",
                                            "http.auth.token": "a-long-random-token-value"}))
    with pytest.raises(ConfigError, match="Type:name"):
        BrokerConfig({**plain, "http.auth.token.principal": "console"}).get("http.auth.token.principal")


def test_login_token_warns_when_short(caplog: pytest.LogCaptureFixture) -> None:
    assert login_token(BrokerConfig({"http.auth.token": " "})) is None
    with caplog.at_level("WARNING", logger="odradek.console"):
        assert login_token(BrokerConfig({"http.auth.token": "short"})) == "short"
    assert "shorter than 16" in caplog.text and "short\n" not in caplog.text
