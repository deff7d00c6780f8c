"""The controller's event handling over a LocalStore with a recording request channel."""

from __future__ import annotations

import json
from typing import Any

from odradek.controller import zk_data as zd
from odradek.controller.controller import Controller
from odradek.controller.store import LocalStore
from odradek.protocol import errors
from odradek.protocol import interbroker as ib


class Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, dict[str, Any]]] = []

    def __call__(self, broker: int, api: int, body: dict[str, Any]) -> None:
        ib.encode(api, body)  # every request must satisfy the channel's schema
        self.sent.append((broker, api, body))

    def take(self, api: int) -> list[tuple[int, dict[str, Any]]]:
        out = [(b, body) for b, a, body in self.sent if a == api]
        self.sent = [x for x in self.sent if x[1] != api]
        return out


def cluster(brokers=(1, 2, 3, 9)) -> tuple[LocalStore, Controller, Channel]:
    store = LocalStore(None)
    zd.ensure_paths(store)
    for b in brokers:
        zd.register_broker(store, zd.BrokerInfo(b, "127.0.0.1", 9000 + b))
    store.create("/brokers/topics/t", json.dumps(
        {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}).encode())
    ch = Channel()
    c = Controller(9, store, ch)
    c.put("Startup")
    c.process_all()
    return store, c, ch


def state(store: LocalStore, p: int) -> zd.LeaderAndIsr:
    st = zd.read_partition_state(store, "t", p)
    assert st is not None
    return st


def test_startup_elects_initial_leaders_and_informs_brokers() -> None:
    store, c, ch = cluster()
    assert c.active and c.ctx.epoch == 1 and zd.read_controller(store) == 9
    assert (state(store, 0).leader, state(store, 0).isr) == (1, [1, 2, 3])
    assert state(store, 1).leader == 2
    um = ch.take(ib.UPDATE_METADATA)
    assert sorted(b for b, _ in um) == [1, 2, 3, 9]
    assert all(body["controller_epoch"] == 1 for _, body in um)
    lai = ch.take(ib.LEADER_AND_ISR)
    assert sorted(b for b, _ in lai) == [1, 2, 3]  # the replicas, not broker 9
    second = Controller(1, store, Channel())
    second.put("Startup")
    second.process_all()
    assert not second.active


def test_leader_failure_elects_from_isr_and_shrinks_followers() -> None:
    store, c, ch = cluster()
    ch.sent.clear()
    store.delete("/brokers/ids/1")
    c.put("BrokerChange")
    c.process_all()
    s0, s1 = state(store, 0), state(store, 1)
    assert (s0.leader, s0.leader_epoch, s0.isr) == (2, 1, [2, 3])
    assert (s1.leader, s1.isr) == (2, [2, 3])
    lai = ch.take(ib.LEADER_AND_ISR)
    assert {b for b, _ in lai} == {2, 3}


def test_all_isr_dead_stays_offline_unless_unclean() -> None:
    store, c, ch = cluster()
    # shrink p0's ISR to broker 1 only, then kill it
    st = state(store, 0)
    zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(1, st.leader_epoch, [1], 1, st.zk_version))
    c.ctx.states[("t", 0)] = state(store, 0)
    store.delete("/brokers/ids/1")
    c.put("BrokerChange")
    c.process_all()
    assert state(store, 0).leader == 1  # no eligible leader: unchanged, offline
    c.unclean = lambda topic: True
    c.put("BrokerChange")
    store.delete("/brokers/ids/2")
    zd.register_broker(store, zd.BrokerInfo(2, "127.0.0.1", 9002))
    c.process_all()
    c.put("UncleanLeaderElectionEnable")  # a config change: offline partitions are tried again
    c.process_all()
    st = state(store, 0)
    assert (st.leader, st.isr) == (2, [2])  # unclean: a live replica outside the ISR, ISR = just it


