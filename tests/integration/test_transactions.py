"""Transactions end to end (KIP-98, KIP-447, KIP-588, KIP-890 part 1) with real clients against a
real broker: confluent-kafka's transactional producer (init / begin / produce /
send_offsets_to_transaction / commit / abort), read_committed and read_uncommitted consumers,
a zombie producer fenced, a hung transaction aborted at its timeout, aiokafka's transactional
producer, and the wire-level refusal of a transactional batch for a partition that is not in
the transaction."""

from __future__ import annotations

import asyncio
import datetime
import struct
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from waiting import wait_until

from odradek.client.wire import WireClient
from odradek.protocol.records import build_batch

from . import wire
from .broker import Broker, BrokerFactory
from .clients import create_topic, unique

SHARED_BROKER_OVERRIDES = {
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}


def _producer(b: Broker, tid: str, **extra: object) -> Producer:
    cfg: dict[str, object] = {"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 5}
    cfg.update(extra)
    return Producer(cfg)


def _consumer(b: Broker, isolation: str, group: str | None = None, **extra: object) -> Consumer:
    cfg: dict[str, object] = {
        "bootstrap.servers": b.bootstrap, "group.id": group or unique("g"), "isolation.level": isolation,
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": False,
    }
    cfg.update(extra)
    return Consumer(cfg)


def _read_all(b: Broker, topic: str, isolation: str, expect: int, partitions: int = 1,
              settle: float = 1.0, timeout: float = 30.0) -> list[str]:
    """Values read from offset 0 of every partition: until ``expect`` arrived and ``settle``
    seconds passed without more (so that extra records would be seen)."""
    c = _consumer(b, isolation)
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[str] = []
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = c.consume(500, 0.2)
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(m.value().decode())
            if msgs:
                quiet_since = time.monotonic()
            elif len(out) >= expect and time.monotonic() - quiet_since >= settle:
                break
        return out
    finally:
        c.close()


def _latest(b: Broker, topic: str, isolation: str) -> int:
    c = _consumer(b, isolation)
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1])
    finally:
        c.close()


