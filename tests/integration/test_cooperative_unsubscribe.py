"""librdkafka's 0113 cooperative-rebalance test, case l_unsubscribe, replayed with confluent-kafka:
two cooperative-sticky consumers subscribe to two 2-partition topics, one unsubscribes, both close.
The rebalance callbacks must come as against Kafka: one assignment each at first, one revocation
for the consumer that unsubscribes and no further assignment for it, one more assignment for the
other (it takes all four partitions), and nothing lost. An extra generation handed out by the
coordinator shows up as an extra (possibly empty) assign callback."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from .broker import Broker
from .clients import create_topic, unique

# the default group.initial.rebalance.delay.ms (3 s), as librdkafka's suite runs against: both
# consumers must land in the group's first generation
TIMEOUT_S = 90.0


class Callbacks:
    def __init__(self) -> None:
        self.assign = self.revoke = self.lost = 0
        self.parts: set[tuple[str, int]] = set()

    def on_assign(self, c: Consumer, parts: list[TopicPartition]) -> None:
        c.incremental_assign(parts)
        self.assign += 1
        self.parts |= {(p.topic, p.partition) for p in parts}

    def on_revoke(self, c: Consumer, parts: list[TopicPartition]) -> None:
        assert parts, "revoke callback with no partitions"
        c.incremental_unassign(parts)
        self.revoke += 1
        self.parts -= {(p.topic, p.partition) for p in parts}

    def on_lost(self, c: Consumer, parts: list[TopicPartition]) -> None:
        self.lost += 1
        self.parts -= {(p.topic, p.partition) for p in parts}


def consumer(bootstrap: str, group: str, name: str, topics: list[str], cb: Callbacks) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 30000,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    }
    c = Consumer(conf)
    c.subscribe(topics, on_assign=cb.on_assign, on_revoke=cb.on_revoke, on_lost=cb.on_lost)
    return c


def test_cooperative_unsubscribe_assign_callbacks(make_broker: Any) -> None:
    broker: Broker = make_broker({"offsets.topic.replication.factor": 1})
    topics = [unique("coop-unsub-a"), unique("coop-unsub-b")]
    for t in topics:
        create_topic(broker.bootstrap, t, partitions=2)
    group = unique("coop-unsub")
    cb1, cb2 = Callbacks(), Callbacks()
    c1 = consumer(broker.bootstrap, group, "C_1", topics, cb1)
    c2 = consumer(broker.bootstrap, group, "C_2", topics, cb2)
    unsubscribed = done = False
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not done:
            assert time.monotonic() < deadline, (
                f"no outcome: C_1 {sorted(cb1.parts)} C_2 {sorted(cb2.parts)} "
                f"(assign {cb1.assign}/{cb2.assign}, revoke {cb1.revoke}/{cb2.revoke})"
            )
            c1.poll(0.5)
            c2.poll(0.5)
            if not unsubscribed and len(cb1.parts) == 2 and len(cb2.parts) == 2:
                assert (cb1.assign, cb2.assign) == (1, 1), "an extra generation before the first check"
                c1.unsubscribe()
                unsubscribed = True
            if unsubscribed and not cb1.parts and len(cb2.parts) == 4:
                assert (cb1.assign, cb1.revoke) == (1, 1)
                assert (cb2.assign, cb2.revoke) == (2, 0)
                done = True
    finally:
        c1.close()
        c2.close()
    # no assignment on close; C_2 gives back its four partitions once
    assert (cb1.assign, cb1.revoke, cb2.assign, cb2.revoke) == (1, 1, 2, 1)
    assert cb1.lost == cb2.lost == 0