def test_controlled_shutdown_moves_leadership() -> None:
    store, c, ch = cluster()
    replies: list[tuple[int, list]] = []
    c.put("ControlledShutdown", broker_id=2, broker_epoch=-1, reply=lambda code, rem: replies.append((code, rem)))
    c.process_all()
    assert replies == [(errors.NONE, [])]
    assert state(store, 1).leader == 3 and 2 not in state(store, 1).isr
    assert 2 not in state(store, 0).isr and state(store, 0).leader == 1


def test_preferred_election_after_isr_change() -> None:
    store, c, ch = cluster()
    store.delete("/brokers/ids/1")
    c.put("BrokerChange")
    c.process_all()
    zd.register_broker(store, zd.BrokerInfo(1, "127.0.0.1", 9001))
    c.put("BrokerChange")
    c.process_all()
    # broker 1 caught up: its leader (2) adds it back to the ISR and notifies
    st = state(store, 0)
    zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(st.leader, st.leader_epoch, [2, 3, 1], st.controller_epoch, st.zk_version))
    zd.notify_isr_change(store, [("t", 0)])
    c.put("IsrChangeNotification")
    c.process_all()
    assert zd.read_isr_changes(store) == ([], set())
    results: dict = {}
    c.put("PreferredReplicaElection")
    c.process_all()
    assert state(store, 0).leader == 1
    results = c._on_PreferredReplicaElection([("t", 0), ("t", 7)])
    assert results == {("t", 0): errors.ELECTION_NOT_NEEDED, ("t", 7): errors.UNKNOWN_TOPIC_OR_PARTITION}


def test_new_topic_and_new_partitions() -> None:
    store, c, ch = cluster()
    store.create("/brokers/topics/u", json.dumps({"version": 3, "partitions": {"0": [3, 1]}}).encode())
    c.put("TopicChange")
    c.process_all()
    assert zd.read_partition_state(store, "u", 0) is not None
    store.set("/brokers/topics/u", json.dumps({"version": 3, "partitions": {"0": [3, 1], "1": [1, 2]}}).encode())
    c.put("TopicChange")
    c.process_all()
    assert zd.read_partition_state(store, "u", 1) is None  # TopicChange reads new topics only
    c.put("PartitionModifications", topic="u")
    c.process_all()
    st = zd.read_partition_state(store, "u", 1)
    assert st is not None and st.leader == 1
    store.delete("/brokers/topics/u", recursive=True)
    ch.sent.clear()
    c.put("TopicChange")
    c.process_all()
    stops = ch.take(ib.STOP_REPLICA)
    assert {b for b, _ in stops} == {1, 2, 3}


def test_creating_topics_one_by_one_reads_each_topic_once() -> None:
    """TopicChange reads the new topics only: creating n topics, each followed by the watches'
    events (TopicChange, then the new topic's PartitionModifications as its state znodes appear),
    reads O(n) topic documents, not the O(n^2) of re-reading every topic on every change."""
    store, c, _ = cluster()
    reads: list[str] = []
    real_get = store.get

    def counting_get(path: str) -> Any:
        if path.startswith("/brokers/topics/") and path.count("/") == 3:
            reads.append(path)
        return real_get(path)

    store.get = counting_get  # type: ignore[method-assign]
    n = 60
    for i in range(n):
        store.create(f"/brokers/topics/n{i}", json.dumps({"version": 3, "partitions": {"0": [1, 2]}}).encode())
        c.put("TopicChange")
        c.put("PartitionModifications", topic=f"n{i}")
        c.process_all()
    assert all(zd.read_partition_state(store, f"n{i}", 0) is not None for i in range(n))
    assert len(reads) <= 3 * n, f"{len(reads)} topic reads for {n} topics"


