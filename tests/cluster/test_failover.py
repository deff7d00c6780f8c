"""Faults injected into a three-broker cluster on a real ZooKeeper: ISR changes, too few
in-sync replicas, controller failover, a zombie leader, controlled shutdown and preferred
leader election."""

from __future__ import annotations

import contextlib
import signal
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until

from odradek.client.wire import WireClient
from odradek.protocol.records import build_batch

from .cluster import Cluster
from .test_replication import create, drain
from .zk import Ensemble


def _cluster(tmp_path: Path, zk: Ensemble, **overrides: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zk, 3, overrides).start()
    yield c
    c.stop()


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, zookeeper)


def _metadata_isr(c: Cluster, via: int, topic: str, partition: int) -> list[int] | None:
    admin = AdminClient({"bootstrap.servers": c.brokers[via].bootstrap})
    md = admin.list_topics(topic, timeout=10)
    t = md.topics[topic]
    if partition not in t.partitions:
        # once on CI, during the ISR shrink, the leader answered for the topic without its partition (issue 33).
        # Not reproduced since (about 20 runs, some under load); the metadata cache's windows found meanwhile are
        # closed (tests/unit/controller/test_metadata_cache.py), and a broker no longer refuses a controller request
        # ZooKeeper is too slow to confirm (tests/cluster/test_controller_epoch_check.py; the controller never sends
        # a refused one again), nor answers a topic with fewer partitions than its assignment has. Clients retry on
        # such an answer and so does this
        # wait (None: not shown); the warning keeps what the broker said, for the next time it happens
        warnings.warn(f"issue 33: broker {md.orig_broker_id} answered Metadata for {topic} without partition "
                      f"{partition} (topic error {t.error}, partitions {sorted(t.partitions)})", stacklevel=2)
        return None
    return sorted(t.partitions[partition].isrs)


def test_stopped_follower_leaves_and_rejoins_the_isr(tmp_path: Path, zookeeper: Ensemble) -> None:
    # a session timeout longer than the lag time: the leader, not the session expiry, shrinks the ISR
    gen = _cluster(tmp_path, zookeeper, **{"zookeeper.session.timeout.ms": "10000", "replica.lag.time.max.ms": "2000"})
    c = next(gen)
    try:
        create(c, "isr", 1, 3)
        leader = c.leader("isr", 0)
        follower = next(b for b in c.brokers if b != leader)
        c.pause(follower)
        try:
            wait_until(lambda: follower not in c.state("isr", 0)["isr"], 15,
                       "the stopped follower to leave the ISR")
            assert c.state("isr", 0)["leader_epoch"] == 0  # the leader changed the ISR, not the controller
            wait_until(lambda: (isr := _metadata_isr(c, leader, "isr", 0)) is not None and follower not in isr, 10,
                           "metadata to show it")
            p = Producer({"bootstrap.servers": c.brokers[leader].bootstrap, "acks": "all"})
            for i in range(500):
                p.produce("isr", str(i).encode(), partition=0)
            assert p.flush(30) == 0
        finally:
            c.resume(follower)
        wait_until(lambda: follower in c.state("isr", 0)["isr"], 20, "the follower to rejoin the ISR")
        wait_until(lambda: follower in (_metadata_isr(c, leader, "isr", 0) or []), 10, "metadata to show it back")
        sizes = wait_until(lambda: len({sum(f.stat().st_size for f in b.segment_files("isr", 0)) for b in c.brokers.values()}) == 1,
                           10, "identical replicas")
        assert sizes
    finally:
        next(gen, None)


def _produce_raw(bootstrap: str, topic: str, partition: int, acks: int) -> int:
    """One Produce v9 with one batch; returns the partition's error code."""
    batch = build_batch([(b"k", b"v")], timestamp=int(time.time() * 1000))
    with WireClient(bootstrap) as w:
        resp = w.request(0, 9, transactional_id=None, acks=acks, timeout=__import__("datetime").timedelta(seconds=5),
                         topic_data=(_topic_data(topic, partition, batch),))
    return int(resp.responses[0].partition_responses[0].error_code)


