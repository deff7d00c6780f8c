"""ZkStore against a real ZooKeeper: the same semantics LocalStore has."""

from __future__ import annotations

import threading
import uuid

import pytest
from waiting import wait_until

from odradek.controller.store import BadVersionError, NodeExistsError, NoNodeError, Op
from odradek.controller.zk_store import StoreTimeoutError, ZkStore

from .zk import Ensemble


@pytest.fixture
def store(zookeeper: Ensemble):
    s = ZkStore(zookeeper.connect, session_timeout_ms=4000, chroot=f"t{uuid.uuid4().hex[:8]}")
    s.start()
    s.client.ensure_path("/")
    yield s
    s.close()


def test_create_get_set_versions(store: ZkStore) -> None:
    store.create("/brokers/topics/t", b"{}", makepath=True)
    assert store.get("/brokers/topics/t") == (b"{}", 0)
    assert store.set("/brokers/topics/t", b"1", 0) == 1
    with pytest.raises(BadVersionError):
        store.set("/brokers/topics/t", b"2", 0)
    with pytest.raises(NodeExistsError):
        store.create("/brokers/topics/t")
    with pytest.raises(NoNodeError):
        store.get("/nope")
    assert store.children("/brokers/topics") == ["t"]
    store.delete("/brokers", recursive=True)
    assert store.exists("/brokers") is None


def test_multi_is_atomic(store: ZkStore) -> None:
    store.create("/a", b"")
    with pytest.raises(NoNodeError):
        store.multi([Op("create", "/a/b", b"1"), Op("set", "/missing", b"")])
    assert store.exists("/a/b") is None
    store.multi([Op("create", "/a/b", b"1"), Op("set", "/a", b"x", 0)])
    assert store.get("/a") == (b"x", 1)


def test_sync_is_bounded(store: ZkStore) -> None:
    """ZkStore.sync (what the controller epoch check syncs with) returns once ZooKeeper answers, and
    fails at once without a connection rather than wait as kazoo's own blocking sync does."""
    store.create("/s", b"1")
    store.sync("/s")
    assert store.get("/s") == (b"1", 0)
    store.client.stop()
    wait_until(lambda: not store.connected, 5, "the session closed")
    with pytest.raises(StoreTimeoutError):
        store.sync("/s")


def test_watch_fires_on_children_and_data(store: ZkStore) -> None:
    store.create("/w", b"")
    seen: list[str] = []
    ev = threading.Event()

    def cb(path: str) -> None:
        seen.append(path)
        ev.set()

    store.watch("/w", cb)
    store.create("/w/child", b"")
    assert ev.wait(5)
    ev.clear()
    store.set("/w", b"new")
    assert ev.wait(5)  # re-armed after the first event
    assert seen.count("/w") >= 2


def test_ephemeral_node_vanishes_with_session(zookeeper: Ensemble) -> None:
    root = f"e{uuid.uuid4().hex[:8]}"
    a = ZkStore(zookeeper.connect, session_timeout_ms=2000, chroot=root)
    a.start()
    a.client.ensure_path("/")
    a.create("/brokers/ids/1", b"x", ephemeral=True, makepath=True)
    b = ZkStore(zookeeper.connect, chroot=root)
    b.start()
    try:
        assert b.exists("/brokers/ids/1") is not None
        a.close()
        wait_until(lambda: b.exists("/brokers/ids/1") is None, 10, "the closed session's ephemeral znode to go")
    finally:
        b.close()


def test_missing_chroot_created_only_when_asked(zookeeper: Ensemble) -> None:
    """A broker's store creates its missing chroot, every level of it (Kafka's
    createChrootIfNecessary); a tool's store does not."""
    from kazoo.client import KazooClient

    root = f"/c{uuid.uuid4().hex[:8]}/kafka/prod"
    tool = ZkStore(zookeeper.connect + root, session_timeout_ms=4000)
    tool.start()
    try:
        assert tool.exists("/") is None
    finally:
        tool.close()
    broker = ZkStore(zookeeper.connect + root, session_timeout_ms=4000, create_chroot=True)
    broker.start()
    try:
        assert broker.exists("/") is not None
        broker.create("/brokers/ids/1", b"{}", makepath=True)
    finally:
        broker.close()
    plain = KazooClient(hosts=zookeeper.connect)
    plain.start(timeout=30)
    try:
        assert plain.exists(root + "/brokers/ids/1") is not None
    finally:
        plain.stop()
        plain.close()
