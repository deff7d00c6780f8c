"""odradek.server.client_metrics: the validation of KIP-714 client metrics subscriptions (Kafka's
ClientMetricsConfigs.validate)."""

from __future__ import annotations

import pytest

from odradek.config import ConfigError
from odradek.server.client_metrics import validate, validate_name


def test_valid_subscriptions_pass() -> None:
    validate({"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "100",
              "match": "client_id=app-.*,client_software_name=apache-kafka-java"})
    validate({"metrics": "", "interval.ms": "3600000", "match": ""})
    validate({})


@pytest.mark.parametrize("configs,message", [
    ({"interval.ms": "99"}, "interval must be between 100 and 3600000"),
    ({"interval.ms": "3600001"}, "interval must be between 100 and 3600000"),
    ({"interval.ms": "soon"}, "Not a number of type INT"),
    ({"match": "client_id"}, "Illegal client matching pattern: client_id"),
    ({"match": "host=.*"}, "Illegal client matching pattern: host=.*"),
    ({"match": "client_id="}, "Illegal client matching pattern: client_id="),
    ({"match": "client_id=(unclosed"}, "Illegal regex pattern: (unclosed"),
    ({"metric": "a."}, "Unknown client metrics configuration: metric"),
])
def test_kafkas_refusals(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.").replace("*", r"\*")):
        validate(configs)


def test_a_subscription_needs_a_name() -> None:
    with pytest.raises(ConfigError, match="must not be empty"):
        validate_name(" ")