def _topic_data(topic: str, partition: int, batch: bytes) -> object:
    import kio.schema.produce.v9.request as r

    return r.TopicProduceData(name=topic, partition_data=(r.PartitionProduceData(index=partition, records=batch),))


def test_min_insync_replicas(cluster: Cluster) -> None:
    c = cluster
    create(c, "minisr", 1, 3, **{"min.insync.replicas": "2"})
    leader = c.leader("minisr", 0)
    others = [b for b in c.brokers if b != leader]
    # ZooKeeper names the leader before its LeaderAndIsr has arrived: NOT_LEADER_OR_FOLLOWER (6) until then,
    # which a client retries
    wait_until(lambda: _produce_raw(c.brokers[leader].bootstrap, "minisr", 0, -1) == 0, 10,
               "the leader to lead")
    for b in others:
        c.kill(b)
    wait_until(lambda: c.state("minisr", 0)["isr"] == [leader], 30, "the ISR to shrink to the leader")
    wait_until(lambda: _produce_raw(c.brokers[leader].bootstrap, "minisr", 0, -1) == 19, 10,
               "NOT_ENOUGH_REPLICAS")
    assert _produce_raw(c.brokers[leader].bootstrap, "minisr", 0, 1) == 0  # acks=1 still works
    c.brokers[others[0]].start()
    wait_until(lambda: len(c.state("minisr", 0)["isr"]) == 2, 30, "a second in-sync replica")
    wait_until(lambda: _produce_raw(c.brokers[leader].bootstrap, "minisr", 0, -1) == 0, 10,
               "acks=all to work again")


def test_controller_failover(cluster: Cluster) -> None:
    c = cluster
    old, epoch = c.controller(), c.controller_epoch()
    assert old is not None
    t0 = time.monotonic()
    c.kill(old)
    new = wait_until(lambda: (x := c.controller()) not in (None, old) and x, 4 + 10, "a new controller")
    assert new != old and time.monotonic() - t0 < 4 + 10
    assert c.controller_epoch() > epoch
    live = [b for b in c.brokers if b != old]
    admin = AdminClient({"bootstrap.servers": ",".join(c.brokers[b].bootstrap for b in live)})
    for b in live:
        wait_until(lambda b=b: AdminClient({"bootstrap.servers": c.brokers[b].bootstrap}).list_topics(timeout=5)
                   .controller_id == new,
                   10, f"broker {b} to know the new controller")
    admin.create_topics([NewTopic("after", 2, 2)])["after"].result(30)
    for q in range(2):
        assert c.leader("after", q) in live


def test_zombie_leader_is_fenced_and_truncated(cluster: Cluster) -> None:
    c = cluster
    controller = c.controller()
    zombie = next(b for b in c.brokers if b != controller)
    rest = [b for b in c.brokers if b != zombie]
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("z", 1, replica_assignment=[[zombie, *rest]], config={"min.insync.replicas": "2"})])["z"].result(30)
    wait_until(lambda: c.leader("z", 0) == zombie, 10, "the zombie-to-be to lead")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                  "topic.metadata.refresh.interval.ms": 500, "retry.backoff.ms": 100})
    acked: list[int] = []
    failed: list[object] = []

    def cb(err: object, msg: object) -> None:
        (failed.append(err) if err else acked.append(int(msg.value())))  # type: ignore[attr-defined]

    n = 0

    def produce(count: int) -> None:
        nonlocal n
        for _ in range(count):
            p.produce("z", str(n).encode(), partition=0, on_delivery=cb)
            n += 1
            p.poll(0)

    produce(2000)
    assert p.flush(30) == 0
    c.pause(zombie)
    try:
        produce(1000)  # some of it goes to the stopped leader until the client learns of the new one
        wait_until(lambda: c.leader("z", 0) not in (zombie, -1), 20, "a new leader")
        produce(2000)
        p.poll(1)
    finally:
        c.resume(zombie)
    produce(1000)
    assert p.flush(60) == 0
    assert not failed, failed[:3]
    # the old leader rejoins as a follower with exactly the new leader's log
    wait_until(lambda: zombie in c.state("z", 0)["isr"], 40, "the zombie to rejoin the ISR as a follower")
    assert c.leader("z", 0) != zombie
    got = [int(v) for v in drain(c.bootstrap, "z", 1)[0]]
    assert len(got) == len(set(got)) and got == sorted(got)
    assert set(acked) <= set(got) and len(acked) == n
    wait_until(lambda: len({sum(f.stat().st_size for f in b.segment_files("z", 0)) for b in c.brokers.values()}) == 1,
               20, "identical replicas")


