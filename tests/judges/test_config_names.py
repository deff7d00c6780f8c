"""Odradek knows every broker and topic config Kafka 4.4 knows (issue 33), with Kafka's types, defaults, valid
values and dynamic update modes: read from Kafka 4.4's own jars at test time, so a name Kafka has and
odradek lacks (or a fact that differs) fails here. Then the same config changes and descriptions on a running
Kafka 4.4 and on odradek, compared: error codes and messages, and the shape of the cluster default resource."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka_peer
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from integration.broker import Broker, free_port

from odradek import config
from odradek.client.wire import WireClient

from .conftest import Tool

# Our own printer of the facts Kafka's ConfigDefs hold (names, types, defaults, validators, internal flags,
# update modes, topic config synonyms), one tab-separated line each; run by java's source-file mode.
_PRINTER = r"""
import java.util.*;
import org.apache.kafka.common.config.ConfigDef;
public class PrintConfigs {
  static String dflt(ConfigDef.ConfigKey k) {
    if (!k.hasDefault()) return "!";
    if (k.defaultValue == null) return "~";
    String s = ConfigDef.convertToString(k.defaultValue, k.type);
    return s.isEmpty() ? "\"\"" : s;
  }
  static String valid(ConfigDef.ConfigKey k) { return k.validator == null ? "" : k.validator.toString(); }
  public static void main(String[] args) {
    Map<String, String> modes = org.apache.kafka.server.config.DynamicBrokerConfig.dynamicConfigUpdateModes();
    Map<String, ConfigDef.ConfigKey> broker = org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.configKeys();
    for (String n : new TreeSet<>(broker.keySet())) {
      ConfigDef.ConfigKey k = broker.get(n);
      System.out.println(String.join("\t", "broker", n, k.type.name().toLowerCase(), dflt(k),
          modes.getOrDefault(n, "read-only"), valid(k), Boolean.toString(k.internalConfig)));
    }
    var synonyms = org.apache.kafka.server.config.ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS;
    Map<String, ConfigDef.ConfigKey> topic = org.apache.kafka.storage.internals.log.LogConfig.configKeys();
    for (String n : new TreeSet<>(topic.keySet())) {
      ConfigDef.ConfigKey k = topic.get(n);
      List<String> names = new ArrayList<>();
      for (var s : synonyms.getOrDefault(n, List.of())) names.add(s.name());
      System.out.println(String.join("\t", "topic", n, k.type.name().toLowerCase(), dflt(k), String.join(",", names),
          valid(k), Boolean.toString(k.internalConfig)));
    }
    System.out.println("security\t" + String.join(",", new TreeSet<>(
        org.apache.kafka.server.config.DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS)));
  }
}
"""


@pytest.fixture(scope="module")
def kafka_facts(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    src = tmp_path_factory.mktemp("printer") / "PrintConfigs.java"
    src.write_text(_PRINTER)
    proc = subprocess.run([kafka_peer.find_java(), "-cp", kafka_peer.classpath(), str(src)], capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    facts: dict[str, dict[str, list[str]]] = {"broker": {}, "topic": {}, "security": {}}
    for line in proc.stdout.splitlines():
        kind, name, *rest = line.split("\t")
        facts[kind][name] = rest
    assert len(facts["broker"]) > 300 and len(facts["topic"]) > 30
    return facts


def _default(text: str) -> str | None:
    return None if text in ("!", "~") else "" if text == '""' else text


def test_every_kafka_broker_config_is_known(kafka_facts: dict[str, dict[str, list[str]]]) -> None:
    missing = sorted(set(kafka_facts["broker"]) - set(config.BROKER_CONFIGS))
    assert missing == [], f"Kafka 4.4 broker configs odradek does not know: {missing}"


def test_the_table_is_kafkas(kafka_facts: dict[str, dict[str, list[str]]]) -> None:
    """odradek.config_kafka holds Kafka 4.4's facts exactly: type, default, mode, validator, internal."""
    from odradek.config_kafka import KAFKA_BROKER_CONFIGS

    kafka = {n: (t, _default(d), d == "!", m, v, i == "true") for n, (t, d, m, v, i) in kafka_facts["broker"].items()}
    ours = {n: (k.type, k.default, k.required, k.mode, k.valid_doc, k.internal) for n, k in KAFKA_BROKER_CONFIGS.items()}
    assert ours == kafka


