"""Admin APIs through confluent-kafka's AdminClient and the `odradek` CLI, against a real broker."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from waiting import wait_until

from .broker import Broker

T = 15


def _admin(b: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_configs(a: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return a.describe_configs([res])[res].result(T)


def test_create_validate_only_describe_and_partitions(broker: Broker) -> None:
    a = _admin(broker)
    t = _name("adm")
    a.create_topics([NewTopic(t, 2, 1, config={"retention.ms": "12345"})], validate_only=True)[t].result(T)
    assert t not in a.list_topics(timeout=T).topics
    a.create_topics([NewTopic(t, 2, 1, config={"retention.ms": "12345"})])[t].result(T)
    with pytest.raises(KafkaException) as e:
        a.create_topics([NewTopic(t, 1, 1)])[t].result(T)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    for bad, code in (
        (NewTopic(_name("x"), 1, 1, config={"retention.ms": "soon"}), KafkaError.INVALID_CONFIG),
        (NewTopic(_name("x"), 1, 1, config={"no.such.config": "1"}), KafkaError.INVALID_CONFIG),
        (NewTopic(_name("x"), 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
        (NewTopic(_name("x"), 0, 1), KafkaError.INVALID_PARTITIONS),
    ):
        with pytest.raises(KafkaException) as e:
            a.create_topics([bad])[bad.topic].result(T)
        assert e.value.args[0].code() == code, bad
    desc = a.describe_topics(TopicCollection([t]))[t].result(T)
    assert len(desc.partitions) == 2 and desc.topic_id is not None
    cfg = _topic_configs(a, t)
    assert cfg["retention.ms"].value == "12345" and cfg["retention.ms"].source == 1
    assert cfg["segment.bytes"].value == "1073741824"
    a.create_partitions([NewPartitions(t, 5)])[t].result(T)
    assert len(a.list_topics(t, timeout=T).topics[t].partitions) == 5
    with pytest.raises(KafkaException) as e:
        a.create_partitions([NewPartitions(t, 3)])[t].result(T)
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    # the new partitions take writes
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(t, b"x", partition=4)
    assert p.flush(T) == 0
    a.delete_topics([t])[t].result(T)
    assert t not in a.list_topics(timeout=T).topics
    assert not broker.partition_dir(t, 0).exists()


def test_configs_persist_across_restart(broker: Broker) -> None:
    a = _admin(broker)
    t = _name("cfg")
    a.create_topics([NewTopic(t, 1, 1)])[t].result(T)
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        t,
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    a.incremental_alter_configs([res])[res].result(T)
    bres = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[ConfigEntry("log.retention.bytes", "99999999", incremental_operation=AlterConfigOpType.SET)],
    )
    a.incremental_alter_configs([bres])[bres].result(T)
    bad = ConfigResource(
        ConfigResource.Type.TOPIC, t,
        incremental_configs=[ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as e:
        a.incremental_alter_configs([bad])[bad].result(T)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    broker.restart()
    a = _admin(broker)
    cfg = _topic_configs(a, t)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["cleanup.policy"].value == "delete,compact"
    assert cfg["retention.bytes"].value == "99999999" and cfg["retention.bytes"].source == 2
    # legacy AlterConfigs replaces the whole set
    a.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, t, set_config={"segment.ms": "60000"})])
    cfg = _topic_configs(a, t)
    assert cfg["segment.ms"].value == "60000" and cfg["retention.ms"].source != 1


def test_delete_records_cluster_and_log_dirs(broker: Broker) -> None:
    a = _admin(broker)
    t = _name("dr")
    a.create_topics([NewTopic(t, 1, 1)])[t].result(T)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(50):
        p.produce(t, b"v%d" % i, partition=0)
        p.flush(T)
    fut = a.delete_records([TopicPartition(t, 0, 20)])
    (res,) = fut.values()
    assert res.result(T).low_watermark == 20
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
    assert c.get_watermark_offsets(TopicPartition(t, 0), timeout=T) == (20, 50)
    c.close()
    cluster = a.describe_cluster().result(T)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0 and cluster.cluster_id
    from kafka import KafkaAdminClient

    ka = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        dirs = ka.describe_log_dirs()
        text = repr(dirs)
        assert t in text
    finally:
        ka.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=60)


def test_cli_topics_and_configs(broker: Broker) -> None:
    b = broker.bootstrap
    t = _name("cli")
    r = _cli("topics", "--bootstrap-server", b, "--create", "--topic", t, "--partitions", "3", "--config", "retention.ms=1000000")
    assert r.returncode == 0, r.stderr
    r = _cli("topics", "--bootstrap-server", b, "--list")
    assert t in r.stdout.split()
    r = _cli("topics", "--bootstrap-server", b, "--describe", "--topic", t)
    assert "PartitionCount: 3" in r.stdout and "retention.ms=1000000" in r.stdout and r.stdout.count("Leader: 0") == 3
    r = _cli("topics", "--bootstrap-server", b, "--alter", "--topic", t, "--partitions", "4")
    assert r.returncode == 0, r.stderr
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", t, "--alter",
             "--add-config", "cleanup.policy=[compact,delete],segment.ms=100000")
    assert r.returncode == 0, r.stderr
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", t, "--describe")
    assert "cleanup.policy=compact,delete" in r.stdout and "segment.ms=100000" in r.stdout
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "brokers", "--entity-default", "--alter",
             "--add-config", "log.retention.ms=7200000")
    assert r.returncode == 0, r.stderr
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", t, "--describe", "--all")
    assert "retention.ms=1000000" in r.stdout
    # a consumer group's own configs (the GROUP config resource of KIP-848)
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "groups", "--entity-name", "cli-g", "--alter",
             "--add-config", "consumer.session.timeout.ms=50000")
    assert r.returncode == 0 and "Completed updating config for Group:cli-g." in r.stdout, r.stderr
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "groups", "--entity-name", "cli-g", "--describe")
    assert r.stdout.splitlines()[1:] == ["  consumer.session.timeout.ms=50000 sensitive=false source=GROUP_CONFIG"], r.stdout
    r = _cli("configs", "--bootstrap-server", b, "--entity-type", "groups", "--entity-name", "cli-g", "--alter",
             "--add-config", "consumer.session.timeout.ms=1")
    assert r.returncode == 1 and "consumer.session.timeout.ms" in r.stderr
    r = _cli("topics", "--bootstrap-server", b, "--create", "--topic", "bad/name")
    assert r.returncode == 1 and "illegal" in r.stderr
    r = _cli("topics", "--bootstrap-server", b, "--delete", "--topic", t)
    assert r.returncode == 0, r.stderr
    r = _cli("topics", "--bootstrap-server", b, "--list")
    assert t not in r.stdout.split()


def test_old_versions_with_no_time_to_wait_are_answered(broker: Broker) -> None:
    """CreateTopics v2 and DeleteTopics v1 with timeout 0: answered REQUEST_TIMED_OUT or done, in the
    fields those versions have (the timeout answer once read fields of later versions)."""
    from . import wire

    t = _name("t0")
    with wire.Conn(broker.bootstrap) as c:
        r = c.request(wire.CREATE_TOPICS, 2, wire.create_topics_body([(t, 3, {})], timeout_ms=0))
        r.int32()
        (name, code, _msg), = r.array(lambda rr: (rr.string(), rr.int16(), rr.string()))
        assert name == t and code in (0, 7)  # NONE, or REQUEST_TIMED_OUT: the creation goes on
        wait_until(lambda: t in _admin(broker).list_topics(timeout=T).topics, T, f"topic {t} in metadata",
                   interval=0.05)
        body = wire.Writer().array([t], lambda w, n: w.string(n)).int32(0).done()
        r = c.request(20, 1, body)  # DeleteTopics v1
        r.int32()
        (name, code), = r.array(lambda rr: (rr.string(), rr.int16()))
        assert name == t and code in (0, 7)
    broker.assert_alive()
    assert "Traceback" not in broker.log_text()
