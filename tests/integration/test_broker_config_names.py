"""Every Kafka 4.4 broker config is known (issue 33): accepted, validated and described with Kafka's update
modes and errors, warned about where odradek does not act on it; the cluster-level ``min.insync.replicas``
(KIP-966, Kafka 4.1+); the old four-part ``message.format.version`` Kafka 3.x accepted. Driven through
confluent-kafka's AdminClient and, for the cluster default resource (named "", which confluent-kafka cannot
name), odradek's WireClient."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from odradek.client.wire import WireClient

from .broker import Broker

T = 15
BROKER = ConfigResource.Type.BROKER
SHARED_BROKER_OVERRIDES = {"sasl.kerberos.ticket.renew.jitter": "0.1"}


def _admin(b: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _set(a: AdminClient, name: str, value: str | None, op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
    res = ConfigResource(BROKER, "0", incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    a.incremental_alter_configs([res])[res].result(T)


def _error(fn: Any) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        fn()
    err: KafkaError = e.value.args[0]
    return err


def _describe_broker(a: AdminClient) -> dict[str, ConfigEntry]:
    res = ConfigResource(BROKER, "0")
    return a.describe_configs([res])[res].result(T)


def _default_resource(b: Broker, api: int, version: int, **fields: Any) -> Any:
    with WireClient(b.bootstrap) as c:
        return c.request(api, version, **fields)


def _describe_default(b: Broker) -> Any:
    from kio.schema.describe_configs.v4.request import DescribeConfigsResource
    from kio.static.primitive import i8

    resp = _default_resource(b, 32, 4, resources=(
        DescribeConfigsResource(resource_type=i8(4), resource_name="", configuration_keys=None),),
        include_synonyms=True, include_documentation=False)
    return resp.results[0]


def _alter_default(b: Broker, name: str, value: str | None, op: int = 0) -> tuple[int, str | None]:
    from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource
    from kio.static.primitive import i8

    resp = _default_resource(b, 44, 1, resources=(AlterConfigsResource(
        resource_type=i8(4), resource_name="", configs=(AlterableConfig(name=name, config_operation=i8(op), value=value),)),),
        validate_only=False)
    r = resp.responses[0]
    return int(r.error_code), r.error_message


def test_a_kafka_config_odradek_does_not_act_on_is_accepted_described_and_warned(shared_broker: Broker) -> None:
    """librdkafka's test 0081 sets sasl.kerberos.min.time.before.relogin on the broker resource."""
    a = _admin(shared_broker)
    res = ConfigResource(BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "60001"})
    a.alter_configs([res])[res].result(T)  # the legacy AlterConfigs librdkafka's test uses
    entry = _describe_broker(a)["sasl.kerberos.min.time.before.relogin"]
    assert entry.value == "60001" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not entry.is_read_only
    _set(a, "sasl.kerberos.min.time.before.relogin", None, AlterConfigOpType.DELETE)
    entry = _describe_broker(a)["sasl.kerberos.min.time.before.relogin"]
    assert entry.value == "60000" and entry.source == ConfigSource.DEFAULT_CONFIG.value  # Kafka 4.4's default
    log = shared_broker.log_text()
    assert ("broker config sasl.kerberos.min.time.before.relogin set to 60001 for broker 0: a Kafka setting "
            "odradek does not implement, ignored") in log
    # given at start-up: warned about, and described as the static value
    assert ("The configuration 'sasl.kerberos.ticket.renew.jitter' was supplied but odradek does not implement "
            "this Kafka broker setting") in log
    static = _describe_broker(a)["sasl.kerberos.ticket.renew.jitter"]
    assert static.value == "0.1" and static.source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_every_kafka_broker_config_is_described(shared_broker: Broker) -> None:
    from odradek.config_kafka import KAFKA_BROKER_CONFIGS

    described = _describe_broker(_admin(shared_broker))
    expected = {n for n, k in KAFKA_BROKER_CONFIGS.items() if not k.internal}
    assert expected - set(described) == set()
    assert {n for n, k in KAFKA_BROKER_CONFIGS.items() if k.internal} & set(described) == set()
    assert described["num.io.threads"].value == "8" and not described["num.io.threads"].is_read_only
    assert described["ssl.keystore.password"].is_sensitive and described["ssl.keystore.password"].value is None