@pytest.mark.timeout(90)
def test_commit_and_abort_visible_by_isolation_level(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("txn")
    create_topic(b.bootstrap, topic, 1)
    p = _producer(b, unique("tid"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"c1-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"a-{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=f"c2-{i}".encode())
    p.commit_transaction(30)

    committed = [f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(2)]
    assert _read_all(b, topic, "read_committed", len(committed)) == committed
    everything = [f"c1-{i}" for i in range(5)] + [f"a-{i}" for i in range(3)] + [f"c2-{i}" for i in range(2)]
    assert _read_all(b, topic, "read_uncommitted", len(everything)) == everything
    # 5 + marker + 3 + marker + 2 + marker: nothing open, LSO == high watermark
    assert _latest(b, topic, "read_committed") == _latest(b, topic, "read_uncommitted") == 13


@pytest.mark.timeout(90)
def test_read_committed_stops_at_open_transaction(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("txn-open")
    create_topic(b.bootstrap, topic, 1)
    tx = _producer(b, unique("tid"))
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, value=b"first")
    tx.commit_transaction(30)  # offsets 0 (data), 1 (marker)
    tx.begin_transaction()
    tx.produce(topic, value=b"open-0")
    tx.produce(topic, value=b"open-1")
    tx.flush(30)  # offsets 2, 3: an open transaction from offset 2
    plain = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    plain.produce(topic, value=b"after-0")
    plain.produce(topic, value=b"after-1")
    assert plain.flush(30) == 0  # offsets 4, 5

    assert _latest(b, topic, "read_uncommitted") == 6
    assert _latest(b, topic, "read_committed") == 2  # the open transaction's first offset
    assert _read_all(b, topic, "read_committed", 1) == ["first"]
    assert _read_all(b, topic, "read_uncommitted", 5) == ["first", "open-0", "open-1", "after-0", "after-1"]

    c = _consumer(b, "read_committed")
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[str] = []
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            got += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
        assert got == ["first"]  # held at the open transaction
        tx.commit_transaction(30)
        wait_until(lambda: got.extend(m.value().decode() for m in c.consume(100, 0.2) if m.error() is None)
                   or len(got) >= 5, 20, "the records after the committed transaction", detail=lambda: got)
        assert got == ["first", "open-0", "open-1", "after-0", "after-1"]
    finally:
        c.close()
    assert _latest(b, topic, "read_committed") == 7


def _wire_fetch(w: WireClient, topic: str, replica_id: int, isolation: int) -> tuple[list[int], int, Any]:
    """Fetch v12 of partition 0 from offset 0 with the given replica id and isolation level: the base offsets of
    the batches returned, the response's last stable offset and its aborted transactions."""
    from kio.schema.fetch.v12 import request as fr

    resp = w.request(1, 12, cluster_id=None, replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=0,
                     max_bytes=1 << 20, isolation_level=isolation, session_id=0, session_epoch=-1,
                     topics=(fr.FetchTopic(topic=topic, partitions=(fr.FetchPartition(
                         partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                         log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                     forgotten_topics_data=(), rack_id="")
    (part,) = resp.responses[0].partitions
    assert int(part.error_code) == 0, part
    raw = bytes(part.records or b"")
    bases: list[int] = []
    pos = 0
    while pos < len(raw):
        base, length = struct.unpack_from(">qi", raw, pos)
        bases.append(base)
        pos += length + 12
    return bases, int(part.last_stable_offset), part.aborted_transactions


def _wire_latest(w: WireClient, topic: str, replica_id: int, isolation: int) -> int:
    """ListOffsets v5 latest (-1) of partition 0 with the given replica id and isolation level."""
    from kio.schema.list_offsets.v5 import request as lo

    r = w.request(2, 5, replica_id=replica_id, isolation_level=isolation, topics=(lo.ListOffsetsTopic(
        name=topic, partitions=(lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    part = r.topics[0].partitions[0]
    assert int(part.error_code) == 0, part
    return int(part.offset)


@pytest.mark.timeout(90)
def test_replica_id_and_isolation_level_bound_reads_on_the_wire(shared_broker: Broker) -> None:
    """How far a request reads, by its replica id and isolation level (Kafka's FetchIsolation): a client's
    Fetch (any negative replica id here) at read_committed stops at the last stable offset with an aborted
    transactions list, at read_uncommitted at the high watermark; a ListOffsets from a client is bound the same
    way, one from a debugging tool (-2) sees the log end whatever its level (Kafka's ReplicaManager.fetchOffset).
    Kafka reads a Fetch naming -3 (its own log-dir mover's id) to the log end; here it is a client's."""
    b = shared_broker
    topic = unique("txn-iso")
    create_topic(b.bootstrap, topic, 1)
    tx = _producer(b, unique("tid"))
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, value=b"first")
    tx.commit_transaction(30)  # offsets 0 (data), 1 (marker)
    tx.begin_transaction()
    tx.produce(topic, value=b"open-0")
    tx.flush(30)  # offset 2: an open transaction
    plain = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    plain.produce(topic, value=b"after-0")
    assert plain.flush(30) == 0  # offset 3
    try:
        with WireClient(b.bootstrap) as w:
            assert _wire_latest(w, topic, -1, 1) == 2 and _wire_latest(w, topic, -1, 0) == 4
            assert _wire_latest(w, topic, -2, 1) == _wire_latest(w, topic, -2, 0) == 4  # a debugging tool
            for replica_id in (-1, -2, -3):
                bases, lso, aborted = _wire_fetch(w, topic, replica_id, 1)
                assert (bases, lso, list(aborted)) == ([0, 1], 2, []), replica_id
                bases, lso, aborted = _wire_fetch(w, topic, replica_id, 0)
                assert (bases, lso, aborted) == ([0, 1, 2, 3], 2, None), replica_id
    finally:
        tx.abort_transaction(30)


@pytest.mark.timeout(90)
def test_zombie_producer_is_fenced(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("txn-zombie")
    create_topic(b.bootstrap, topic, 1)
    tid = unique("tid")
    zombie = _producer(b, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-0")
    zombie.flush(30)
    # a new instance with the same transactional id: the zombie's open transaction is aborted
    fresh = _producer(b, tid)
    fresh.init_transactions(30)
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh-0")
    fresh.commit_transaction(30)

    with pytest.raises(KafkaException) as exc:
        zombie.produce(topic, value=b"zombie-1")
        zombie.commit_transaction(30)
    err = exc.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err
    assert err.fatal(), err
    assert _read_all(b, topic, "read_committed", 1) == ["fresh-0"]
    assert _read_all(b, topic, "read_uncommitted", 2) == ["zombie-0", "fresh-0"]


@pytest.mark.timeout(120)
def test_send_offsets_to_transaction_visible_only_after_commit(shared_broker: Broker) -> None:
    b = shared_broker
    src, dst = unique("txn-in"), unique("txn-out")
    create_topic(b.bootstrap, src, 1)
    create_topic(b.bootstrap, dst, 1)
    feed = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        feed.produce(src, value=f"in-{i}".encode())
    assert feed.flush(30) == 0
    group = unique("ctp")
    c = _consumer(b, "read_committed", group)
    c.subscribe([src])
    p = _producer(b, unique("tid"))
    p.init_transactions(30)
    got: list = []
    wait_until(lambda: got.extend(m for m in c.consume(100, 0.5) if m.error() is None) or len(got) >= 10, 30,
               "the input records")
    p.begin_transaction()
    for m in got:
        p.produce(dst, value=m.value().upper())
    p.send_offsets_to_transaction([TopicPartition(src, 0, 10)], c.consumer_group_metadata(), 30)
    p.flush(30)

    # another client of the group, without require_stable: the pending commit is not visible
    observer = _consumer(b, "read_uncommitted", group)
    try:
        assert observer.committed([TopicPartition(src, 0)], timeout=10)[0].offset < 0
        p.commit_transaction(30)
        assert observer.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 10
    finally:
        observer.close()
    # and a read_committed client (require_stable) sees it too
    assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 10
    c.close()
    assert _read_all(b, dst, "read_committed", 10) == [f"IN-{i}" for i in range(10)]


@pytest.mark.timeout(120)
def test_aborted_offsets_are_not_committed(shared_broker: Broker) -> None:
    b = shared_broker
    src = unique("txn-in")
    create_topic(b.bootstrap, src, 1)
    group = unique("ctp")
    c = _consumer(b, "read_committed", group)
    p = _producer(b, unique("tid"))
    p.init_transactions(30)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(src, 0, 3)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 3
    c.close()


@pytest.mark.timeout(90)
def test_hung_transaction_is_aborted_at_its_timeout(shared_broker: Broker) -> None:
    b = shared_broker
    topic = unique("txn-hung")
    create_topic(b.bootstrap, topic, 1)
    hung = _producer(b, unique("tid"), **{"transaction.timeout.ms": 2000})
    hung.init_transactions(30)
    hung.begin_transaction()
    hung.produce(topic, value=b"hung-0")
    hung.flush(30)
    assert _latest(b, topic, "read_committed") == 0
    t0 = time.monotonic()
    # the coordinator aborts it (transaction.timeout.ms 2000, checked every 500 ms): the LSO moves on
    wait_until(lambda: _latest(b, topic, "read_committed") == 2, 15, "the hung transaction to be aborted")
    assert time.monotonic() - t0 < 10
    assert _read_all(b, topic, "read_uncommitted", 1) == ["hung-0"]
    assert _read_all(b, topic, "read_committed", 0, settle=0.5) == []
    # the hung producer learns it at its commit (its epoch was bumped by the abort)
    with pytest.raises(KafkaException):
        hung.commit_transaction(10)


@pytest.mark.timeout(60)
def test_transactional_batch_outside_the_transaction_is_refused(shared_broker: Broker) -> None:
    """KIP-890 part 1: the leader asks the coordinator before a transaction's first append to a
    partition; a batch for a partition never added to the transaction is refused."""
    b = shared_broker
    topic = unique("txn-verify")
    create_topic(b.bootstrap, topic, 1)
    with wire.Conn(b.bootstrap) as conn:
        # the transactional id is registered (Empty, no partitions); no AddPartitionsToTxn follows
        pid, epoch = wire.init_producer_id(conn, "verify-" + topic)
        batch = build_batch([(None, b"sneaky")], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, transactional=True)
        frame = wire.encode_request(wire.PRODUCE, 3, 77, wire.produce_body({(topic, 0): batch},
                                                                           transactional_id="verify-" + topic))
        conn.send(frame)
        r = wire.Reader(conn.recv_frame())
        r.int32()
        code, _ = wire.parse_produce_v3(r)[(topic, 0)]
    assert code == wire.INVALID_TXN_STATE
    assert _latest(b, topic, "read_uncommitted") == 0


@pytest.mark.timeout(90)
def test_aiokafka_transactional_producer(shared_broker: Broker) -> None:
    from aiokafka import AIOKafkaProducer

    b = shared_broker
    topic = unique("txn-aio")
    create_topic(b.bootstrap, topic, 1)

    group = unique("aio-group")

    async def run() -> None:
        from aiokafka.structs import TopicPartition as AioTP

        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=unique("aio-tid"),
                             enable_idempotence=True)
        await p.start()
        try:
            async with p.transaction():
                for i in range(4):
                    await p.send(topic, f"ok-{i}".encode())
                await p.send_offsets_to_transaction({AioTP(topic, 0): 4}, group)
            await p.begin_transaction()
            for i in range(2):
                await p.send(topic, f"no-{i}".encode())
            await p.send_offsets_to_transaction({AioTP(topic, 0): 6}, group)
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic, b"ok-4")
        finally:
            await p.stop()

    asyncio.run(run())
    assert _read_all(b, topic, "read_committed", 5) == [f"ok-{i}" for i in range(5)]
    assert _read_all(b, topic, "read_uncommitted", 7) == ["ok-0", "ok-1", "ok-2", "ok-3", "no-0", "no-1", "ok-4"]
    c = _consumer(b, "read_committed", group)
    try:  # the committed transaction's offsets, not the aborted one's
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 4
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_write_txn_markers_from_a_client_is_refused(shared_broker: Broker) -> None:
    """WriteTxnMarkers needs CLUSTER_ACTION (a broker's listener): a client cannot end, or forge
    the end of, someone else's transaction."""
    from kio.schema.write_txn_markers.v1 import request as wtm

    from odradek.client.wire import WireClient

    b = shared_broker
    topic = unique("txn-forge")
    create_topic(b.bootstrap, topic, 1)
    tx = _producer(b, unique("tid"))
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(topic, value=b"open")
    tx.flush(30)
    marker = wtm.WritableTxnMarker(
        producer_id=0, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=(wtm.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
    )
    with WireClient(b.bootstrap) as w:
        resp = w.request(27, 1, markers=(marker,))
    codes = [int(p.error_code) for m in resp.markers for t in m.topics for p in t.partitions]
    assert codes == [31]  # CLUSTER_AUTHORIZATION_FAILED
    assert _latest(b, topic, "read_committed") == 0  # still held at the open transaction
    tx.commit_transaction(30)
    assert _read_all(b, topic, "read_committed", 1) == ["open"]


@pytest.mark.timeout(60)
def test_txn_offset_commit_without_add_offsets_is_refused(shared_broker: Broker) -> None:
    """KIP-890 part 1 for offsets: a TxnOffsetCommit whose group partition was never added to the
    transaction (no AddOffsetsToTxn) would leave offsets pending for ever; it is refused."""
    import datetime

    from kio.schema.txn_offset_commit.v3 import request as toc

    from odradek.client.wire import WireClient

    b = shared_broker
    topic = unique("txn-offsets")
    create_topic(b.bootstrap, topic, 1)
    tid, group = unique("tid"), unique("g")
    with WireClient(b.bootstrap) as w:
        init = None
        for _ in range(50):
            init = w.request(22, 3, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                             producer_id=-1, producer_epoch=-1)
            if int(init.error_code) not in (14, 15, 16, 51):
                break
            time.sleep(0.1)
        assert init is not None and int(init.error_code) == 0
        w.request(10, 3, key=group, key_type=0)  # creates __consumer_offsets
        resp = None
        for _ in range(50):
            resp = w.request(28, 3, transactional_id=tid, group_id=group, producer_id=int(init.producer_id),
                             producer_epoch=int(init.producer_epoch), generation_id=-1, member_id="",
                             group_instance_id=None, topics=(toc.TxnOffsetCommitRequestTopic(
                                 name=topic, partitions=(toc.TxnOffsetCommitRequestPartition(
                                     partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                     committed_metadata=""),)),))
            code = int(resp.topics[0].partitions[0].error_code)
            if code not in (14, 15, 16):  # the coordinator is still loading
                break
            time.sleep(0.1)
    assert code == wire.INVALID_TXN_STATE
    c = _consumer(b, "read_committed", group)
    try:  # nothing pending: a require_stable fetch answers at once
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < 0
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_list_and_describe_transactions_and_producers(shared_broker: Broker) -> None:
    """KIP-664's tools' APIs: an open transaction is listed as Ongoing with its partitions, and the
    partition's producer shows where the transaction started (what find-hanging looks for)."""
    from odradek.client.wire import WireClient

    b = shared_broker
    topic = unique("txn-describe")
    create_topic(b.bootstrap, topic, 1)
    tid = unique("tid")
    p = _producer(b, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x")
    p.flush(30)
    with WireClient(b.bootstrap) as w:
        listed = w.request(66, 1, state_filters=("Ongoing",), producer_id_filters=(), duration_filter=-1)
        assert int(listed.error_code) == 0
        mine = [t for t in listed.transaction_states if t.transactional_id == tid]
        assert len(mine) == 1 and mine[0].transaction_state == "Ongoing"
        pid = int(mine[0].producer_id)
        # (an unknown id is answered with start time -1, which kio's reader cannot decode)
        (d,) = w.request(65, 0, transactional_ids=(tid,)).transaction_states
        assert int(d.error_code) == 0 and d.transaction_state == "Ongoing" and int(d.producer_id) == pid
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
        from kio.schema.describe_producers.v0 import request as dp

        prod = w.request(61, 0, topics=(dp.TopicRequest(name=topic, partition_indexes=(0,)),))
        part = prod.topics[0].partitions[0]
        assert int(part.error_code) == 0
        assert [(int(s.producer_id), int(s.current_txn_start_offset)) for s in part.active_producers] == [(pid, 0)]
    p.commit_transaction(30)
    with WireClient(b.bootstrap) as w:
        d = w.request(65, 0, transactional_ids=(tid,)).transaction_states[0]
        assert d.transaction_state == "CompleteCommit"
        prod = w.request(61, 0, topics=(dp.TopicRequest(name=topic, partition_indexes=(0,)),))
        assert [int(s.current_txn_start_offset) for s in prod.topics[0].partitions[0].active_producers] == [-1]


@pytest.mark.timeout(60)
def test_idle_transactional_id_expires(make_broker: BrokerFactory) -> None:
    """transactional.id.expiration.ms: an id idle that long with no transaction open is forgotten
    (a tombstone in __transaction_state); an id with an open transaction is kept."""
    from odradek.client.wire import WireClient

    b = make_broker({"transaction.state.log.num.partitions": 2, "transactional.id.expiration.ms": 1500,
                     "transaction.remove.expired.transaction.cleanup.interval.ms": 300})
    topic = unique("txn-expire")
    create_topic(b.bootstrap, topic, 1)
    idle, busy = unique("idle"), unique("busy")
    p_idle = _producer(b, idle)
    p_idle.init_transactions(30)
    p_idle.begin_transaction()
    p_idle.produce(topic, value=b"done")
    p_idle.commit_transaction(30)
    p_busy = _producer(b, busy, **{"transaction.timeout.ms": 60000})
    p_busy.init_transactions(30)
    p_busy.begin_transaction()
    p_busy.produce(topic, value=b"open")
    p_busy.flush(30)

    def listed() -> set[str]:
        with WireClient(b.bootstrap) as w:
            r = w.request(66, 0, state_filters=(), producer_id_filters=())
            return {t.transactional_id for t in r.transaction_states}

    assert {idle, busy} <= listed()
    wait_until(lambda: idle not in listed(), 15, "the idle transactional id to expire")
    assert busy in listed()
    assert b.log_text().count(f"transactional id {idle} expired") == 1


@pytest.mark.timeout(120)
def test_transactions_survive_a_broker_kill(make_broker: BrokerFactory) -> None:
    """kill -9 with one transaction committed and one open: after the restart the committed
    offsets and data are there, the open transaction still holds read_committed consumers at its
    first offset and its offsets stay pending, until a new instance of the producer aborts it."""
    b = make_broker({"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2,
                     "group.initial.rebalance.delay.ms": 0})
    src, dst = unique("in"), unique("out")
    create_topic(b.bootstrap, src, 1)
    create_topic(b.bootstrap, dst, 1)
    group, tid = unique("g"), unique("tid")
    meta_consumer = _consumer(b, "read_committed", group)
    gmd = meta_consumer.consumer_group_metadata()
    p = _producer(b, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(dst, value=b"committed")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], gmd, 30)
    p.commit_transaction(30)  # dst: 0 data, 1 marker
    p.begin_transaction()
    p.produce(dst, value=b"open")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 9)], gmd, 30)
    p.flush(30)  # dst: 2 data, open
    meta_consumer.close()
    b.kill()
    b.start()

    assert _latest(b, dst, "read_committed") == 2
    assert _latest(b, dst, "read_uncommitted") == 3
    observer = _consumer(b, "read_uncommitted", group)  # no require_stable: the last committed offset
    try:
        assert observer.committed([TopicPartition(src, 0)], timeout=20)[0].offset == 5
    finally:
        observer.close()
    # a new instance fences the old producer and aborts its open transaction
    fresh = _producer(b, tid)
    fresh.init_transactions(60)
    wait_until(lambda: _latest(b, dst, "read_committed") == 4, 15, "the open transaction to be aborted")
    stable = _consumer(b, "read_committed", group)  # require_stable: nothing pending any more
    try:
        assert stable.committed([TopicPartition(src, 0)], timeout=20)[0].offset == 5
    finally:
        stable.close()
    assert _read_all(b, dst, "read_committed", 1) == ["committed"]


@pytest.mark.timeout(90)
def test_kafka_python_transactional_producer(shared_broker: Broker) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KpTP

    b = shared_broker
    topic, group = unique("txn-kp"), unique("kp-group")
    create_topic(b.bootstrap, topic, 1)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=unique("kp-tid"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"ok-{i}".encode())
        p.send_offsets_to_transaction({KpTP(topic, 0): OffsetAndMetadata(3, "", -1)}, group)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"no-0")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert _read_all(b, topic, "read_committed", 3) == ["ok-0", "ok-1", "ok-2"]
    assert _read_all(b, topic, "read_uncommitted", 4) == ["ok-0", "ok-1", "ok-2", "no-0"]
    c = _consumer(b, "read_committed", group)
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    finally:
        c.close()