def test_configs_odradek_does_not_act_on_have_kafkas_facts(kafka_facts: dict[str, dict[str, list[str]]]) -> None:
    for name, (typ, default, mode, valid, internal) in kafka_facts["broker"].items():
        d = config.BROKER_CONFIGS[name]
        assert d.internal == (internal == "true"), name
        # never more changeable than in Kafka: a read-only config refused, a per-broker one not cluster-wide
        if mode == "read-only":
            assert d.dynamic == config.READ_ONLY, name
        elif mode == "per-broker":
            assert d.dynamic != config.CLUSTER_WIDE, name
        if not d.implemented:
            assert (d.type_name, d.default, d.dynamic, d.valid_doc, d.sensitive) == (
                typ, _default(default), mode, valid, typ == "password"), name


def test_every_kafka_topic_config_is_known(kafka_facts: dict[str, dict[str, list[str]]]) -> None:
    missing = sorted(set(kafka_facts["topic"]) - set(config.TOPIC_CONFIGS))
    assert missing == [], f"Kafka 4.4 topic configs odradek does not know: {missing}"
    for name, (typ, default, synonyms, valid, internal) in kafka_facts["topic"].items():
        d = config.TOPIC_CONFIGS[name]
        assert (d.type_name, config.TOPIC_SYNONYMS[name], d.internal) == (
            typ, tuple(s for s in synonyms.split(",") if s), internal == "true"), name
        if not d.implemented:
            assert (d.default, d.valid_doc) == (_default(default), valid), name
        for synonym in config.TOPIC_SYNONYMS[name]:
            assert synonym in config.BROKER_CONFIGS, synonym


def test_the_per_listener_security_configs_are_kafkas(kafka_facts: dict[str, dict[str, list[str]]]) -> None:
    (kafka,) = kafka_facts["security"]
    assert sorted(config.DYNAMIC_SECURITY_CONFIGS) == kafka.split(",")


# ------------------------------------------------------------------------------------------------ the peer