@pytest.mark.parametrize("name,value,message", [
    ("broker.id", "5", "Cannot update these configs dynamically: [broker.id]"),
    ("process.roles", "broker", "Cannot update these configs dynamically: [process.roles]"),
    ("num.partitions", "3", "Cannot update these configs dynamically: [num.partitions]"),
    ("ssl.keystore.location", "/x", "These security configs can be dynamically updated only per-listener using "
                                     "the listener prefix: [ssl.keystore.location]"),
    ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    ("sasl.kerberos.min.time.before.relogin", "soon",
     "Invalid value soon for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG"),
    ("message.max.bytes", "-5", "Invalid value -5 for configuration message.max.bytes: Value must be at least 0"),
])
def test_refused_broker_changes_are_kafkas_errors(shared_broker: Broker, name: str, value: str,
                                                  message: str) -> None:
    err = _error(lambda: _set(_admin(shared_broker), name, value))
    assert (err.code(), err.str()) == (KafkaError.INVALID_REQUEST, message)


def test_the_cluster_default_refuses_per_broker_configs(shared_broker: Broker) -> None:
    assert _alter_default(shared_broker, "sasl.kerberos.min.time.before.relogin", "1") == (
        42, "Cannot update these configs at default cluster level, broker id must be specified: "
            "[sasl.kerberos.min.time.before.relogin]")
    assert _alter_default(shared_broker, "num.io.threads", "4") == (0, None)  # cluster-wide
    assert _alter_default(shared_broker, "num.io.threads", None, op=1) == (0, None)


def test_the_cluster_level_min_insync_replicas_is_described(shared_broker: Broker) -> None:
    """Kafka 4.1+ (KIP-966): describing the cluster's broker configs lists the cluster-level
    min.insync.replicas, which a broker's own description shows as its DYNAMIC_DEFAULT_BROKER_CONFIG
    value and which cannot be removed while ELR is on."""
    result = _describe_default(shared_broker)
    assert result.error_code == 0
    entries = {e.name: e for e in result.configs}
    assert set(entries) == {"min.insync.replicas"}  # only what is set as the cluster default
    mir = entries["min.insync.replicas"]
    assert (mir.value, int(mir.config_source), mir.read_only) == ("1", 3, False)
    assert [(s.name, s.value, int(s.source)) for s in mir.synonyms] == [("min.insync.replicas", "1", 3)]
    entry = _describe_broker(_admin(shared_broker))["min.insync.replicas"]
    assert entry.value == "1" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert _alter_default(shared_broker, "min.insync.replicas", None, op=1) == (
        40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    assert _alter_default(shared_broker, "min.insync.replicas", "1") == (0, None)


def test_a_static_min_insync_replicas_becomes_the_cluster_level_value(make_broker: Any) -> None:
    b = make_broker({"min.insync.replicas": "2"})
    entries = {e.name: (e.value, int(e.config_source)) for e in _describe_default(b).configs}
    assert entries == {"min.insync.replicas": ("2", 3)}  # the cluster default, from the static value


@pytest.mark.parametrize("version", ["0.10.0.0", "0.10.0", "0.10.0-IV1", "2.8.1", "3.0-IV1"])
def test_old_message_format_versions_are_accepted_as_kafka_3_did(shared_broker: Broker, version: str) -> None:
    """librdkafka's test 0092 sets message.format.version=0.10.0.0 on a topic with AlterConfigs."""
    a = _admin(shared_broker)
    t = f"mfv-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(t, 1, 1)])[t].result(T)
    res = ConfigResource(ConfigResource.Type.TOPIC, t, set_config={"message.format.version": version})
    a.alter_configs([res])[res].result(T)


@pytest.mark.parametrize("version", ["bogus", "4.0", "0.10", "9.9-IV0"])
def test_unknown_message_format_versions_are_refused(shared_broker: Broker, version: str) -> None:
    a = _admin(shared_broker)
    t = f"mfv-{uuid.uuid4().hex[:8]}"
    err = _error(lambda: a.create_topics([NewTopic(t, 1, 1, config={"message.format.version": version})])[t]
                 .result(T))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == (f"Invalid value {version} for configuration message.format.version: Version `{version}` "
                         "is not a valid version")


def test_a_name_no_kafka_broker_knows_is_stored_as_kafka_does(shared_broker: Broker) -> None:
    """Kafka 4.4 stores a broker config name it does not know, and describes it without a value."""
    a = _admin(shared_broker)
    _set(a, "no.such.setting", "1")
    entry = _describe_broker(a)["no.such.setting"]
    assert (entry.value, entry.source, entry.is_sensitive, entry.is_read_only) == (
        None, ConfigSource.DYNAMIC_BROKER_CONFIG.value, True, True)
    assert "broker config no.such.setting set to [hidden] for broker 0: not a known config, ignored" in (
        shared_broker.log_text())
    _set(a, "no.such.setting", None, AlterConfigOpType.DELETE)
    assert "no.such.setting" not in _describe_broker(a)