def test_partition_and_replica_state_machines_follow_events() -> None:
    from odradek.controller.states import PartitionState as P
    from odradek.controller.states import ReplicaState as R

    store, c, ch = cluster()
    assert c.ctx.partition_states[("t", 0)] is P.ONLINE
    assert {c.ctx.replica_states[("t", 0, b)] for b in (1, 2, 3)} == {R.ONLINE}
    store.delete("/brokers/ids/3")
    c.put("BrokerChange")
    c.process_all()
    assert c.ctx.replica_states[("t", 0, 3)] is R.OFFLINE and c.ctx.replica_states[("t", 0, 1)] is R.ONLINE
    zd.register_broker(store, zd.BrokerInfo(3, "127.0.0.1", 9003))
    c.put("BrokerChange")
    c.process_all()
    assert c.ctx.replica_states[("t", 0, 3)] is R.ONLINE
    # an illegal transition is refused and logged, the state stays
    assert not c._set_partition_state(("t", 0), P.NEW)
    assert c.ctx.partition_states[("t", 0)] is P.ONLINE
    # a reassignment adds replica 9 (new, then online) and removes 1 (deleted, gone) when done
    replies: list[Any] = []
    c.put("AlterReassignments", requests={("t", 0): [9, 2, 3]}, reply=replies.append)
    c.process_all()
    assert replies == [{("t", 0): (errors.NONE, None)}]
    assert c.ctx.replica_states[("t", 0, 9)] is R.ONLINE and ("t", 0) in c.ctx.reassignments
    st = state(store, 0)
    zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(st.leader, st.leader_epoch, [1, 2, 3, 9], 1, st.zk_version))
    zd.notify_isr_change(store, [("t", 0)])
    c.put("IsrChangeNotification")
    c.process_all()
    assert ("t", 0) not in c.ctx.reassignments
    assert ("t", 0, 1) not in c.ctx.replica_states and state(store, 0).leader == 9
    assert json.loads(store.get("/brokers/topics/t")[0])["partitions"]["0"] == [9, 2, 3]
    stops = ch.take(ib.STOP_REPLICA)
    assert [b for b, body in stops if body["partitions"][0]["delete"]] == [1]
    # deleting the topic takes every partition and replica to non-existent
    store.delete("/brokers/topics/t", recursive=True)
    c.put("TopicChange")
    c.process_all()
    assert not c.ctx.partition_states and not c.ctx.replica_states


def test_a_large_new_topic_is_elected_in_batches_each_its_own_event() -> None:
    """NEW_PARTITION_BATCH partitions per event: each batch's states, metadata (those partitions only)
    and LeaderAndIsr go out before the next batch is queued behind the events already waiting."""
    from odradek.controller.controller import NEW_PARTITION_BATCH

    store, c, ch = cluster(brokers=(1, 9))
    ch.sent.clear()
    deferred: list[str] = []
    c.defer = deferred.append
    n = NEW_PARTITION_BATCH * 2 + 7
    store.create("/brokers/topics/big", json.dumps(
        {"version": 3, "partitions": {str(p): [1, 9] for p in range(n)}, "topic_id": "AAAAAAAAAAAAAAAAAAAAAg"}).encode())
    c.put("TopicChange")
    c.process_all()
    sizes = []
    while True:
        metadata = ch.take(ib.UPDATE_METADATA)
        lai = ch.take(ib.LEADER_AND_ISR)
        assert {len(body["partitions"]) for _, body in metadata} == {len(lai[0][1]["partitions"])}
        assert all(not body["full"] for _, body in metadata)
        sizes.append(len(lai[0][1]["partitions"]))
        if not deferred:
            break
        assert deferred == ["ElectNewPartitions"]
        deferred.clear()
        c.put("ElectNewPartitions")
        c.process_all()
    assert sizes == [NEW_PARTITION_BATCH, NEW_PARTITION_BATCH, 7]
    assert all(zd.read_partition_state(store, "big", p) is not None for p in range(n))
    # a topic deleted while its batches wait: the rest are dropped, nothing is written for them
    store.create("/brokers/topics/gone", json.dumps(
        {"version": 3, "partitions": {str(p): [1] for p in range(NEW_PARTITION_BATCH + 5)}}).encode())
    c.put("TopicChange")
    c.process_all()
    assert deferred == ["ElectNewPartitions"]
    store.delete("/brokers/topics/gone", recursive=True)
    c.put("TopicChange")
    c.put("ElectNewPartitions")
    c.process_all()
    assert zd.read_partition_state(store, "gone", NEW_PARTITION_BATCH) is None