@pytest.fixture(scope="module")
def kafka44(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = kafka_peer.KafkaCluster(tmp_path_factory.mktemp("kafka44"), 1, ports=[free_port()],
                                      controller_ports=[free_port()], heap=("-Xmx512M", "-Xms512M"))
    with cluster:
        yield cluster.bootstrap


def _broker_id(bootstrap: str) -> str:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return str(next(iter(md.brokers)))


def _alter(bootstrap: str, entity: str, name: str, value: str | None, op: int = 0) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of one broker config, on the wire (the cluster default is named "")."""
    from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource
    from kio.static.primitive import i8

    with WireClient(bootstrap) as c:
        resp = c.request(44, 1, resources=(AlterConfigsResource(resource_type=i8(4), resource_name=entity, configs=(
            AlterableConfig(name=name, config_operation=i8(op), value=value),)),), validate_only=True)
    r = resp.responses[0]
    return int(r.error_code), (r.error_message or None)


def _describe_default(bootstrap: str) -> list[tuple[Any, ...]]:
    from kio.schema.describe_configs.v4.request import DescribeConfigsResource
    from kio.static.primitive import i8

    with WireClient(bootstrap) as c:
        resp = c.request(32, 4, resources=(DescribeConfigsResource(resource_type=i8(4), resource_name="",
                                                                   configuration_keys=None),),
                         include_synonyms=True, include_documentation=False)
    (r,) = resp.results
    return [(e.name, e.value, e.read_only, int(e.config_source), e.is_sensitive,
             [(s.name, s.value, int(s.source)) for s in e.synonyms]) for e in r.configs]


_CHANGES = [
    ("broker", "sasl.kerberos.min.time.before.relogin", "60000"),
    ("broker", "num.io.threads", "4"),
    ("broker", "broker.id", "7"),
    ("broker", "log.dirs", "/elsewhere"),
    ("broker", "num.partitions", "3"),
    ("default", "auto.create.topics.enable", "false"),
    ("default", "log.retention.hours", "5"),
    ("broker", "ssl.keystore.location", "/x"),
    ("broker", "num.io.threads", "0"),
    ("broker", "num.io.threads", "many"),
    ("broker", "message.max.bytes", "-5"),
    ("broker", "background.threads", "0"),
    ("broker", "log.cleaner.io.buffer.load.factor", "0.5"),
    ("broker", "min.insync.replicas", "0"),
    ("default", "sasl.kerberos.min.time.before.relogin", "60000"),
    ("default", "num.network.threads", "2"),
    ("default", "process.roles", "broker"),
    ("default", "ssl.truststore.type", "PEM"),
]


@pytest.mark.timeout(300)
def test_broker_config_changes_are_answered_as_kafka_4_4_does(kafka44: str, odradek: Broker) -> None:
    for target in (kafka44, odradek.bootstrap):
        ids = {"broker": _broker_id(target), "default": ""}
        answers = [_alter(target, ids[entity], name, value) for entity, name, value in _CHANGES]
        if target == kafka44:
            expected = answers
        else:
            assert dict(zip(_CHANGES, answers, strict=True)) == dict(zip(_CHANGES, expected, strict=True))


@pytest.mark.timeout(300)
def test_the_cluster_default_is_described_as_kafka_4_4_does(kafka44: str, odradek: Broker) -> None:
    """Kafka 4.1+ lists the cluster-level min.insync.replicas (KIP-966) as the cluster's only default."""
    assert _describe_default(odradek.bootstrap) == _describe_default(kafka44) == [
        ("min.insync.replicas", "1", False, 3, False, [("min.insync.replicas", "1", 3)])]


@pytest.mark.timeout(300)
def test_message_format_version_on_kafka_4_4_is_refused(kafka44: str) -> None:
    """The fact behind odradek's choice (docstring of odradek.config): Kafka 4.4 no longer knows the topic
    config; odradek still accepts it as Kafka 3.x did (tests/integration/test_broker_config_names.py)."""
    a = AdminClient({"bootstrap.servers": kafka44})
    t = f"mfv-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(t, 1, 1)])[t].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry("message.format.version", "0.10.0.0", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        a.incremental_alter_configs([res])[res].result(30)
    assert e.value.args[0].str() == "Unknown topic config name: message.format.version"


@pytest.mark.timeout(300)
def test_kafka_configs_tool_sees_the_same_on_both(kafka44: str, odradek: Broker, kafka: Tool) -> None:
    """Kafka's own kafka-configs: librdkafka 0081's broker config set per broker, and the cluster default
    described, print the same on Kafka 4.4 and on odradek."""
    outputs = []
    for target in (kafka44, odradek.bootstrap):
        broker = ["--bootstrap-server", target, "--entity-type", "brokers"]
        node = _broker_id(target)
        done = kafka("kafka-configs", *broker, "--entity-name", node, "--alter", "--add-config",
                     "sasl.kerberos.min.time.before.relogin=60001").stdout.strip()
        assert done == f"Completed updating config for broker {node}."
        described = kafka("kafka-configs", *broker, "--entity-name", node, "--describe").stdout
        assert ("sasl.kerberos.min.time.before.relogin=60001 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                "sasl.kerberos.min.time.before.relogin=60001, DEFAULT_CONFIG:sasl.kerberos.min.time.before.relogin"
                "=60000}") in described, described
        kafka("kafka-configs", *broker, "--entity-name", node, "--alter", "--delete-config",
              "sasl.kerberos.min.time.before.relogin")
        refused = kafka("kafka-configs", *broker, "--entity-default", "--alter", "--add-config",
                        "sasl.kerberos.min.time.before.relogin=60001", ok=False)
        assert refused.returncode != 0
        assert ("InvalidRequestException: Cannot update these configs at default cluster level, broker id must be "
                "specified: [sasl.kerberos.min.time.before.relogin]") in refused.stdout + refused.stderr
        outputs.append(kafka("kafka-configs", *broker, "--entity-default", "--describe").stdout)
    assert outputs[0] == outputs[1] == (
        "Default configs for brokers in the cluster are:\n"
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}\n")


@pytest.mark.timeout(300)
def test_a_brokers_description_has_kafkas_shape(kafka44: str, odradek: Broker) -> None:
    """DescribeConfigs of one broker: every config Kafka 4.4 describes is described here, and those odradek
    does not act on alike (value, source, read-only, sensitive) where Kafka has them at their defaults."""
    described = {}
    for target in (kafka44, odradek.bootstrap):
        res = ConfigResource(ConfigResource.Type.BROKER, _broker_id(target))
        admin = AdminClient({"bootstrap.servers": target})
        entries = admin.describe_configs([res])[res].result(30)
        described[target] = {n: (e.value, e.source, e.is_read_only, e.is_sensitive) for n, e in entries.items()}
    kafka, ours = described[kafka44], described[odradek.bootstrap]
    assert set(kafka) - set(ours) == set()
    # the peer's own settings (static, source 4) aside: each at its default on both
    differ = {n: (kafka[n], ours[n]) for n in kafka
              if not config.BROKER_CONFIGS[n].implemented and kafka[n][1] == 5 and kafka[n] != ours[n]}
    assert differ == {}
