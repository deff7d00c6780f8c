"""A small pytest project that uses the odradek fixtures, as a user's would: written to a directory
and run with ``python -m pytest`` by the plugin and packaging tests.

Its files check what a user relies on: ``kafka_topic`` with confluent-kafka and aiokafka, the ini
option reaching the broker, ``kafka_broker.restart()``, a SIGKILLed child-process broker coming back
with every acknowledged record, and (``cluster=True``) a two-broker failover with ``kafka_cluster``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

PYTEST_INI = """\
[pytest]
odradek_broker_config =
    num.partitions=2
    log.segment.bytes=1048576  message.max.bytes=2000000
odradek_cluster_size = 2
"""

COMMON = '''
import time

from confluent_kafka import Consumer, Producer


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def consume(bootstrap, topic, n, timeout=30.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got
'''

TEST_CONFLUENT = '''
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from common import consume, produce


def test_produce_and_consume(kafka_broker, kafka_topic):
    produce(kafka_broker.bootstrap_servers, kafka_topic, [b"a", b"b", b"c"])
    assert consume(kafka_broker.bootstrap_servers, kafka_topic, 3) == [b"a", b"b", b"c"]


def test_each_test_gets_its_own_topic(kafka_broker, kafka_topic):
    assert consume(kafka_broker.bootstrap_servers, kafka_topic, 1, timeout=2) == []


@pytest.mark.odradek_topic(partitions=4, config={"cleanup.policy": "compact"})
def test_topic_marker(kafka_broker, kafka_topic):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert len(admin.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions) == 4
    res = ConfigResource("topic", kafka_topic)
    assert admin.describe_configs([res])[res].result(30)["cleanup.policy"].value == "compact"


def test_ini_config_reaches_the_broker(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    res = ConfigResource("broker", "0")
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["num.partitions"].value == "2"
    assert configs["message.max.bytes"].value == "2000000"


def test_odradek_modules_are_not_assert_rewritten(kafka_broker):
    import odradek.log.log
    import odradek.server.broker

    for mod in (odradek.log.log, odradek.server.broker):
        assert type(mod.__loader__).__name__ != "AssertionRewritingHook", mod


def test_restart_keeps_the_data(kafka_broker, kafka_topic):
    produce(kafka_broker.bootstrap_servers, kafka_topic, [b"kept"])
    kafka_broker.restart()
    assert consume(kafka_broker.bootstrap_servers, kafka_topic, 1) == [b"kept"]
'''

TEST_AIOKAFKA = '''
import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def roundtrip(bootstrap, topic):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, b"m%d" % i)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="g-" + topic,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        got = []
        while len(got) < 5:
            msg = await asyncio.wait_for(consumer.getone(), 30)
            got.append(msg.value)
        return got
    finally:
        await consumer.stop()


def test_aiokafka_roundtrip(kafka_broker, kafka_topic):
    assert asyncio.run(roundtrip(kafka_broker.bootstrap_servers, kafka_topic)) == [b"m%d" % i for i in range(5)]
'''

TEST_CRASH = '''
import os
import signal

from common import consume, produce


def test_kill_9_and_restart(kafka_broker_factory):
    broker = kafka_broker_factory(mode="process")
    broker.create_topic("crash", partitions=1)
    values = [b"r%d" % i for i in range(100)]
    produce(broker.bootstrap_servers, "crash", values)
    pid = broker.pid
    broker.kill()
    try:
        os.kill(pid, 0)
        raise AssertionError("the broker process survived kill()")
    except ProcessLookupError:
        pass
    broker.start()
    assert broker.pid != pid
    assert consume(broker.bootstrap_servers, "crash", 100) == values


def test_session_broker_after_kill(kafka_broker, kafka_topic):
    produce(kafka_broker.bootstrap_servers, kafka_topic, [b"before-kill"])
    kafka_broker.kill()
    kafka_broker.start()
    assert consume(kafka_broker.bootstrap_servers, kafka_topic, 1) == [b"before-kill"]
'''

TEST_FAILOVER = '''
import time

from confluent_kafka import Producer

from common import consume


def wait_leader(cluster, topic, not_this, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader = cluster.leader(topic)
        if leader not in (-1, not_this):
            return leader
        time.sleep(0.1)
    raise AssertionError("no new leader")


def test_two_broker_failover(kafka_cluster):
    assert len(kafka_cluster.brokers) == 2
    topic = kafka_cluster.create_topic("failover", partitions=1)
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    p.produce(topic, b"one")
    assert p.flush(30) == 0
    old = kafka_cluster.leader(topic)
    kafka_cluster.kill(old)
    new = wait_leader(kafka_cluster, topic, old)
    assert new != old
    p.produce(topic, b"two")
    assert p.flush(30) == 0
    kafka_cluster.start(old)
    assert consume(kafka_cluster.bootstrap_servers, topic, 2) == [b"one", b"two"]
'''

FILES: Mapping[str, str] = {
    "pytest.ini": PYTEST_INI,
    "common.py": COMMON,
    "test_confluent.py": TEST_CONFLUENT,
    "test_aiokafka.py": TEST_AIOKAFKA,
    "test_crash.py": TEST_CRASH,
}
PASSED_WITHOUT_CLUSTER = 9


def write_project(root: Path, cluster: bool = False) -> int:
    """Write the project; returns how many tests it has (all of which must pass)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (root / name).write_text(text)
    if cluster:
        (root / "test_failover.py").write_text(TEST_FAILOVER)
        return PASSED_WITHOUT_CLUSTER + 1
    return PASSED_WITHOUT_CLUSTER


def run_project(python: str, root: Path, env: Mapping[str, str], extra: list[str] | None = None,
                timeout: float = 600) -> tuple[int, str]:
    """``python -m pytest -q`` in ``root``: (exit code, output)."""
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *(extra or [])],
        cwd=root, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
    )
    return proc.returncode, proc.stdout.decode(errors="replace")


def passed(output: str) -> int:
    m = re.search(r"(\d+) passed", output)
    return int(m.group(1)) if m else 0