def test_controlled_shutdown_and_preferred_election(cluster: Cluster) -> None:
    c = cluster
    create(c, "cs", 3, 3)
    preferred = {q: c.leader("cs", q) for q in range(3)}
    victim = preferred[0]
    led = [q for q, b in preferred.items() if b == victim]
    proc = c.brokers[victim].proc
    assert proc is not None
    proc.send_signal(signal.SIGTERM)
    # leadership moves while the broker is still running (before it exits)
    wait_until(lambda: all(c.leader("cs", q) != victim for q in led) or proc.poll() is not None, 30, "moves")
    assert all(c.leader("cs", q) != victim for q in led)
    assert proc.wait(30) == 0
    c.brokers[victim].start()
    wait_until(lambda: all(victim in c.state("cs", q)["isr"] for q in range(3)), 30,
               "the broker back in the ISRs")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    tps = [TopicPartition("cs", q) for q in led]
    try:
        admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
    except KafkaException as e:  # a partition another election already fixed answers ELECTION_NOT_NEEDED
        assert "not needed" in str(e).lower(), e
    wait_until(lambda: all(c.leader("cs", q) == victim for q in led), 10, "preferred leaders back")


def test_controlled_shutdown_of_the_controller(cluster: Cluster) -> None:
    """SIGTERM to the controller: its ControlledShutdown request goes to itself over a new
    connection, which it must still accept (it refused it once the stop was asked for, so every
    attempt failed, the broker waited out the retries and left its partitions without a leader
    until the next controller moved them)."""
    c = cluster
    create(c, "csc", 3, 3)
    ctl = c.controller()
    assert ctl is not None
    led = [q for q in range(3) if c.leader("csc", q) == ctl]
    assert led, "three partitions on three brokers: each leads one"
    broker = c.brokers[ctl]
    proc = broker.proc
    assert proc is not None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    text = broker.log_text()
    assert f"controlled shutdown of broker {ctl} succeeded" in text, broker.log_tail()
    assert "controlled shutdown attempt" not in text, broker.log_tail()
    wait_until(lambda: c.controller() not in (None, ctl), 20, "a new controller")
    assert all(c.leader("csc", q) not in (-1, ctl) for q in led)


def test_zookeeper_outage(tmp_path: Path) -> None:
    """ZooKeeper down: leaders keep serving produce (acks=all) and fetch; what needs ZooKeeper
    fails at once with a clear, retriable error; when it returns, the cluster has a controller
    again and nothing acknowledged is lost."""
    zk = Ensemble(tmp_path / "zk", 1).start()
    c = Cluster(tmp_path, zk, 3, {"zookeeper.session.timeout.ms": "10000"}).start()
    try:
        create(c, "zk", 2, 3, **{"min.insync.replicas": "2"})
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
        for i in range(1000):
            p.produce("zk", str(i).encode(), partition=i % 2)
        assert p.flush(30) == 0
        zk.servers[0].stop()
        time.sleep(1.0)
        for i in range(1000, 2000):
            p.produce("zk", str(i).encode(), partition=i % 2)
        assert p.flush(30) == 0, "leaders stopped serving without ZooKeeper"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        t0 = time.monotonic()
        with pytest.raises(KafkaException) as exc:
            admin.create_topics([NewTopic("during", 1, 3)], operation_timeout=5)["during"].result(20)
        assert "ZooKeeper" in str(exc.value) and time.monotonic() - t0 < 10
        zk.servers[0].start()
        wait_until(lambda: c.controller() is not None, 20, "a controller after ZooKeeper returned")
        wait_until(lambda: _try_create(admin, "after-zk"), 30, "topic creation to work again")
        got = drain(c.bootstrap, "zk", 2)
        assert sorted(int(v) for vs in got.values() for v in vs) == list(range(2000))
    finally:
        c.stop()
        zk.stop()


