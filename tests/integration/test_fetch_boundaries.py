"""Fetch responses end on a batch boundary: no trailing fragment of a batch that did not fit.

Kafka cuts the last batch at the partition's byte limit and the client throws the fragment
away; this broker stops at the last whole batch (the protocol allows returning less), so
each byte sent is a byte the client can use. Checked on the wire and with every client
consuming with a byte limit smaller than two batches.
"""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i32, i64

from odradek.client.wire import WireClient

from .broker import Broker
from .clients import (
    Expectation,
    check_consumed,
    consume,
    create_topic,
    make_messages,
    produce,
    starts_from_zero,
    unique,
)

VALUE = 1000
PER_BATCH = 60  # ~60 KB batches


def _produce_big_batches(bootstrap: str, topic: str, n: int, partition: int | None = None) -> Expectation:
    msgs = make_messages(n, topic, value_size=VALUE)
    acks = produce("confluent", bootstrap, topic, msgs, partition=partition, conf={
        "linger.ms": 50, "batch.num.messages": PER_BATCH, "batch.size": 10 * PER_BATCH * VALUE,
    })
    return Expectation(msgs, acks)


def _fetch(c: WireClient, topic: str, offset: int, max_bytes: int) -> bytes:
    req = FetchRequest(
        cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(0),
        max_bytes=i32(1 << 24), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes)),)),),
        forgotten_topics_data=(), rack_id="",
    )
    fields = {f: getattr(req, f) for f in req.__dataclass_fields__ if not f.startswith("__")}
    resp = c.request(1, 12, **fields)
    (part,) = resp.responses[0].partitions
    assert part.error_code == 0
    return bytes(part.records or b"")


def _batches(raw: bytes) -> list[tuple[int, int]]:
    """(base offset, size) of each batch; the bytes must hold whole batches only."""
    out, pos = [], 0
    while pos < len(raw):
        base, length = struct.unpack_from(">qi", raw, pos)
        out.append((base, length + 12))
        pos += length + 12
    assert pos == len(raw), "the records end inside a batch"
    return out


def test_a_partition_limit_stops_at_the_last_whole_batch(shared_broker: Broker) -> None:
    topic = unique("fb-wire")
    create_topic(shared_broker.bootstrap, topic, 1)
    _produce_big_batches(shared_broker.bootstrap, topic, 600, partition=0)
    with WireClient(shared_broker.bootstrap) as c:
        whole = _batches(_fetch(c, topic, 0, 1 << 22))
        assert len(whole) >= 4 and sum(n for _, n in whole) < 1 << 22
        size = whole[0][1]
        # a limit between one and two batches: exactly one batch
        assert _batches(_fetch(c, topic, 0, size + size // 2)) == whole[:1]
        # a limit below the first batch: still the whole first batch (KIP-74)
        assert _batches(_fetch(c, topic, 0, 100)) == whole[:1]
        # from the middle of the second batch, room for two and a half
        second_base = whole[1][0]
        limit = whole[1][1] + whole[2][1] + whole[3][1] // 2
        assert _batches(_fetch(c, topic, second_base + 3, limit)) == whole[1:3]


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_clients_read_everything_with_a_limit_below_two_batches(shared_broker: Broker, client: str) -> None:
    topic = unique(f"fb-{client}")
    create_topic(shared_broker.bootstrap, topic, 2)
    expect = _produce_big_batches(shared_broker.bootstrap, topic, 1200)
    got = consume(client, shared_broker.bootstrap, topic, starts_from_zero(expect.partitions()), len(expect.msgs),
                  max_partition_fetch_bytes=90_000)
    assert len(got) == len(expect.msgs)
    check_consumed(expect, got)
