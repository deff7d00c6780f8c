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


@pytest.mark.parametrize("name", ["../brokers/0", "a/b", "..", ".", "x" * 250, "sp ace", "nul\x00", "é"])
def test_names_that_are_not_plain_znode_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="Invalid client metrics subscription name"):
        validate_name(name)


def test_a_hostile_name_never_reaches_the_store() -> None:
    """IncrementalAlterConfigs and DescribeConfigs answer INVALID_REQUEST before reading the store."""
    from types import SimpleNamespace

    from odradek.protocol import errors
    from odradek.server.handlers import describe_configs, incremental_alter_configs
    from odradek.server.request_context import RequestContext

    from .test_request_context import FakeConnection, services

    def untouchable(*_: object) -> dict[str, str]:
        raise AssertionError("the store was read")

    svc = services(topics=SimpleNamespace(client_metrics_configs=untouchable))
    res = SimpleNamespace(resource_type=16, resource_name="../brokers/0", configuration_keys=None,
                          configs=[SimpleNamespace(name="interval.ms", config_operation=0, value="1000")])
    alter = incremental_alter_configs.handle(RequestContext(svc, FakeConnection(), 44, 1, 1, "c"),
                                             SimpleNamespace(resources=[res], validate_only=False))
    assert alter.responses[0].error_code == errors.INVALID_REQUEST
    desc = describe_configs.handle(RequestContext(svc, FakeConnection(), 32, 4, 1, "c"),
                                   SimpleNamespace(resources=[res], include_synonyms=False, include_documentation=False))
    assert desc.results[0].error_code == errors.INVALID_REQUEST and desc.results[0].configs == ()