def _try_create(admin: AdminClient, name: str) -> bool:
    try:
        admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=10)[name].result(20)
        return True
    except KafkaException as e:
        return "already exists" in str(e).lower()


def test_auto_leader_rebalance_moves_leadership_back(tmp_path: Path, zookeeper: Ensemble) -> None:
    """auto.leader.rebalance.enable: once a restarted broker is back in the ISR, the controller's
    periodic check (leader.imbalance.check.interval.seconds) makes it the leader of the
    partitions it is the preferred replica of again."""
    gen = _cluster(tmp_path, zookeeper, **{"leader.imbalance.check.interval.seconds": "2"})
    c = next(gen)
    try:
        create(c, "bal", 3, 3)
        preferred = {q: c.zk_json("/brokers/topics/bal")["partitions"][str(q)][0] for q in range(3)}
        wait_until(lambda: all(c.leader("bal", q) == preferred[q] for q in range(3)), 10, "preferred leaders")
        victim = next(b for b in c.brokers if b != c.controller())
        mine = [q for q, b in preferred.items() if b == victim]
        assert mine
        c.kill(victim)
        wait_until(lambda: all(c.leader("bal", q) != victim for q in mine), 20, "leadership to move away")
        c.brokers[victim].start()
        wait_until(lambda: all(victim in c.state("bal", q)["isr"] for q in mine), 30,
                   "the broker back in the ISR")
        wait_until(lambda: all(c.leader("bal", q) == victim for q in mine), 20, "the automatic rebalance")
    finally:
        next(gen, None)


def test_whole_cluster_stopped_and_started_again(cluster: Cluster) -> None:
    """Every broker stopped (SIGTERM, one after another) and started again in the same order:
    the last leader comes back at a new leader epoch, the others follow it again, the ISR
    fills up and acks=all works; nothing acknowledged is lost."""
    c = cluster
    create(c, "all", 1, 3, **{"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce("all", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    for b in (1, 2, 3):
        assert c.brokers[b].stop() == 0
    for b in (1, 2, 3):
        c.brokers[b].start()
    wait_until(lambda: sorted(c.state("all", 0).get("isr", [])) == [1, 2, 3], 60, "the full ISR again")
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300, 600):
        p.produce("all", str(i).encode(), partition=0)
    assert p.flush(60) == 0
    assert [int(v) for v in drain(c.bootstrap, "all", 1)[0]] == list(range(600))


def test_log_dir_failure_moves_leadership(tmp_path: Path, zookeeper: Ensemble) -> None:
    """A log dir that fails (here: the leader's partition directory replaced by a plain file,
    so rolling a segment fails with an I/O error) goes offline on its broker; the controller hears of it through
    /log_dir_event_notification and LeaderAndIsr's KAFKA_STORAGE_ERROR and moves leadership;
    the broker keeps serving from its other log dir; nothing acknowledged is lost."""
    c = Cluster(tmp_path, zookeeper, 3)
    for br in c.brokers.values():  # two log dirs per broker
        br.overrides["log.dirs"] = f"{br.logdir}/a,{br.logdir}/b"
    c.start()
    try:
        create(c, "ld", 1, 3, **{"min.insync.replicas": "2", "segment.bytes": "30000"})
        create(c, "other", 1, 3)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1, "batch.size": 8000,
                      "topic.metadata.refresh.interval.ms": 500})
        for i in range(200):
            p.produce("ld", str(i).encode().ljust(100, b"."), partition=0)
        assert p.flush(30) == 0
        leader = c.leader("ld", 0)
        dirs = [d for d in c.brokers[leader].logdir.glob("*/ld-0") if d.is_dir()]
        assert len(dirs) == 1
        broken = dirs[0]
        broken.rename(broken.with_name("ld-0.moved"))  # open segment files keep working ...
        broken.write_bytes(b"")  # ... but no new file can be created "in" it
        for i in range(200, 600):
            p.produce("ld", str(i).encode().ljust(100, b"."), partition=0)
        assert p.flush(60) == 0
        wait_until(lambda: c.leader("ld", 0) not in (leader, -1), 30,
                   "leadership to leave the failed log dir")
        assert leader not in c.state("ld", 0)["isr"]
        c.brokers[leader].assert_alive()  # still serving its other log dir
        got = [int(v.rstrip(b".")) for v in drain(c.bootstrap, "ld", 1)[0]]
        assert got == list(range(600))
    finally:
        c.stop()


