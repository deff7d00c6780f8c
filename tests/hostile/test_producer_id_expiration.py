"""Idempotent producer state expires after producer.id.expiration.ms (issue 12, item 6).

Every producer id a partition has seen used to stay in memory and in every producer snapshot forever (and
clients are idempotent by default, so every client process adds one). With a 1 s expiration checked every
200 ms, the state of a confluent-kafka idempotent producer is gone from the partition once it has been
idle for a second: the snapshot a clean shutdown writes at the log end holds no entry for it. A write of
that producer afterwards is accepted as Kafka (2.5+, KIP-360) accepts a producer it has no state for, at
whatever sequence it continues with.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from integration.broker import Broker
from integration.clients import consume_confluent, create_topic, unique

from odradek.log.producer_state import ProducerStateManager, snapshot_path


def _produce(p: Producer, topic: str, values: list[bytes]) -> None:
    errors: list[object] = []
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(15) == 0
    assert not errors, errors


def _snapshot_producers(broker: Broker, topic: str, offset: int) -> set[int]:
    path = snapshot_path(broker.partition_dir(topic), offset)
    assert path.exists(), sorted(p.name for p in broker.partition_dir(topic).iterdir())
    return set(ProducerStateManager.decode_snapshot(path.read_bytes()))


def test_idle_producer_state_expires_and_is_not_snapshotted(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(overrides={"producer.id.expiration.ms": 1000,
                                    "producer.id.expiration.check.interval.ms": 200})
    topic = unique("pid-expiry")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    _produce(p, topic, [b"a", b"b", b"c"])

    time.sleep(2.0)  # idle for twice the expiration: at least one check has run since
    _produce(p, topic, [b"d"])  # the same producer, sequence 3, with no state on the broker: accepted
    got = consume_confluent(broker.bootstrap, topic, {0: 0}, 4)
    assert [m.value for m in got] == [b"a", b"b", b"c", b"d"]

    time.sleep(2.0)
    del p
    broker.stop()  # a clean shutdown writes the producer snapshot at the log end (offset 4)
    assert _snapshot_producers(broker, topic, 4) == set()


def test_active_producer_state_is_kept(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(overrides={"producer.id.expiration.ms": 60000,
                                    "producer.id.expiration.check.interval.ms": 200})
    topic = unique("pid-kept")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    _produce(p, topic, [b"a", b"b"])
    time.sleep(0.6)
    del p
    broker.stop()
    assert len(_snapshot_producers(broker, topic, 2)) == 1


def test_expiration_is_a_dynamic_broker_config(make_broker) -> None:  # type: ignore[no-untyped-def]
    """producer.id.expiration.ms is dynamic in Kafka: lowered at run time, the next check uses it."""
    broker = make_broker(overrides={"producer.id.expiration.check.interval.ms": 200})  # expiration: 1 day
    topic = unique("pid-dynamic")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    _produce(p, topic, [b"a", b"b"])
    del p
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("producer.id.expiration.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.incremental_alter_configs([res])[res].result(15)
    del admin
    time.sleep(1.5)
    broker.stop()
    assert _snapshot_producers(broker, topic, 2) == set()
