"""confluent-kafka, kafka-python and aiokafka against the broker: admin create, keyed produce with
headers and timestamps (uncompressed and every codec), assign-based consume, and cross-client."""

from __future__ import annotations

import pytest

from .broker import Broker
from .clients import (
    CLIENTS,
    CODECS,
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume,
    create_topic,
    make_messages,
    produce,
    starts_from_zero,
    unique,
    watermarks,
)

PARTITIONS = 3


def roundtrip(bootstrap: str, producer: str, consumer: str, admin: str, n: int, compression: str) -> None:
    topic = unique(f"{producer}-{compression}")
    create_topic(bootstrap, topic, PARTITIONS, client=admin)
    msgs = make_messages(n, tag=f"{producer}/{compression}")
    acks = produce(producer, bootstrap, topic, msgs, compression)
    expect = Expectation(msgs, acks)
    # keyed messages spread over all partitions
    assert expect.partitions() == set(range(PARTITIONS)), f"only partitions {expect.partitions()} used"
    check_acks_contiguous(acks)
    got = consume(consumer, bootstrap, topic, starts_from_zero(range(PARTITIONS)), n)
    check_consumed(expect, got)
    # ListOffsets: earliest 0, latest = number of messages in the partition
    per_partition = {p: sum(1 for q, _ in acks if q == p) for p in range(PARTITIONS)}
    for p, count in per_partition.items():
        assert watermarks(bootstrap, topic, p) == (0, count), f"partition {p} (earliest, latest)"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_uncompressed_10k(shared_broker: Broker, client: str) -> None:
    roundtrip(shared_broker.bootstrap, client, client, client, 10_000, "none")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_compressed(shared_broker: Broker, client: str, codec: str) -> None:
    roundtrip(shared_broker.bootstrap, client, client, client, 2_000, codec)


CROSS = [
    ("confluent", "kafka-python", "zstd"),
    ("confluent", "aiokafka", "snappy"),
    ("kafka-python", "confluent", "lz4"),
    ("kafka-python", "aiokafka", "gzip"),
    ("aiokafka", "confluent", "gzip"),
    ("aiokafka", "kafka-python", "none"),
]


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("producer", "consumer", "codec"), CROSS, ids=[f"{p}->{c}-{z}" for p, c, z in CROSS])
def test_cross_client(shared_broker: Broker, producer: str, consumer: str, codec: str) -> None:
    roundtrip(shared_broker.bootstrap, producer, consumer, "confluent", 2_000, codec)
