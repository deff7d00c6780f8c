"""Transactions on a 3-broker cluster: the coordinator is the leader of the transactional id's
__transaction_state partition and sends WriteTxnMarkers to the leaders of the transaction's
partitions on the other brokers; when the coordinator's broker is killed, the transactional id
moves with that leadership (the new coordinator loads it from its replica)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .cluster import Cluster
from .test_replication import create
from .zk import Ensemble

PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3, {"transaction.state.log.num.partitions": "3"}).start()
    yield c
    c.stop()


def _read(c: Cluster, topic: str, isolation: str, expect: int, settle: float = 1.5) -> list[str]:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000})
    cons.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[str] = []
    deadline = time.monotonic() + 60
    quiet = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msgs = [m for m in cons.consume(500, 0.3) if m.error() is None]
            out += [m.value().decode() for m in msgs]
            if msgs:
                quiet = time.monotonic()
            elif len(out) >= expect and time.monotonic() - quiet > settle:
                break
    finally:
        cons.close()
    return sorted(out)


def _coordinator(c: Cluster, tid: str) -> int:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    md = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    from odradek.coordinator.transaction.records import partition_for

    return int(md.partitions[partition_for(tid, len(md.partitions))].leader)


@pytest.mark.timeout(240)
def test_markers_reach_leaders_on_other_brokers_and_the_coordinator_moves(cluster: Cluster) -> None:
    c = cluster
    topic = "txc"
    create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    leaders = {c.leader(topic, p) for p in range(PARTITIONS)}
    assert len(leaders) > 1  # the transaction spans partitions led by different brokers
    tid = "cluster-tid"
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "topic.metadata.refresh.interval.ms": 1000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"c1-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"a-{i}".encode(), partition=i % PARTITIONS)
    p.flush(60)
    p.abort_transaction(60)

    committed = sorted(f"c1-{i}" for i in range(30))
    assert _read(c, topic, "read_committed", 30) == committed
    assert len(_read(c, topic, "read_uncommitted", 60)) == 60

    # an open transaction, then its coordinator's broker dies: the new coordinator has the id
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=f"lost-{i}".encode(), partition=i % PARTITIONS)
    p.flush(60)
    coord = _coordinator(c, tid)
    c.kill(coord)
    # a new instance of the app: fenced the old one, aborted its open transaction, commits its own
    fresh = Producer({"bootstrap.servers": ",".join(b.bootstrap for i, b in c.brokers.items() if i != coord),
                      "transactional.id": tid, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000})
    fresh.init_transactions(90)
    assert _coordinator(c, tid) != coord
    fresh.begin_transaction()
    for i in range(6):
        fresh.produce(topic, value=f"c2-{i}".encode(), partition=i % PARTITIONS)
    fresh.commit_transaction(90)
    expected = sorted(committed + [f"c2-{i}" for i in range(6)])
    assert _read(c, topic, "read_committed", len(expected)) == expected


@pytest.mark.timeout(180)
def test_leader_asks_a_coordinator_on_another_broker(cluster: Cluster) -> None:
    """KIP-890 part 1 across brokers: the leader of a partition sends AddPartitionsToTxn
    (VerifyOnly) to the transactional id's coordinator on another broker; a transactional batch
    for a partition never added to the transaction is refused, one added is appended."""
    import datetime

    from integration import wire
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic

    from odradek.client.wire import WireClient
    from odradek.protocol.records import build_batch

    c = cluster
    topic = "txv"
    create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    tid = "verify-remote"
    # the coordinator of tid (creating __transaction_state on the way)
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid})
    p.init_transactions(60)
    coord = _coordinator(c, tid)
    part = next(i for i in range(PARTITIONS) if c.leader(topic, i) != coord)
    leader = c.leader(topic, part)
    with WireClient(c.brokers[coord].bootstrap) as w:
        init = w.request(22, 3, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                         producer_id=-1, producer_epoch=-1)
        assert int(init.error_code) == 0
    pid, epoch = int(init.producer_id), int(init.producer_epoch)

    def produce(seq: int) -> int:
        batch = build_batch([(None, b"v")], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, transactional=True)
        with wire.Conn(c.brokers[leader].bootstrap) as conn:
            conn.send(wire.encode_request(wire.PRODUCE, 3, 5, wire.produce_body({(topic, part): batch}, acks=-1,
                                                                               transactional_id=tid)))
            r = wire.Reader(conn.recv_frame())
            r.int32()
            return wire.parse_produce_v3(r)[(topic, part)][0]

    assert produce(0) == wire.INVALID_TXN_STATE  # not in the (empty) transaction
    with WireClient(c.brokers[coord].bootstrap) as w:
        added = w.request(24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                          v3_and_below_producer_epoch=epoch,
                          v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(part,)),))
        assert int(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code) == 0
    assert produce(0) == wire.NONE


@pytest.mark.timeout(240)
def test_coordinator_killed_mid_commit_the_new_one_completes_it(tmp_path: Path, zookeeper: Ensemble) -> None:
    """EndTxn is answered once PrepareCommit is replicated; the coordinator then writes the markers.
    One partition's leader is paused (SIGSTOP, shorter than its ZooKeeper session) so its marker
    cannot be written, and the coordinator is killed -9 right after the commit returns: the broker
    that takes over the transactional id's __transaction_state partition finds PrepareCommit and
    completes the commit (markers to every partition, CompleteCommit)."""
    from odradek.coordinator.transaction.records import partition_for

    c = Cluster(tmp_path, zookeeper, 3, {"transaction.state.log.num.partitions": "3",
                                         "transaction.state.log.replication.factor": "2",
                                         "transaction.state.log.min.isr": "1"}).start()
    try:
        topic = "txm"
        create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "1"})
        warm = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "warm-up"})
        warm.init_transactions(60)  # creates __transaction_state
        assignment = c.zk_json("/brokers/topics/__transaction_state")["partitions"]
        data_leaders = {c.leader(topic, p): p for p in range(PARTITIONS)}
        for n in range(200):  # a transactional id whose coordinator partition has no replica on L
            tid = f"mid-commit-{n}"
            replicas = assignment[str(partition_for(tid, 3))]
            outside = [b for b in c.brokers if b not in replicas]
            if outside and outside[0] in data_leaders:
                break
        else:
            pytest.fail("no suitable transactional id")
        paused = outside[0]
        p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                      "topic.metadata.refresh.interval.ms": 1000})
        p.init_transactions(60)
        coord = _coordinator(c, tid)
        assert coord in replicas and coord != paused
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, value=f"v-{i}".encode(), partition=i % PARTITIONS)
        p.flush(60)
        c.pause(paused)
        t0 = time.monotonic()
        try:
            p.commit_transaction(30)  # PrepareCommit written on the coordinator's replicas
            c.kill(coord)  # its marker to the paused leader is still in flight
        finally:
            time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
            c.resume(paused)
        survivors = [b for b in c.brokers if b != coord]
        expected = sorted(f"v-{i}" for i in range(30))
        assert _read(c, topic, "read_committed", 30) == expected
        taken_over = "".join(c.brokers[b].log_text() for b in survivors)
        assert "; 1 to complete" in taken_over  # the new coordinator found the PrepareCommit
    finally:
        c.stop()


@pytest.mark.timeout(300)
def test_partition_leader_killed_mid_transaction(cluster: Cluster) -> None:
    """The broker leading one of a transaction's partitions (not the coordinator's broker) is killed
    -9 between the transaction's writes: the producer's later writes go to the partition's new
    leader, the commit completes (its marker is written by the new leader, so read_committed gets
    past it), a following transaction aborts cleanly with that broker still down, and
    read_committed holds every committed record exactly once. The killed broker, started again,
    rejoins the partition's ISR: it has copied the markers."""
    from waiting import wait_until

    c = cluster
    topic = "txk"
    create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    tid = "leader-killed"
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "topic.metadata.refresh.interval.ms": 1000})
    p.init_transactions(60)
    coord = _coordinator(c, tid)
    part = next(i for i in range(PARTITIONS) if c.leader(topic, i) != coord)
    victim = c.leader(topic, part)

    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"k1-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0  # on the victim (acks=all: on the followers too)
    c.kill(victim)
    wait_until(lambda: c.leader(topic, part) not in (-1, victim), 30, "a new leader")
    new_leader = c.leader(topic, part)
    for i in range(30, 60):
        p.produce(topic, value=f"k1-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(90)
    assert _coordinator(c, tid) == coord  # the coordinator did not move

    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=f"a-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0
    p.abort_transaction(90)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=f"k2-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(90)

    expected = sorted([f"k1-{i}" for i in range(60)] + [f"k2-{i}" for i in range(9)])
    assert _read(c, topic, "read_committed", len(expected)) == expected
    uncommitted = _read(c, topic, "read_uncommitted", len(expected) + 30)
    assert uncommitted == sorted(expected + [f"a-{i}" for i in range(30)])
    assert c.leader(topic, part) == new_leader

    c.brokers[victim].start()
    wait_until(lambda: victim in c.state(topic, part).get("isr", []), 60, "the killed broker back in the ISR")
    assert _read(c, topic, "read_committed", len(expected)) == expected


@pytest.mark.timeout(240)
def test_tv2_leaders_add_partitions_on_a_coordinator_elsewhere(cluster: Cluster) -> None:
    """transaction.version 2 across brokers: the leaders of a Produce v12's partitions and the
    group coordinator of a TxnOffsetCommit v5 add them to the transaction with AddPartitionsToTxn
    v5 to the coordinator on another broker; EndTxn v5 bumps the epoch and the markers (with it)
    reach every leader; the old epoch is fenced."""
    import subprocess
    import sys

    from integration.test_transactions_tv2 import INVALID_PRODUCER_EPOCH, NONE, Tv2Producer, advertised

    from odradek.client.wire import WireClient

    c = cluster
    topic, tid, group = "tv2c", "tv2-remote", "tv2-group"
    create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    r = subprocess.run([sys.executable, "-m", "odradek", "features", "--bootstrap-server", c.bootstrap, "upgrade",
                        "--feature", "transaction.version=2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    for b in c.brokers.values():  # every broker learns the finalized level from ZooKeeper
        with WireClient(b.bootstrap) as w:
            while advertised(w)[26] != 5 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert advertised(w) == {0: 12, 24: 5, 26: 5, 28: 5}
    Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid}).init_transactions(60)
    coord = _coordinator(c, tid)
    remote = [i for i in range(PARTITIONS) if c.leader(topic, i) != coord]
    assert remote
    conns = {i: WireClient(b.bootstrap) for i, b in c.brokers.items()}
    try:
        p = Tv2Producer(conns[coord], tid)
        epoch0 = p.epoch
        for i in range(PARTITIONS):
            assert p.produce(topic, i, [f"c1-{i}".encode()], via=conns[c.leader(topic, i)]) == NONE
        found = None
        for _ in range(100):  # __consumer_offsets is created on the first FindCoordinator
            found = conns[coord].request(10, 3, key=group, key_type=0)
            if int(found.error_code) == NONE:
                break
            time.sleep(0.2)
        assert found is not None and int(found.error_code) == NONE
        assert p.commit_offsets(group, topic, 1, via=conns[int(found.node_id)]) == NONE
        assert int(p.end(True).error_code) == NONE and p.epoch == epoch0 + 1
        part = remote[0]
        leader = conns[c.leader(topic, part)]
        assert p.produce(topic, part, [b"a2"], via=leader) == NONE
        assert int(p.end(False).error_code) == NONE and p.epoch == epoch0 + 2
        assert p.produce(topic, part, [b"zombie"], epoch=epoch0, via=leader) == INVALID_PRODUCER_EPOCH
    finally:
        for w in conns.values():
            w.close()
    assert _read(c, topic, "read_committed", PARTITIONS) == sorted(f"c1-{i}" for i in range(PARTITIONS))
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        assert cons.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 1
    finally:
        cons.close()


STARTING_TOGETHER = 200


@pytest.mark.timeout(300)
def test_many_transactional_producers_start_before_the_topic_exists(cluster: Cluster) -> None:
    """200 transactional producers start at once on a fresh cluster: their FindCoordinator and
    InitProducerId requests all arrive before __transaction_state exists. Each broker keeps one
    request to create it in flight (coordinator/runtime.py TopicCreationGate, Kafka's
    AutoTopicCreationManager), not one per request, and every producer gets its id and commits."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    c = cluster
    topic = "tx-start"
    create(c, topic, PARTITIONS, 1)
    start = threading.Barrier(STARTING_TOGETHER)

    def run(n: int) -> float:
        p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": f"starting-{n}", "linger.ms": 5})
        start.wait(60)
        t0 = time.monotonic()
        p.init_transactions(120)
        took = time.monotonic() - t0
        p.begin_transaction()
        p.produce(topic, value=f"s-{n}".encode(), partition=n % PARTITIONS)
        p.commit_transaction(120)
        return took

    with ThreadPoolExecutor(STARTING_TOGETHER) as pool:
        took = sorted(pool.map(run, range(STARTING_TOGETHER)))
    asked = {b: broker.log_text().count("asking for the creation of __transaction_state")
             for b, broker in c.brokers.items()}
    print(f"{STARTING_TOGETHER} producers: init_transactions median {took[len(took) // 2]:.2f} s, "
          f"max {took[-1]:.2f} s; creation requests per broker {asked}")
    # one in flight per broker, asked again at most every 2 s until the controller has made it known
    assert sum(asked.values()) >= 1 and all(n <= 1 + took[-1] / 2 for n in asked.values()), asked
    expected = sorted(f"s-{n}" for n in range(STARTING_TOGETHER))
    assert _read(c, topic, "read_committed", STARTING_TOGETHER) == expected
