"""Produce forever (confluent-kafka, acks=all) and append one line per acknowledged message to a file:
``<partition> <offset> <index>``. Run as a script by test_restart.py; killed from outside.

Usage: python ack_producer.py BOOTSTRAP TOPIC ACKFILE BASE_TS VALUE_SIZE [KEYS [BATCH_BYTES]]
Message ``i``: key ``key-<i>`` (``key-<i % KEYS>`` when KEYS is given: updates for a compacted
topic), value ``value(i, VALUE_SIZE)``, timestamp ``BASE_TS + i``. BATCH_BYTES caps a batch's size
(librdkafka's batch.size): a topic with a tiny segment.bytes refuses a larger batch.
"""

from __future__ import annotations

import os
import sys


def value(i: int, size: int) -> bytes:
    head = f"msg-{i}-".encode()
    return head + b"v" * max(0, size - len(head))


def index_of(v: bytes) -> int:
    """The ``i`` of ``value(i, size)``."""
    return int(v.split(b"-", 2)[1])


def main() -> None:
    from confluent_kafka import Producer

    bootstrap, topic, ackfile, base_ts, size = sys.argv[1:6]
    keys = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    batch_bytes = {"batch.size": int(sys.argv[7])} if len(sys.argv) > 7 else {}
    fd = os.open(ackfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 200,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 5,
        "message.send.max.retries": 0,
        "reconnect.backoff.max.ms": 500,
        **batch_bytes,
    })

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            idx = index_of(msg.value())
            os.write(fd, f"{msg.partition()} {msg.offset()} {idx}\n".encode())

    i = 0
    while True:
        try:
            p.produce(topic, key=f"key-{i % keys if keys else i}".encode(), value=value(i, int(size)), partition=0,
                      timestamp=int(base_ts) + i, on_delivery=on_delivery)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)


if __name__ == "__main__":
    main()
