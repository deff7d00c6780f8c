"""Feature versioning (KIP-584) against a real broker: kafka-python's describe_features /
update_features (ApiVersions v3+ features, UpdateFeatures on the controller), Kafka's errors,
the finalized set surviving a restart, and the group.version gate on KIP-848's APIs."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from waiting import wait_until

from odradek.client.wire import WireClient

from .broker import Broker
from .clients import create_topic, unique
from .test_kip848 import Member, find_coordinator, members

UNSUPPORTED_VERSION = 35


def admin(b: Broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)


def heartbeat_error(b: Broker, group: str) -> int:
    from kio.schema.types import GroupId
    from kio.static.primitive import i32

    with WireClient(b.bootstrap, timeout=15) as w:
        find_coordinator(w, group)
        r = w.request(68, 1, group_id=GroupId(group), member_id=str(uuid.uuid4()), member_epoch=i32(0),
                      rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=["x"], server_assignor=None,
                      topic_partitions=[])
        return int(r.error_code)


def describe_error(b: Broker, group: str) -> int:
    from kio.schema.types import GroupId

    with WireClient(b.bootstrap, timeout=15) as w:
        r = w.request(69, 0, group_ids=(GroupId(group),), include_authorized_operations=False)
        return int(r.groups[0].error_code)


def test_describe_and_update_features(broker: Broker) -> None:
    a = admin(broker)
    try:
        f = a.describe_features()
        assert f == {
            "group.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 0},
            "share.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 0},
            "transaction.version": {"supported": (0, 2), "finalized": (1, 1), "finalized_epoch": 0},
        }
        for update, why in [
            ({"group.version": 2}, "The controller only supports versions 0-1"),
            ({"transaction.version": 0}, "without setting the upgrade type"),
            ({"no.such.version": 1}, "does not support the given feature"),
            ({"group.version": ("SAFE_DOWNGRADE", 1)}, None),  # same level: accepted, nothing changes
        ]:
            if why is None:
                assert a.update_features(update) == {"group.version": "OK"}
                continue
            with pytest.raises(InvalidUpdateVersionError, match=why):
                a.update_features(update)
        # validate only: accepted, not applied
        assert a.update_features({"group.version": ("SAFE_DOWNGRADE", 0)}, validate_only=True) == {
            "group.version": "OK"}
        assert a.describe_features()["group.version"]["finalized"] == (1, 1)
        assert a.update_features({"group.version": ("UNSAFE_DOWNGRADE", 0)}) == {"group.version": "OK"}
        f = a.describe_features()
        assert f["group.version"] == {"supported": (0, 1)}
        assert f["transaction.version"]["finalized_epoch"] == 1
    finally:
        a.close()


def test_group_version_gates_kip848_and_survives_a_restart(broker: Broker) -> None:
    topic, group = unique("feat"), unique("gfeat")
    create_topic(broker.bootstrap, topic, 2)
    assert heartbeat_error(broker, group) == 0  # group.version 1 is finalized by default (Kafka 4.0)
    a = admin(broker)
    try:
        a.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
    finally:
        a.close()
    assert heartbeat_error(broker, unique("g0")) == UNSUPPORTED_VERSION
    assert describe_error(broker, group) == UNSUPPORTED_VERSION
    # a librdkafka consumer with group.protocol=consumer is refused too
    with members(Member(broker.bootstrap, unique("g1"), topic, "refused")) as ms:
        wait_until(lambda: ms[0].errors, 20, "the consumer's error", detail=lambda: ms[0].snapshot())
        time.sleep(1)
        assert not ms[0].snapshot()[0]
        assert any("API version not supported" in e for e in ms[0].errors), ms[0].errors
    broker.restart()
    a = admin(broker)
    try:
        f = a.describe_features()
        assert "finalized" not in f["group.version"] and f["transaction.version"]["finalized_epoch"] == 1
        assert heartbeat_error(broker, unique("g2")) == UNSUPPORTED_VERSION
        assert a.update_features({"group.version": 1}) == {"group.version": "OK"}
        assert a.describe_features()["group.version"]["finalized"] == (1, 1)
    finally:
        a.close()
    with members(Member(broker.bootstrap, unique("g3"), topic, "served")) as ms:
        wait_until(lambda: len(ms[0].snapshot()[0]) == 2, 30, "both partitions", detail=lambda: ms[0].snapshot())




def features_cli(b: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "features", "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def test_features_cli(broker: Broker) -> None:
    r = features_cli(broker, "describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: 0",
        "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: 0",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 1"
        "\tEpoch: 0",
    ]
    r = features_cli(broker, "downgrade", "--feature", "group.version=0", "--dry-run")
    assert (r.returncode, r.stdout) == (0, "group.version can be downgraded to 0.\n")
    r = features_cli(broker, "upgrade", "--feature", "group.version=2")
    assert r.returncode == 1
    assert r.stdout == ("Could not upgrade group.version to 2. Invalid update version 2 for feature group.version. "
                        "The controller only supports versions 0-1.\n")
    r = features_cli(broker, "disable", "--feature", "transaction.version", "--unsafe")
    assert (r.returncode, r.stdout) == (0, "transaction.version was disabled.\n")
    r = features_cli(broker, "describe")
    assert "FinalizedVersionLevel: -\tEpoch: 1" in r.stdout.splitlines()[2]
    r = features_cli(broker, "upgrade", "--feature", "transaction.version=1", "--feature", "group.version=1")
    assert (r.returncode, r.stdout) == (0, "transaction.version was upgraded to 1.\ngroup.version was upgraded to 1.\n")
    r = features_cli(broker, "upgrade", "--feature", "group.version")
    assert r.returncode == 1 and "expected NAME=LEVEL" in r.stderr


def _txn_value_versions(b: Broker, transactional_id: str) -> set[int]:
    """The TransactionLogValue versions written for ``transactional_id`` in __transaction_state."""
    import struct

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("ts"), "enable.auto.commit": False})
    try:
        md = c.list_topics("__transaction_state", timeout=10)
        parts = list(md.topics["__transaction_state"].partitions)
        c.assign([TopicPartition("__transaction_state", p, 0) for p in parts])
        versions: set[int] = set()
        idle_until = time.monotonic() + 3
        while time.monotonic() < idle_until:
            for m in c.consume(100, 0.3):
                key, value = m.key(), m.value()
                if m.error() is None and key and value and key[4:].decode() == transactional_id:
                    versions.add(struct.unpack(">h", value[:2])[0])
                    idle_until = time.monotonic() + 1
        return versions
    finally:
        c.close()


def _one_transaction(b: Broker, transactional_id: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": transactional_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v")
    p.commit_transaction(30)


def test_transaction_version_picks_the_transaction_log_value_version(broker: Broker) -> None:
    topic = unique("tv")
    create_topic(broker.bootstrap, topic, 1)
    _one_transaction(broker, "tv1", topic)
    assert _txn_value_versions(broker, "tv1") == {1}  # transaction.version 1: flexible values
    r = features_cli(broker, "downgrade", "--feature", "transaction.version=0")
    assert r.returncode == 0, r.stdout + r.stderr
    _one_transaction(broker, "tv0", topic)
    assert _txn_value_versions(broker, "tv0") == {0}
