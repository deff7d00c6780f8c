"""A consume-transform-produce app (confluent-kafka, exactly-once): reads the input topic with
read_committed, writes ``out:<partition>:<value>`` to the output topic and commits the input
offsets inside the same transaction (send_offsets_to_transaction). Every ``ABORT_EVERY``-th
transaction is aborted and the consumer rewound to the committed offsets. Exits 0 once it has
committed everything up to the input's end. Run as a script by test_transactions_eos.py, which
kills it with SIGKILL at random points and starts it again.

Usage: python eos_app.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS
"""

from __future__ import annotations

import sys
import time

ABORT_EVERY = 4
BATCH = 150


def main() -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    bootstrap, src, dst, group, tid, parts = sys.argv[1:7]
    partitions = [TopicPartition(src, p) for p in range(int(parts))]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 60000})
    # first: fences the previous instance and aborts its open transaction, so the committed
    # offsets the consumer starts from are decided
    p.init_transactions(60)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False})
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in partitions}

    def rewind() -> None:
        committed = c.committed(partitions, timeout=60)
        c.assign([TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else 0) for tp in committed])

    rewind()
    n_txn = 0
    while True:
        committed = {tp.partition: tp.offset for tp in c.committed(partitions, timeout=60)}
        if all(committed.get(pt, -1) >= end for pt, end in ends.items()):
            break
        msgs = [m for m in c.consume(BATCH, 1.0) if m.error() is None]
        if not msgs:
            continue
        n_txn += 1
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=b"out:%d:" % m.partition() + m.value(), partition=m.partition())
        positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 60)
        if n_txn % ABORT_EVERY == 0:
            p.flush(60)
            p.abort_transaction(60)
            rewind()
            continue
        try:
            p.commit_transaction(60)
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                p.abort_transaction(60)
                rewind()
                continue
            raise
    c.close()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
