"""``odradek transactions`` (kafka-transactions.sh) against a real broker: list, describe,
describe-producers, find-hanging finding a transaction no coordinator knows (written with
transaction.partition.verification.enable=false, the hole KIP-890 closes), and abort ending it
from the client listener (an ABORT marker, which Kafka allows with no authorizer; a COMMIT marker
from a client stays refused)."""

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


def hang(b: Broker, topic: str) -> tuple[int, int]:
    """A transactional batch of a producer id no transactional id owns: a transaction no coordinator
    will ever end. Returns (producer id, epoch)."""
    create_topic(b.bootstrap, topic, 1)
    with wire.Conn(b.bootstrap) as conn:
        pid, epoch = wire.init_producer_id(conn)
        batch = build_batch([(None, b"stuck")], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, transactional=True)
        frame = wire.encode_request(wire.PRODUCE, 3, 9, wire.produce_body({(topic, 0): batch},
                                                                          transactional_id="nobody"))
        conn.send(frame)
        r = wire.Reader(conn.recv_frame())
        r.int32()
        assert wire.parse_produce_v3(r)[(topic, 0)][0] == wire.NONE  # verification is off on this broker
    return pid, epoch


def latest(b: Broker, topic: str, isolation: str) -> int:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    iso = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    fut = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, isolation_level=iso)
    return int(next(iter(fut.values())).result(10).offset)


def markers(b: Broker, topic: str, pid: int, epoch: int, commit: bool) -> list[int]:
    from kio.schema.write_txn_markers.v1 import request as wtm

    from odradek.client.wire import WireClient

    marker = wtm.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                                   coordinator_epoch=0,
                                   topics=(wtm.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),))
    with WireClient(b.bootstrap) as w:
        resp = w.request(27, 1, markers=(marker,))
    return [int(p.error_code) for m in resp.markers for t in m.topics for p in t.partitions]


def cli_fails(b: Broker, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "odradek", "transactions", "--bootstrap-server", b.bootstrap, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    return r.stderr


@pytest.mark.timeout(120)
def test_abort_a_hanging_transaction(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("cli-abort")
    pid, epoch = hang(b, topic)
    assert latest(b, topic, "read_committed") == 0  # held at the hanging transaction
    # a client may not commit it (COMMIT needs CLUSTER_ACTION)
    assert markers(b, topic, pid, epoch, commit=True) == [31]  # CLUSTER_AUTHORIZATION_FAILED
    assert latest(b, topic, "read_committed") == 0
    assert "no open transaction starts at offset 5" in cli_fails(b, "abort", "--topic", topic, "--partition", "0",
                                                                  "--start-offset", "5")
    assert "either" in cli_fails(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
                                 "--producer-id", str(pid))
    assert cli(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")[1:] != []

    out = cli(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert out == [[f"Aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch 0) on {topic}-0"]]
    assert latest(b, topic, "read_committed") == 2  # the data and the ABORT marker
    assert [r[0] for r in cli(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")[1:]] \
        .count(topic) == 0
    assert [(r[0], r[-1]) for r in cli(b, "describe-producers", "--topic", topic, "--partition", "0")[1:]] \
        == [(str(pid), "None")]
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(topic, value=b"after")
    assert p.flush(30) == 0
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"), "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"after"]  # the aborted record is skipped, what follows is readable
    finally:
        c.close()

    # by producer id and epochs: aborting again (no transaction open) writes another marker harmlessly
    cli(b, "abort", "--topic", topic, "--partition", "0", "--producer-id", str(pid), "--producer-epoch", str(epoch),
        "--coordinator-epoch", "0")


@pytest.mark.timeout(120)
def test_find_hanging(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("cli-hanging")
    pid, _epoch = hang(b, topic)
    rows = cli(b, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
    assert rows[0][:3] == ["Topic", "Partition", "ProducerId"]
    assert [(r[0], r[1], r[2], r[5]) for r in rows[1:]] == [(topic, "0", str(pid), "0")]
    # not old enough for the default 15 minutes
    assert cli(b, "find-hanging", "--broker-id", "0")[1:] == []
