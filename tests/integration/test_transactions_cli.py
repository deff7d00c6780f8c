"""``odradek transactions`` (kafka-transactions.sh) against a real broker: list, describe,
describe-producers, and find-hanging finding a transaction no coordinator knows (written with
transaction.partition.verification.enable=false, the hole KIP-890 closes)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from odradek.protocol.records import build_batch

from . import wire
from .broker import Broker
from .clients import create_topic, unique

SHARED_BROKER_OVERRIDES = {
    "transaction.state.log.num.partitions": 2,
    "transaction.partition.verification.enable": "false",
}


def cli(b: Broker, *args: str) -> list[list[str]]:
    r = subprocess.run([sys.executable, "-m", "odradek", "transactions", "--bootstrap-server", b.bootstrap, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


@pytest.mark.timeout(120)
def test_list_describe_and_describe_producers(shared_broker: Broker) -> None:
    b = shared_broker
    topic, tid = unique("cli-txn"), unique("tid")
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    idle = unique("idle")
    Producer({"bootstrap.servers": b.bootstrap, "transactional.id": idle}).init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x")
    p.flush(30)

    rows = cli(b, "list")
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    by_id = {r[0]: r for r in rows[1:]}
    assert by_id[tid][1] == "0" and by_id[tid][3] == "Ongoing"
    assert by_id[idle][3] == "Empty"
    pid = by_id[tid][2]

    head, row = cli(b, "describe", "--transactional-id", tid)
    d = dict(zip(head, row, strict=True))
    assert d["TransactionState"] == "Ongoing" and d["ProducerId"] == pid and d["TopicPartitions"] == f"{topic}-0"
    assert int(d["TransactionDurationMs"]) >= 0
    head, row = cli(b, "describe", "--transactional-id", idle)  # no transaction: start time -1 on the wire
    d = dict(zip(head, row, strict=True))
    assert d["TransactionState"] == "Empty" and d["CurrentTransactionStartTimeMs"] == "None"

    head, *producers = cli(b, "describe-producers", "--topic", topic, "--partition", "0")
    assert head[0] == "ProducerId" and head[-1] == "CurrentTransactionStartOffset"
    assert [(r[0], r[-1]) for r in producers] == [(pid, "0")]
    # an open transaction its coordinator knows is not hanging
    assert cli(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")[1:] == []
    p.commit_transaction(30)
    assert [(r[0], r[-1]) for r in cli(b, "describe-producers", "--topic", topic, "--partition", "0")[1:]] \
        == [(pid, "None")]


@pytest.mark.timeout(120)
def test_find_hanging(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("cli-hanging")
    create_topic(b.bootstrap, topic, 1)
    with wire.Conn(b.bootstrap) as conn:
        pid, epoch = wire.init_producer_id(conn)  # a producer id no transactional id owns
        batch = build_batch([(None, b"stuck")], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, transactional=True)
        frame = wire.encode_request(wire.PRODUCE, 3, 9, wire.produce_body({(topic, 0): batch},
                                                                          transactional_id="nobody"))
        conn.send(frame)
        r = wire.Reader(conn.recv_frame())
        r.int32()
        assert wire.parse_produce_v3(r)[(topic, 0)][0] == wire.NONE  # verification is off on this broker
    rows = cli(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
    assert rows[0][:3] == ["Topic", "Partition", "ProducerId"]
    assert [(r[0], r[1], r[2], r[5]) for r in rows[1:]] == [(topic, "0", str(pid), "0")]
    # not old enough for the default 15 minutes
    assert cli(b, "find-hanging", "--broker-id", "0")[1:] == []
