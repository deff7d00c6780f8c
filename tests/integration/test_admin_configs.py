"""IncrementalAlterConfigs APPEND / SUBTRACT on list configs and the deprecated topic configs Kafka 3.9 still
accepts, through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient (issue 12, item 12)."""

from __future__ import annotations

import uuid

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

from .broker import Broker

T = 15
LONG_MAX = str(2**63 - 1)


def _admin(b: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _topic(a: AdminClient, config: dict[str, str] | None = None) -> str:
    t = f"cfg-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(t, 1, 1, config=config or {})])[t].result(T)
    return t


def _describe(a: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return a.describe_configs([res])[res].result(T)


def _incremental(a: AdminClient, topic: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    a.incremental_alter_configs([res])[res].result(T)


def _error(fn: object, *args: object) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        fn(*args)  # type: ignore[operator]
    return e.value.args[0]


APPEND, SUBTRACT, SET = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT, AlterConfigOpType.SET


@pytest.mark.parametrize("initial,op,value,expected", [
    (None, APPEND, "compact", "delete,compact"),  # onto the default (ConfigAdminManager: the key's default)
    ("delete", APPEND, "compact", "delete,compact"),
    ("compact", APPEND, "compact", "compact"),  # already there: not added twice
    ("compact", APPEND, "delete,compact", "compact,delete"),
    ("delete,compact", SUBTRACT, "delete", "compact"),
    ("compact", SUBTRACT, "delete", "compact"),  # not there: nothing to remove
    (None, SUBTRACT, "compact", "delete"),
    ("delete", SUBTRACT, "delete", ""),  # an empty list is a valid cleanup.policy in Kafka 3.9
    ("compact,delete", SUBTRACT, "compact,delete", ""),
])
def test_append_and_subtract_on_cleanup_policy(shared_broker: Broker, initial: str | None, op: AlterConfigOpType,
                                               value: str, expected: str) -> None:
    a = _admin(shared_broker)
    t = _topic(a, {"cleanup.policy": initial} if initial is not None else None)
    _incremental(a, t, ("cleanup.policy", value, op))
    entry = _describe(a, t)["cleanup.policy"]
    assert entry.value == expected
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    shared_broker.assert_alive()


def test_append_on_a_list_config_with_an_empty_default(shared_broker: Broker) -> None:
    a = _admin(shared_broker)
    t = _topic(a)
    _incremental(a, t, ("leader.replication.throttled.replicas", "0:1", APPEND))
    _incremental(a, t, ("leader.replication.throttled.replicas", "0:2,0:1", APPEND))
    assert _describe(a, t)["leader.replication.throttled.replicas"].value == "0:1,0:2"
    _incremental(a, t, ("leader.replication.throttled.replicas", "0:1", SUBTRACT))
    assert _describe(a, t)["leader.replication.throttled.replicas"].value == "0:2"


@pytest.mark.parametrize("op", [APPEND, SUBTRACT])
def test_append_and_subtract_on_a_non_list_config_is_refused(shared_broker: Broker, op: AlterConfigOpType) -> None:
    a = _admin(shared_broker)
    t = _topic(a, {"retention.ms": "1000"})
    err = _error(_incremental, a, t, ("retention.ms", "2000", op))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in err.str() and "LIST" in err.str()
    assert _describe(a, t)["retention.ms"].value == "1000"  # nothing of the resource was applied


def test_append_and_subtract_with_kafka_python(shared_broker: Broker) -> None:
    from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource

    a = _admin(shared_broker)
    t = _topic(a)
    ka = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        res = ka.alter_configs([KConfigResource(ConfigResourceType.TOPIC, t,
                                                configs={"cleanup.policy": (AlterConfigOp.APPEND, "compact")})])
        assert "compact" in str(_describe(a, t)["cleanup.policy"].value), res
        assert _describe(a, t)["cleanup.policy"].value == "delete,compact"
        ka.alter_configs([KConfigResource(ConfigResourceType.TOPIC, t,
                                          configs={"cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})])
        assert _describe(a, t)["cleanup.policy"].value == "compact"
    finally:
        ka.close()


# ------------------------------------------------------------------------------ deprecated topic configs

DEPRECATED = {
    "message.format.version": ("3.0-IV1", "2.8"),  # KIP-724: ignored from inter.broker.protocol 3.0 on
    "message.downconversion.enable": ("true", "false"),
    "message.timestamp.difference.max.ms": (LONG_MAX, "60000"),  # KIP-937
}


def test_deprecated_configs_are_accepted_on_create_and_described_as_kafka_3_9(shared_broker: Broker) -> None:
    a = _admin(shared_broker)
    plain = _topic(a)
    described = _describe(a, plain)
    for name, (default, _value) in DEPRECATED.items():
        assert described[name].value == default, name
        assert described[name].is_default, name
    t = _topic(a, {name: value for name, (_d, value) in DEPRECATED.items()})
    described = _describe(a, t)
    for name, (_default, value) in DEPRECATED.items():
        assert described[name].value == value, name
        assert not described[name].is_default, name
    assert "is deprecated" in shared_broker.log_text() and "message.format.version" in shared_broker.log_text()


def test_deprecated_configs_are_accepted_by_alter_configs(shared_broker: Broker) -> None:
    a = _admin(shared_broker)
    t = _topic(a)
    res = ConfigResource(ConfigResource.Type.TOPIC, t, set_config={"message.format.version": "2.1",
                                                                   "retention.ms": "5000"})
    a.alter_configs([res])[res].result(T)
    assert _describe(a, t)["message.format.version"].value == "2.1"
    _incremental(a, t, ("message.downconversion.enable", "false", SET),
                 ("message.timestamp.difference.max.ms", "1000", SET))
    described = _describe(a, t)
    assert described["message.downconversion.enable"].value == "false"
    assert described["message.timestamp.difference.max.ms"].value == "1000"
    assert described["retention.ms"].value == "5000"


@pytest.mark.parametrize("name,value", [
    ("message.format.version", "not-a-version"),
    ("message.downconversion.enable", "maybe"),
    ("message.timestamp.difference.max.ms", "-5"),
])
def test_deprecated_configs_still_validate_their_values(shared_broker: Broker, name: str, value: str) -> None:
    a = _admin(shared_broker)
    t = f"cfg-{uuid.uuid4().hex[:8]}"
    err = _error(lambda: a.create_topics([NewTopic(t, 1, 1, config={name: value})])[t].result(T))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert name in err.str()
