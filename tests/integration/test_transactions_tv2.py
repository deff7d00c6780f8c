"""transaction.version 2 (KIP-890 part 2) end to end against a real broker. No Python client
speaks TV2 (confluent-kafka/librdkafka, kafka-python, aiokafka do not), so the TV2 producer is
driven with kio requests (WireClient): InitProducerId, Produce v12 with no AddPartitionsToTxn,
TxnOffsetCommit v5 with no AddOffsetsToTxn, EndTxn v5 answering the bumped epoch; the old
epoch fenced; a timed-out TV2 transaction aborted. read_committed consumers are
confluent-kafka's, and confluent-kafka's (TV1) transactional producer keeps working across
``odradek features upgrade --feature transaction.version=2``."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.produce.v12 import request as preq
from kio.schema.txn_offset_commit.v5 import request as toc

from odradek.client.wire import WireClient
from odradek.protocol.records import build_batch

from .broker import Broker, BrokerFactory
from .clients import create_topic, unique

OVERRIDES = {
    "transaction.state.log.num.partitions": 2,
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
NONE, NOT_ENOUGH_REPLICAS, UNSUPPORTED_VERSION, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = 0, 19, 35, 47, 90
RETRIABLE = (14, 15, 16, 51)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
TV2_APIS = (0, 24, 26, 28)  # Produce, AddPartitionsToTxn, EndTxn, TxnOffsetCommit


def _retry(call: Any, code_of: Any, retriable: tuple[int, ...] = RETRIABLE, tries: int = 100) -> Any:
    resp = None
    for _ in range(tries):
        resp = call()
        if code_of(resp) not in retriable:
            return resp
        time.sleep(0.1)
    return resp


def features(b: Broker, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "odradek", "features", "--bootstrap-server", b.bootstrap, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def transactions_cli(b: Broker, *args: str) -> list[list[str]]:
    r = subprocess.run([sys.executable, "-m", "odradek", "transactions", "--bootstrap-server", b.bootstrap, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def advertised(w: WireClient) -> dict[int, int]:
    resp = w.request(18, 3, client_software_name="tv2-test", client_software_version="1")
    return {int(k.api_key): int(k.max_version) for k in resp.api_keys if int(k.api_key) in TV2_APIS}


class Tv2Producer:
    """A transactional producer speaking KIP-890 part 2 on the wire."""

    def __init__(self, w: WireClient, tid: str, timeout_ms: int = 60000) -> None:
        self.w, self.tid = w, tid
        init = _retry(lambda: w.request(22, 5, transactional_id=tid,
                                         transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                                         producer_id=-1, producer_epoch=-1), lambda r: int(r.error_code))
        assert int(init.error_code) == NONE
        self.pid, self.epoch = int(init.producer_id), int(init.producer_epoch)
        self.seq: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None,
                via: WireClient | None = None) -> int:
        """Produce v12 (to the partition's leader ``via``, else the coordinator's connection);
        the error code of the partition."""
        w = via or self.w
        epoch = self.epoch if epoch is None else epoch
        seq = self.seq.get((topic, partition), 0)
        batch = build_batch([(None, v) for v in values], timestamp=int(time.time() * 1000), producer_id=self.pid,
                            producer_epoch=epoch, base_sequence=seq, transactional=True)

        def send() -> Any:
            return w.request(0, 12, transactional_id=self.tid, acks=-1, timeout=datetime.timedelta(seconds=30),
                                  topic_data=(preq.TopicProduceData(name=topic, partition_data=(
                                      preq.PartitionProduceData(index=partition, records=bytes(batch)),)),))

        resp = _retry(send, lambda r: int(r.responses[0].partition_responses[0].error_code),
                      RETRIABLE + (NOT_ENOUGH_REPLICAS,))
        code = int(resp.responses[0].partition_responses[0].error_code)
        if code == NONE:
            self.seq[(topic, partition)] = seq + len(values)
        return code

    def commit_offsets(self, group: str, topic: str, offset: int, via: WireClient | None = None) -> int:
        """TxnOffsetCommit v5 (to the group's coordinator ``via``, else the coordinator's connection)."""
        w = via or self.w
        resp = _retry(lambda: w.request(
            28, 5, transactional_id=self.tid, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=(toc.TxnOffsetCommitRequestTopic(name=topic, partitions=(toc.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),)),
            lambda r: int(r.topics[0].partitions[0].error_code))
        return int(resp.topics[0].partitions[0].error_code)

    def end(self, commit: bool, epoch: int | None = None, version: int = 5) -> Any:
        epoch = self.epoch if epoch is None else epoch
        resp = _retry(lambda: self.w.request(26, version, transactional_id=self.tid, producer_id=self.pid,
                                             producer_epoch=epoch, committed=commit), lambda r: int(r.error_code))
        if int(resp.error_code) == NONE and version >= 5:
            self.pid, self.epoch = int(resp.producer_id), int(resp.producer_epoch)
            self.seq.clear()  # a new epoch starts its sequences at 0
        return resp


def _read(b: Broker, topic: str, isolation: str, partitions: int, expect: int, settle: float = 1.5) -> list[str]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"), "isolation.level": isolation,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[str] = []
        deadline, quiet = time.monotonic() + 30, time.monotonic()
        while time.monotonic() < deadline:
            msgs = c.consume(500, 0.2)
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(m.value().decode())
            if msgs:
                quiet = time.monotonic()
            elif len(out) >= expect and time.monotonic() - quiet >= settle:
                break
        return sorted(out)
    finally:
        c.close()


def _committed(b: Broker, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


@pytest.mark.timeout(180)
def test_tv2_transactions_end_to_end(make_broker: BrokerFactory) -> None:
    b = make_broker(OVERRIDES)
    topic, tid, group = unique("tv2"), unique("tid"), unique("g")
    create_topic(b.bootstrap, topic, 2)
    with WireClient(b.bootstrap) as w:
        # transaction.version 1 (the default): the versions before KIP-890 part 2, and EndTxn v5 refused
        assert advertised(w) == {0: 11, 24: 4, 26: 4, 28: 4}
        p = Tv2Producer(w, tid)
        assert int(p.end(False).error_code) == UNSUPPORTED_VERSION
        assert features(b, "upgrade", "--feature", "transaction.version=2") == "transaction.version was upgraded to 2.\n"
        deadline = time.monotonic() + 10
        while advertised(w) != {0: 12, 24: 5, 26: 5, 28: 5} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert advertised(w) == {0: 12, 24: 5, 26: 5, 28: 5}
        w.request(10, 3, key=group, key_type=0)  # creates __consumer_offsets
        assert (p.pid, p.epoch) != (-1, -1)
        pid0, epoch0 = p.pid, p.epoch

        # 1: Produce v12 and TxnOffsetCommit v5 with no AddPartitionsToTxn / AddOffsetsToTxn; commit
        assert p.produce(topic, 0, [b"c1-a", b"c1-b"]) == NONE
        assert p.produce(topic, 1, [b"c1-c"]) == NONE
        assert p.produce(topic, 0, [b"c1-d"]) == NONE  # the transaction is open on the partition already
        head, row = transactions_cli(b, "describe", "--transactional-id", tid)
        d = dict(zip(head, row, strict=True))
        assert d["TransactionState"] == "Ongoing" and d["ProducerEpoch"] == str(epoch0)
        assert set(d["TopicPartitions"].split(",")) == {f"{topic}-0", f"{topic}-1"}
        assert p.commit_offsets(group, topic, 3) == NONE
        r = p.end(True)
        assert (int(r.error_code), int(r.producer_id), int(r.producer_epoch)) == (NONE, pid0, epoch0 + 1)
        # a retry of that EndTxn (the epoch before the bump) is answered the same
        r = p.end(True, epoch=epoch0)
        assert (int(r.error_code), int(r.producer_id), int(r.producer_epoch)) == (NONE, pid0, epoch0 + 1)

        # 2: the next transaction on the new epoch, aborted
        assert p.produce(topic, 0, [b"a2-a"]) == NONE
        assert p.produce(topic, 1, [b"a2-b"]) == NONE
        r = p.end(False)
        assert (int(r.error_code), int(r.producer_epoch)) == (NONE, epoch0 + 2)

        # the old epochs are fenced at the partition leader, and by the coordinator
        assert p.produce(topic, 0, [b"zombie"], epoch=epoch0) == INVALID_PRODUCER_EPOCH
        assert p.produce(topic, 1, [b"zombie"], epoch=epoch0 + 1) == INVALID_PRODUCER_EPOCH
        assert int(p.end(True, epoch=epoch0).error_code) == PRODUCER_FENCED

        # 3: committed on the newest epoch
        assert p.produce(topic, 1, [b"c3-a"]) == NONE
        assert int(p.end(True).error_code) == NONE and p.epoch == epoch0 + 3
        rows = transactions_cli(b, "list")
        mine = [r for r in rows[1:] if r[0] == tid]
        assert mine and mine[0][2] == str(pid0) and mine[0][3] == "CompleteCommit"

    committed = ["c1-a", "c1-b", "c1-c", "c1-d", "c3-a"]
    assert _read(b, topic, "read_committed", 2, len(committed)) == committed
    assert _read(b, topic, "read_uncommitted", 2, 7) == sorted(committed + ["a2-a", "a2-b"])
    assert _committed(b, group, topic) == 3


@pytest.mark.timeout(180)
def test_tv2_timed_out_transaction_is_aborted_and_its_epoch_fenced(make_broker: BrokerFactory) -> None:
    b = make_broker(OVERRIDES)
    topic, tid = unique("tv2-timeout"), unique("tid")
    create_topic(b.bootstrap, topic, 1)
    features(b, "upgrade", "--feature", "transaction.version=2")
    with WireClient(b.bootstrap) as w:
        deadline = time.monotonic() + 10
        while advertised(w)[26] != 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        p = Tv2Producer(w, tid, timeout_ms=1500)
        assert p.produce(topic, 0, [b"hung"]) == NONE
        deadline = time.monotonic() + 20
        state = ""
        while time.monotonic() < deadline:
            head, row = transactions_cli(b, "describe", "--transactional-id", tid)
            state = dict(zip(head, row, strict=True))["TransactionState"]
            if state == "CompleteAbort":
                break
            time.sleep(0.3)
        assert state == "CompleteAbort"
        assert int(p.end(True).error_code) == PRODUCER_FENCED
        assert p.produce(topic, 0, [b"late"]) == INVALID_PRODUCER_EPOCH
        # InitProducerId recovers the transactional id (KIP-360, with the fenced producer's id and epoch + 2)
        init = _retry(lambda: w.request(22, 5, transactional_id=tid,
                                        transaction_timeout=datetime.timedelta(seconds=60),
                                        producer_id=-1, producer_epoch=-1), lambda r: int(r.error_code))
        assert int(init.error_code) == NONE and int(init.producer_epoch) == p.epoch + 3
        p.epoch, p.seq = int(init.producer_epoch), {}
        assert p.produce(topic, 0, [b"after"]) == NONE
        assert int(p.end(True).error_code) == NONE
    assert _read(b, topic, "read_committed", 1, 1) == ["after"]


@pytest.mark.timeout(180)
def test_tv1_clients_keep_working_across_the_upgrade(make_broker: BrokerFactory) -> None:
    b = make_broker(OVERRIDES)
    topic = unique("tv1")
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("tid"), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"before")
    p.flush(30)
    # upgraded while the transaction is open: it ends the TV1 way (EndTxn v3, no epoch bump)
    assert features(b, "upgrade", "--feature", "transaction.version=2") == "transaction.version was upgraded to 2.\n"
    p.produce(topic, value=b"during")
    p.commit_transaction(30)
    for i in range(2):
        p.begin_transaction()
        p.produce(topic, value=f"after-{i}".encode())
        p.flush(30)
        if i == 0:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    assert _read(b, topic, "read_committed", 1, 3) == ["after-1", "before", "during"]