@contextlib.contextmanager
def _third_broker_joins_while_the_controller_is_paused(c: Cluster) -> Iterator[int]:
    """Brokers 1 and 2 elect a controller; it is paused (SIGSTOP: it cannot send the newcomer
    anything) while broker 3 starts and registers. Yields the controller's id; resumes it after."""
    c.brokers[1].start()
    c.brokers[2].start()
    ctl = wait_until(c.controller, 30, "a controller")
    c.pause(ctl)
    try:
        c.brokers[3].start()
        wait_until(lambda: "3" in c.zk_children("/brokers/ids"), 30, "broker 3 registered")
        yield ctl
    finally:
        c.resume(ctl)


def _metadata(bootstrap: str) -> Any:
    with WireClient(bootstrap) as w:
        return w.request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_new_broker_names_the_controller_before_the_controller_reaches_it(tmp_path: Path, zookeeper: Ensemble) -> None:
    """A broker that registers after the election learns the controller from ZooKeeper: its
    Metadata must not say -1 while the controller's UpdateMetadata is still on the way
    (librdkafka's admin client, told -1, waits for a broker state change and times out)."""
    c = Cluster(tmp_path, zookeeper, 3, {"zookeeper.session.timeout.ms": "10000"})
    c.ensure_chroot()
    try:
        with _third_broker_joins_while_the_controller_is_paused(c) as ctl:
            wait_until(lambda: _metadata(c.brokers[3].bootstrap).controller_id == ctl, 10,
                       f"broker 3 to name controller {ctl}")
    finally:
        c.stop()


def test_admin_through_a_broker_the_controller_has_not_reached(tmp_path: Path, zookeeper: Ensemble) -> None:
    """An admin client whose only bootstrap broker registered while the controller could not
    reach it: that broker's Metadata must already name the live brokers (from their ZooKeeper
    registrations), or librdkafka knows the controller's id but not its address and waits for a
    broker state change that never comes (CreateTopics timed out after 30 s in CI)."""
    c = Cluster(tmp_path, zookeeper, 3, {"zookeeper.session.timeout.ms": "10000"})
    c.ensure_chroot()
    try:
        with _third_broker_joins_while_the_controller_is_paused(c):
            md = _metadata(c.brokers[3].bootstrap)
            assert {b.node_id for b in md.brokers} == {1, 2, 3}
            admin = AdminClient({"bootstrap.servers": c.brokers[3].bootstrap})
            fut = admin.create_topics([NewTopic("late", 1, 3)], operation_timeout=20)["late"]
            time.sleep(1.0)
        fut.result(20)
    finally:
        c.stop()
