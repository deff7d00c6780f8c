"""Transactional vs idempotent produce, and read_committed vs read_uncommitted consume, against one
fresh Odradek broker in one run (not a test): prints figures.

    python bench/txn_bench.py [--records 100000] [--size 1024] [--per-txn 1000] [--repeat 3]

Produce (confluent-kafka, acks=all, linger.ms 5): ``--records`` records of ``--size`` bytes to a
one-partition topic, once with an idempotent producer and once with a transactional producer
committing every ``--per-txn`` records; the phases alternate ``--repeat`` times and the best of
each is reported, with the ratio transactional / idempotent (records per second).

Consume (confluent-kafka, assign from offset 0 to the end): the topic the transactional producer
wrote (its commit markers included) read with isolation.level read_committed and
read_uncommitted, alternating, best of ``--repeat``; ratio read_committed / read_uncommitted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import OdradekBroker  # noqa: E402


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=5).topics.get(name)
        if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, n: int, value: bytes, per_txn: int | None) -> float:
    """Records per second of one produce phase (until every record is acknowledged)."""
    cfg: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                              "enable.idempotence": True, "batch.size": 1 << 20}
    if per_txn:
        cfg["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(cfg)
    if per_txn:
        p.init_transactions(30)
    t0 = time.monotonic()
    for i in range(n):
        if per_txn and i % per_txn == 0:
            if i:
                p.commit_transaction(60)
            p.begin_transaction()
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    if per_txn:
        p.commit_transaction(60)
    else:
        assert p.flush(60) == 0
    return n / (time.monotonic() - t0)


def consume(bootstrap: str, topic: str, isolation: str, expect: int) -> tuple[float, int]:
    """(records per second, records read) reading the partition from 0 to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.monotonic()
    eof = False
    while not eof:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
            elif m.error().code() == -191:  # _PARTITION_EOF
                eof = got >= expect
    rate = got / (time.monotonic() - t0)
    c.close()
    return rate, got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    value = b"x" * args.size
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as d:
        b = OdradekBroker(Path(d), {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4"})
        b.start()
        try:
            idem: list[float] = []
            txn: list[float] = []
            txn_topic = ""
            for r in range(args.repeat):
                t_idem, t_txn = f"idem-{r}", f"txn-{r}"
                _topic(b.bootstrap, t_idem)
                _topic(b.bootstrap, t_txn)
                idem.append(produce(b.bootstrap, t_idem, args.records, value, None))
                txn.append(produce(b.bootstrap, t_txn, args.records, value, args.per_txn))
                txn_topic = t_txn
            rc: list[float] = []
            ru: list[float] = []
            for _ in range(args.repeat):
                rate, got = consume(b.bootstrap, txn_topic, "read_committed", args.records)
                assert got == args.records, got
                rc.append(rate)
                rate, got = consume(b.bootstrap, txn_topic, "read_uncommitted", args.records)
                assert got == args.records, got
                ru.append(rate)
        finally:
            b.stop()
    mb = args.size / 1e6
    print(f"produce {args.records} x {args.size} B, acks=all, best of {args.repeat}:")
    print(f"  idempotent      {max(idem):9.0f} rec/s  {max(idem) * mb:6.1f} MB/s   runs {[round(x) for x in idem]}")
    print(f"  transactional   {max(txn):9.0f} rec/s  {max(txn) * mb:6.1f} MB/s   runs {[round(x) for x in txn]}"
          f"   ({args.per_txn} records per transaction)")
    print(f"  ratio transactional / idempotent: {max(txn) / max(idem):.2f}")
    print(f"consume {args.records} records of a transactional topic, best of {args.repeat}:")
    print(f"  read_uncommitted {max(ru):9.0f} rec/s   runs {[round(x) for x in ru]}")
    print(f"  read_committed   {max(rc):9.0f} rec/s   runs {[round(x) for x in rc]}")
    print(f"  ratio read_committed / read_uncommitted: {max(rc) / max(ru):.2f}")


if __name__ == "__main__":
    main()
