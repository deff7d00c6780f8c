"""Kafka's ZooKeeper paths and formats, against a real ZooKeeper: broker registration and
epochs, controller election with the epoch bump, partition state with conditional writes,
ISR change notifications."""

from __future__ import annotations

import json
import uuid

import pytest
from waiting import wait_until

from odradek.controller import zk_data as zd
from odradek.controller.store import BadVersionError
from odradek.controller.zk_store import ZkStore

from .zk import Ensemble


def _store(zk: Ensemble, root: str, timeout_ms: int = 4000) -> ZkStore:
    s = ZkStore(zk.connect, session_timeout_ms=timeout_ms, chroot=root)
    s.start()
    s.client.ensure_path("/")
    return s


@pytest.fixture
def root() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


def test_registration_and_broker_epochs(zookeeper: Ensemble, root: str) -> None:
    a = _store(zookeeper, root)
    try:
        zd.ensure_paths(a)
        e1 = zd.register_broker(a, zd.BrokerInfo(1, "127.0.0.1", 9092, rack="r1"))
        assert e1 > 0
        brokers = zd.live_brokers(a)
        assert brokers[1].port == 9092 and brokers[1].rack == "r1" and brokers[1].epoch == e1
        doc = json.loads(a.get("/brokers/ids/1")[0])
        assert doc["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"] and doc["version"] == 5
        a.delete("/brokers/ids/1")
        e2 = zd.register_broker(a, zd.BrokerInfo(1, "127.0.0.1", 9092))
        assert e2 > e1  # a re-registration is a new broker epoch
    finally:
        a.close()


def test_controller_election_and_failover(zookeeper: Ensemble, root: str) -> None:
    a, b = _store(zookeeper, root, 2000), _store(zookeeper, root, 2000)
    try:
        zd.ensure_paths(a)
        claim = zd.try_become_controller(a, 1)
        assert claim is not None and claim.epoch == 1
        assert zd.try_become_controller(b, 2) is None
        assert zd.read_controller(b) == 1
        a.close()  # the controller's session ends: /controller goes away
        claim2 = wait_until(lambda: zd.try_become_controller(b, 2), 10, "broker 2 to claim /controller",
                            interval=0.05)
        assert claim2.epoch == 2
        assert zd.read_controller_epoch(b)[0] == 2
    finally:
        b.close()


def test_partition_state_conditional_updates(zookeeper: Ensemble, root: str) -> None:
    s = _store(zookeeper, root)
    try:
        s.create("/brokers/topics/t", b"{}", makepath=True)
        zd.create_partition_states(s, "t", {0: zd.LeaderAndIsr(1, 0, [1, 2], 1)})
        st = zd.read_partition_state(s, "t", 0)
        assert st is not None and st.isr == [1, 2] and st.zk_version == 0
        st.isr = [1]
        st.zk_version = zd.update_partition_state(s, "t", 0, st)
        stale = zd.LeaderAndIsr(1, 0, [1, 2], 1, zk_version=0)
        with pytest.raises(BadVersionError):
            zd.update_partition_state(s, "t", 0, stale)
        names = [zd.notify_isr_change(s, [("t", 0)]), zd.notify_isr_change(s, [("t", 1)])]
        assert all("/isr_change_notification/isr_change_" in n for n in names)
        found, parts = zd.read_isr_changes(s)
        assert parts == {("t", 0), ("t", 1)} and len(found) == 2
        zd.delete_isr_changes(s, found)
        assert zd.read_isr_changes(s) == ([], set())
    finally:
        s.close()
