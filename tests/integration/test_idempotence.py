"""Idempotent produce: wire-level duplicate detection, and real idempotent producers across a restart."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from odradek.protocol.records import build_batch

from . import wire
from .broker import Broker, BrokerFactory
from .clients import (
    Expectation,
    check_acks_contiguous,
    check_consumed,
    consume_confluent,
    create_topic,
    make_messages,
    unique,
    watermarks,
)


def _batch(pid: int, epoch: int, seq: int, n: int, tag: str) -> bytes:
    return build_batch([(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode()) for i in range(n)],
                       timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq)


@pytest.mark.timeout(60)
def test_same_produce_request_twice_is_written_once(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("idem-wire")
    create_topic(b.bootstrap, topic, 1)
    with wire.Conn(b.bootstrap) as c:
        pid, epoch = wire.init_producer_id(c)
        assert pid >= 0 and epoch >= 0
        first = wire.encode_request(wire.PRODUCE, 3, 1000,
                                    wire.produce_body({(topic, 0): _batch(pid, epoch, 0, 5, "a")}))

        def send(conn: wire.Conn, frame: bytes) -> tuple[int, int]:
            conn.send(frame)
            r = wire.Reader(conn.recv_frame())
            r.int32()  # correlation id
            return wire.parse_produce_v3(r)[(topic, 0)]

        assert send(c, first) == (wire.NONE, 0)
        assert watermarks(b.bootstrap, topic) == (0, 5)
        # byte-identical request again: same answer, nothing appended
        assert send(c, first) == (wire.NONE, 0)
        assert watermarks(b.bootstrap, topic) == (0, 5)

        # the next batch in sequence is appended
        assert wire.produce(c, topic, 0, _batch(pid, epoch, 5, 5, "b")) == (wire.NONE, 5)
        assert watermarks(b.bootstrap, topic) == (0, 10)

    with wire.Conn(b.bootstrap) as c2:
        # an older duplicate (still among the last 5 batches), from another connection
        assert send(c2, first) == (wire.NONE, 0)
        assert wire.produce(c2, topic, 0, _batch(pid, epoch, 5, 5, "b")) == (wire.NONE, 5)
        # a sequence gap is refused
        err, _ = wire.produce(c2, topic, 0, _batch(pid, epoch, 20, 5, "gap"))
        assert err == wire.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert watermarks(b.bootstrap, topic) == (0, 10)

    got = consume_confluent(b.bootstrap, topic, {0: 0}, 10)
    assert [(m.offset, m.value) for m in got] == [
        *((i, f"a-v{i}".encode()) for i in range(5)),
        *((5 + i, f"b-v{i}".encode()) for i in range(5)),
    ]


def _produce_phases_confluent(b: Broker, topic: str, phases: list[list]) -> list[tuple[int, int]]:
    p = Producer({
        "bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "message.timeout.ms": 60000,
    })
    total = sum(len(ph) for ph in phases)
    results: list[tuple[int, int] | None] = [None] * total
    errors: list[str] = []

    def cb_for(pos: int):  # type: ignore[no-untyped-def]
        def cb(err, m):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"{pos}: {err}")
            else:
                results[pos] = (m.partition(), m.offset())
        return cb

    pos = 0
    for n, phase in enumerate(phases):
        for m in phase:
            p.produce(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp=m.timestamp,
                      on_delivery=cb_for(pos))
            pos += 1
        p.poll(0)
        if n == 0:
            assert p.flush(30) == 0
        elif n == 1:
            b.stop()  # with produce requests in flight
            b.start()
    assert p.flush(60) == 0, "messages left undelivered"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    return results  # type: ignore[return-value]


def _produce_phases_kafka_python(b: Broker, topic: str, phases: list[list]) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=500, retry_backoff_ms=100)
    try:
        futs = []
        for n, phase in enumerate(phases):
            futs += [p.send(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp_ms=m.timestamp)
                     for m in phase]
            if n == 0:
                p.flush(timeout=30)
            elif n == 1:
                b.stop()  # with produce requests in flight
                b.start()
        p.flush(timeout=60)
        out = []
        for f in futs:
            md = f.get(timeout=30)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=10)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_idempotent_producer_across_restart(make_broker: BrokerFactory, client: str) -> None:
    b = make_broker()
    topic = unique(f"idem-{client}")
    create_topic(b.bootstrap, topic, 3)
    phases = [make_messages(1000, f"{client}-{ph}") for ph in ("before", "during", "after")]
    produce = _produce_phases_confluent if client == "confluent" else _produce_phases_kafka_python
    acks = produce(b, topic, phases)
    msgs = [m for ph in phases for m in ph]
    # no duplicates, no gaps: per partition the acknowledged offsets are 0..n-1 in send order
    check_acks_contiguous(acks)
    ends: dict[int, int] = {}
    for p, o in acks:
        ends[p] = max(ends.get(p, 0), o + 1)
    for p, end in ends.items():
        assert watermarks(b.bootstrap, topic, p) == (0, end), f"partition {p}: extra records in the log"
    got = consume_confluent(b.bootstrap, topic, {p: 0 for p in range(3)}, len(msgs))
    check_consumed(Expectation(msgs, acks), got)
