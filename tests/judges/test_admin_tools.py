"""Kafka 4.4's admin tools against one Odradek broker, run as a user runs bin/kafka-*.sh, judged by what they
print: kafka-topics, kafka-configs, kafka-get-offsets, kafka-delete-records, kafka-log-dirs, kafka-features,
kafka-broker-api-versions, kafka-console-producer and kafka-console-consumer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from integration.broker import Broker
from integration.clients import create_topic, unique
from waiting import wait_until

from .conftest import Tool

pytestmark = pytest.mark.timeout(240)


def boot(b: Broker) -> tuple[str, str]:
    return "--bootstrap-server", b.bootstrap


def produce(b: Broker, topic: str, n: int, partition: int = 0, key: bytes | None = None,
            timestamp: int | None = None) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(n):
        kw = {"timestamp": timestamp + i} if timestamp is not None else {}
        p.produce(topic, value=f"v{i}".encode(), key=key, partition=partition, **kw)
    assert p.flush(30) == 0


def test_kafka_topics_create_describe_alter_delete(kafka: Tool, odradek: Broker) -> None:
    topic = unique("kt")
    out = kafka("kafka-topics", *boot(odradek), "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", "1", "--config", "retention.ms=100000", "--config", "cleanup.policy=delete")
    assert out.stdout.strip() == f"Created topic {topic}."
    listed = kafka("kafka-topics", *boot(odradek), "--list").stdout.split()
    assert topic in listed

    desc = kafka("kafka-topics", *boot(odradek), "--describe", "--topic", topic).stdout.splitlines()
    head = desc[0]
    assert head.startswith(f"Topic: {topic}\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\t" in head
    assert re.search(r"Configs: .*retention\.ms=100000", head) and "cleanup.policy=delete" in head
    parts = [line.strip() for line in desc[1:] if line.strip()]
    assert [re.search(r"Partition: (\d+)", line).group(1) for line in parts] == ["0", "1", "2"]  # type: ignore[union-attr]
    for line in parts:  # DescribeTopicPartitions (API 75) answered: ELR empty, as on a Kafka 4 cluster without it
        assert line.endswith("Leader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr:"), line
    paged = kafka("kafka-topics", *boot(odradek), "--describe", "--topic", topic,
                  "--partition-size-limit-per-response", "1").stdout  # three pages, one partition each
    assert paged.splitlines()[1:] == desc[1:]

    kafka("kafka-topics", *boot(odradek), "--alter", "--topic", topic, "--partitions", "5")
    desc = kafka("kafka-topics", *boot(odradek), "--describe", "--topic", topic).stdout
    assert "PartitionCount: 5" in desc and "Partition: 4\t" in desc

    # Kafka's refusals, as its own brokers give them
    again = kafka("kafka-topics", *boot(odradek), "--create", "--topic", topic, "--partitions", "1", ok=False)
    assert again.returncode != 0 and f"Topic '{topic}' already exists" in again.stdout + again.stderr
    fewer = kafka("kafka-topics", *boot(odradek), "--alter", "--topic", topic, "--partitions", "2", ok=False)
    assert fewer.returncode != 0 and "InvalidPartitionsException" in fewer.stdout + fewer.stderr
    bad = kafka("kafka-topics", *boot(odradek), "--create", "--topic", unique("bad"), "--config",
                "retention.ms=soon", ok=False)
    assert bad.returncode != 0 and "Invalid value soon for configuration retention.ms" in bad.stdout

    kafka("kafka-topics", *boot(odradek), "--delete", "--topic", topic)
    wait_until(lambda: topic not in kafka("kafka-topics", *boot(odradek), "--list").stdout.split(), 30,
               "the deleted topic to leave the list")
    missing = kafka("kafka-topics", *boot(odradek), "--describe", "--topic", topic, ok=False)
    assert missing.returncode != 0 and f"Topic '{topic}' does not exist as expected" in missing.stdout + missing.stderr


def test_kafka_configs_topics_brokers_clients_users(kafka: Tool, odradek: Broker) -> None:
    topic = unique("kc")
    create_topic(odradek.bootstrap, topic, 1)
    ent = ("--entity-type", "topics", "--entity-name", topic)
    out = kafka("kafka-configs", *boot(odradek), *ent, "--alter", "--add-config", "retention.ms=3600000,max.message.bytes=65536")
    assert out.stdout.strip() == f"Completed updating config for topic {topic}."
    desc = kafka("kafka-configs", *boot(odradek), *ent, "--describe").stdout
    assert desc.splitlines()[0] == f"Dynamic configs for topic {topic} are:"
    assert "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, " \
           "DEFAULT_CONFIG:log.retention.hours=168}" in desc
    assert "max.message.bytes=65536" in desc
    kafka("kafka-configs", *boot(odradek), *ent, "--alter", "--delete-config", "max.message.bytes")
    desc = kafka("kafka-configs", *boot(odradek), *ent, "--describe").stdout
    assert "max.message.bytes" not in desc and "retention.ms=3600000" in desc
    every = kafka("kafka-configs", *boot(odradek), *ent, "--describe", "--all").stdout
    assert "cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" in every
    bad = kafka("kafka-configs", *boot(odradek), *ent, "--alter", "--add-config", "retention.ms=forever", ok=False)
    assert bad.returncode != 0 and "Invalid value forever for configuration retention.ms" in bad.stdout + bad.stderr

    broker_all = kafka("kafka-configs", *boot(odradek), "--entity-type", "brokers", "--entity-name", "0",
                       "--describe", "--all").stdout
    assert broker_all.splitlines()[0] == "All configs for broker 0 are:"
    assert "log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}" in broker_all
    kafka("kafka-configs", *boot(odradek), "--entity-type", "brokers", "--entity-default", "--alter",
          "--add-config", "max.connection.creation.rate=1000")
    dyn = kafka("kafka-configs", *boot(odradek), "--entity-type", "brokers", "--entity-default", "--describe").stdout
    assert "Default configs for brokers in the cluster are:" in dyn
    assert "max.connection.creation.rate=1000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
           "max.connection.creation.rate=1000}" in dyn
    kafka("kafka-configs", *boot(odradek), "--entity-type", "brokers", "--entity-default", "--alter",
          "--delete-config", "max.connection.creation.rate")

    client = unique("client")
    out = kafka("kafka-configs", *boot(odradek), "--entity-type", "clients", "--entity-name", client, "--alter",
                "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert out.stdout.strip() == f"Completed updating config for client {client}."
    quota = kafka("kafka-configs", *boot(odradek), "--entity-type", "clients", "--entity-name", client,
                  "--describe").stdout.strip()
    assert quota.startswith(f"Quota configs for client-id '{client}' are ")
    assert "producer_byte_rate=1048576.0" in quota and "consumer_byte_rate=2097152.0" in quota

    user = unique("alice")
    out = kafka("kafka-configs", *boot(odradek), "--entity-type", "users", "--entity-name", user, "--alter",
                "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    assert out.stdout.strip() == f"Completed updating config for user {user}."
    scram = kafka("kafka-configs", *boot(odradek), "--entity-type", "users", "--entity-name", user,
                  "--describe").stdout
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192" in scram


def test_kafka_get_offsets_all_specs(kafka: Tool, odradek: Broker) -> None:
    topic = unique("go")
    create_topic(odradek.bootstrap, topic, 2)
    base = 1_700_000_000_000
    produce(odradek, topic, 10, partition=0, timestamp=base)
    produce(odradek, topic, 3, partition=1, timestamp=base + 100)

    def offsets(*spec: str) -> dict[str, str]:
        out = kafka("kafka-get-offsets", *boot(odradek), "--topic", topic, *spec).stdout
        return {line.rsplit(":", 1)[0]: line.rsplit(":", 1)[1] for line in out.split()}

    assert offsets() == {f"{topic}:0": "10", f"{topic}:1": "3"}  # latest is the default
    assert offsets("--time", "latest") == {f"{topic}:0": "10", f"{topic}:1": "3"}
    assert offsets("--time", "-2") == {f"{topic}:0": "0", f"{topic}:1": "0"}
    assert offsets("--time", "earliest") == offsets("--time", "-2")
    assert offsets("--time", "max-timestamp") == {f"{topic}:0": "9", f"{topic}:1": "2"}
    assert offsets("--time", "earliest-local") == {f"{topic}:0": "0", f"{topic}:1": "0"}
    assert offsets("--time", str(base + 5)) == {f"{topic}:0": "5", f"{topic}:1": "0"}
    assert offsets("--time", str(base + 10_000)) == {}  # no record that late: Kafka prints no line
    assert offsets("--partitions", "1") == {f"{topic}:1": "3"}


def test_kafka_delete_records_then_earliest(kafka: Tool, odradek: Broker, tmp_path: Path) -> None:
    topic = unique("dr")
    create_topic(odradek.bootstrap, topic, 1)
    produce(odradek, topic, 20)
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 7}], "version": 1}))
    out = kafka("kafka-delete-records", *boot(odradek), "--offset-json-file", str(plan)).stdout
    assert f"partition: {topic}-0\tlow_watermark: 7" in out
    earliest = kafka("kafka-get-offsets", *boot(odradek), "--topic", topic, "--time", "-2").stdout.strip()
    assert earliest == f"{topic}:0:7"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 99}], "version": 1}))
    beyond = kafka("kafka-delete-records", *boot(odradek), "--offset-json-file", str(plan), ok=False)
    assert "OffsetOutOfRangeException" in beyond.stdout + beyond.stderr


def test_kafka_log_dirs_describe(kafka: Tool, odradek: Broker) -> None:
    topic = unique("ld")
    create_topic(odradek.bootstrap, topic, 2)
    produce(odradek, topic, 5)
    out = kafka("kafka-log-dirs", *boot(odradek), "--describe", "--topic-list", topic).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["version"] == 1
    [broker] = doc["brokers"]
    assert broker["broker"] == 0
    [log_dir] = broker["logDirs"]
    assert log_dir["error"] is None and Path(log_dir["logDir"]) == odradek.logdir
    parts = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(parts) == {f"{topic}-0", f"{topic}-1"}
    assert parts[f"{topic}-0"]["size"] > 0 and parts[f"{topic}-1"]["size"] == 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())


def test_kafka_features_describe_and_dry_run(kafka: Tool, odradek: Broker) -> None:
    out = kafka("kafka-features", *boot(odradek), "describe").stdout
    rows = {m.group(1): m.group(0) for m in re.finditer(r"Feature: (\S+)\s.*", out)}
    assert "group.version" in rows and "transaction.version" in rows
    assert re.search(r"SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: 1",
                     rows["group.version"])
    assert re.search(r"SupportedMaxVersion: 2\s+FinalizedVersionLevel: 1", rows["transaction.version"])
    dry = kafka("kafka-features", *boot(odradek), "upgrade", "--feature", "transaction.version=2", "--dry-run").stdout
    assert dry.strip() == "transaction.version can be upgraded to 2."
    again = kafka("kafka-features", *boot(odradek), "describe").stdout
    assert re.search(r"transaction\.version\s.*FinalizedVersionLevel: 1", again)  # a dry run changes nothing
    too_high = kafka("kafka-features", *boot(odradek), "upgrade", "--feature", "group.version=9", ok=False)
    assert too_high.returncode != 0 and "group.version" in too_high.stdout + too_high.stderr


def test_kafka_broker_api_versions(kafka: Tool, odradek: Broker) -> None:
    out = kafka("kafka-broker-api-versions", *boot(odradek)).stdout
    assert out.startswith(f"{odradek.bootstrap} (id: 0 rack: null isFenced: false) -> (")
    assert re.search(r"Produce\(0\): \d+ to \d+ \[usable: \d+\]", out)
    assert re.search(r"Fetch\(1\): \d+ to \d+ \[usable: \d+\]", out)
    assert "ApiVersions(18)" in out


def test_kafka_console_producer_and_consumer(kafka: Tool, odradek: Broker) -> None:
    topic = unique("console")
    create_topic(odradek.bootstrap, topic, 1)
    lines = "".join(f"k{i}:value-{i}\n" for i in range(50))
    kafka("kafka-console-producer", *boot(odradek), "--topic", topic, "--reader-property", "parse.key=true",
          "--reader-property", "key.separator=:", input=lines)
    out = kafka("kafka-console-consumer", *boot(odradek), "--topic", topic, "--from-beginning",
                "--max-messages", "50", "--formatter-property", "print.key=true",
                "--formatter-property", "key.separator=:", "--formatter-property", "print.offset=true",
                "--timeout-ms", "30000")
    got = out.stdout.splitlines()
    assert got == [f"Offset:{i}:k{i}:value-{i}" for i in range(50)]
    assert "Processed a total of 50 messages" in out.stderr


def test_kafka_client_metrics_subscriptions(kafka: Tool, odradek: Broker) -> None:
    """KIP-714's client metrics subscriptions: the CLIENT_METRICS config resource and ListConfigResources."""
    name = unique("sub")
    cm = ("kafka-client-metrics", *boot(odradek))
    out = kafka(*cm, "--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                "--interval", "5000", "--match", "client_id=app-.*").stdout
    assert out.strip() == f"Altered client metrics config for {name}."
    assert name in kafka(*cm, "--list").stdout.split()
    desc = kafka(*cm, "--describe", "--name", name).stdout.splitlines()
    assert desc == [f"Client metrics configs for {name} are:", "  interval.ms=5000", "  match=client_id=app-.*",
                    "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."]
    kafka(*cm, "--alter", "--name", name, "--interval", "60000")
    assert "  interval.ms=60000" in kafka(*cm, "--describe", "--name", name).stdout.splitlines()
    for bad, why in ((("--interval", "5"), "interval must be between 100 and 3600000"),
                     (("--match", "nobody=x"), "Illegal client matching pattern: nobody=x")):
        refused = kafka(*cm, "--alter", "--name", unique("bad"), *bad, ok=False)
        assert refused.returncode != 0 and why in refused.stdout
    out = kafka(*cm, "--delete", "--name", name).stdout
    assert out.strip() == f"Deleted client metrics config for {name}."
    assert name not in kafka(*cm, "--list").stdout.split()
