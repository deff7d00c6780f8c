"""An in-process broker on a ManualClock: time-dependent behaviour without waiting for it (Kafka's MockTime).

The broker's periodic checks run on the event loop's own timers (every
``log.retention.check.interval.ms``, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``), but what they decide comes from the
broker's clock: a test moves the clock on and the next check acts, where it used to sleep for the
configured retention or timeout.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker
from odradek.clock import ManualClock

CHECK_MS = "100"  # how often the broker looks (real time)


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def _low_high(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        return int(low), int(high)
    finally:
        c.close()


def _wait_until(what: str, check: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_retention_acts_when_the_clock_moves_on() -> None:
    clock = ManualClock()
    config = {"log.retention.check.interval.ms": CHECK_MS}
    with EmbeddedBroker(config=config, clock=clock) as broker:
        topic = f"clock-{uuid.uuid4().hex[:8]}"
        _create(broker.bootstrap_servers, topic, {"retention.ms": "3600000"})  # one hour
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(5):
            # the records' own timestamps are the broker's clock's now, as a client's would be
            p.produce(topic, value=b"v%d" % i, timestamp=clock.wall_ms())
        assert p.flush(30) == 0
        assert _low_high(broker.bootstrap_servers, topic) == (0, 5)
        time.sleep(0.5)  # five retention checks at the broker's time: nothing is an hour old
        assert _low_high(broker.bootstrap_servers, topic) == (0, 5)
        clock.advance(2 * 3600 * 1000)  # two hours later
        _wait_until("the expired records deleted", lambda: _low_high(broker.bootstrap_servers, topic) == (5, 5))


def test_a_hanging_transaction_is_aborted_when_the_clock_passes_its_timeout() -> None:
    clock = ManualClock()
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": CHECK_MS}
    with EmbeddedBroker(config=config, clock=clock) as broker:
        topic = f"clock-txn-{uuid.uuid4().hex[:8]}"
        _create(broker.bootstrap_servers, topic, {})
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"t-{topic}",
                      "transaction.timeout.ms": "60000"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=b"hanging")
        assert p.flush(30) == 0
        time.sleep(0.5)  # five sweeps at the broker's time: the transaction is not a minute old
        clock.advance(120_000)  # two minutes later: the coordinator aborts it and bumps the epoch
        # the abort writes a marker after the record: the high watermark moves past it
        _wait_until("the abort marker written", lambda: _low_high(broker.bootstrap_servers, topic)[1] == 2)
        with pytest.raises(KafkaException):  # the producer was fenced by the timeout's epoch bump
            p.commit_transaction(10)