def test_reassignment_may_forbid_a_change_of_replication_factor() -> None:
    """AlterPartitionReassignments v1 (KIP-860): without allow_replication_factor_change, a target
    of another size than the replication factor is INVALID_REPLICATION_FACTOR (the original
    replicas' count while a reassignment runs); a cancellation is not checked."""
    store, c, _ = cluster()
    replies: list[Any] = []

    def alter(target: list[int] | None, allow: bool = False) -> Any:
        c.put("AlterReassignments", requests={("t", 0): target}, reply=replies.append,
              allow_replication_factor_change=allow)
        c.process_all()
        return replies[-1][("t", 0)]

    assert alter([1, 2]) == (errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")
    assert ("t", 0) not in c.ctx.reassignments
    assert alter([9, 2, 3]) == (errors.NONE, None)  # same factor: started
    assert c.ctx.assignments["t"][0] == [9, 2, 3, 1]  # four replicas while it runs; the factor is still 3
    assert alter([9, 2, 3, 1]) == (errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 4")
    assert alter([9, 3, 2]) == (errors.NONE, None)
    assert alter(None) == (errors.NONE, None)  # cancelled back to [1, 2, 3]
    assert alter([1, 2], allow=True) == (errors.NONE, None)  # allowed: v0's behaviour


def _leaders_advertised_before_leading(ch: Channel) -> list[tuple[int, str, int, int]]:
    """(broker, topic, partition, leader epoch) for each UpdateMetadata that names a broker leader of
    a partition at an epoch before that broker was sent the LeaderAndIsr making it so. A broker's
    requests go out in the order sent (controller.channel), so such a broker answers Metadata with
    itself as leader while it answers Produce with NOT_LEADER_OR_FOLLOWER."""
    told: set[tuple[int, str, int, int]] = set()  # (broker, topic, partition, epoch) of LeaderAndIsr sent
    early = []
    for b, api, body in ch.sent:
        for ps in body.get("partitions", []):
            key = (b, ps["topic"], ps["partition"], ps["leader_epoch"])
            if api == ib.LEADER_AND_ISR:
                told.add(key)
            elif api == ib.UPDATE_METADATA and ps["leader"] == b and key not in told:
                early.append(key)
    return early


def test_a_new_or_moved_leader_is_told_before_any_metadata_names_it() -> None:
    """Kafka's ControllerBrokerRequestBatch order, LeaderAndIsr then UpdateMetadata (issue 33): a new
    topic's leaders, a failed leader's successor, a preferred and a controlled-shutdown election."""
    store, c, ch = cluster()
    assert _leaders_advertised_before_leading(ch) == []  # the controller's start-up
    ch.sent.clear()
    store.create("/brokers/topics/v", json.dumps(
        {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]},
         "topic_id": "AAAAAAAAAAAAAAAAAAAAAw"}).encode())
    c.put("TopicChange")
    c.process_all()
    assert {b for b, a, _ in ch.sent if a == ib.UPDATE_METADATA} == {1, 2, 3, 9}
    assert _leaders_advertised_before_leading(ch) == []
    store.delete("/brokers/ids/1")  # leader of t-0 and v-0
    c.put("BrokerChange")
    c.process_all()
    assert state(store, 0).leader == 2
    assert _leaders_advertised_before_leading(ch) == []
    zd.register_broker(store, zd.BrokerInfo(1, "127.0.0.1", 9001))
    c.put("BrokerChange")
    c.process_all()
    st = state(store, 0)  # broker 1 caught up: back in the ISR, then preferred leader again
    zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(st.leader, st.leader_epoch, [2, 3, 1],
                                                             st.controller_epoch, st.zk_version))
    zd.notify_isr_change(store, [("t", 0)])
    c.put("IsrChangeNotification")
    c.put("PreferredReplicaElection")
    c.process_all()
    assert state(store, 0).leader == 1
    replies: list[tuple[int, list[Any]]] = []
    c.put("ControlledShutdown", broker_id=1, broker_epoch=-1, reply=lambda code, rem: replies.append((code, rem)))
    c.process_all()
    assert replies and state(store, 0).leader != 1
    assert _leaders_advertised_before_leading(ch) == []
