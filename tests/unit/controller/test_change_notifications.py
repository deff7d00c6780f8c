"""Change notifications older than 15 minutes are purged by the broker that reads them
(Kafka's ZkNodeChangeNotificationListener): odradek.controller.change_notifications and
AclStore's reload."""

from __future__ import annotations

from pathlib import Path

from odradek.controller.change_notifications import CHANGE_EXPIRATION_MS, obsolete, purge_obsolete
from odradek.controller.store import LocalStore
from odradek.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.acl_store import AclStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_obsolete_is_older_than_the_expiration() -> None:
    created = {"c_0000000002": 1000, "c_0000000001": 0, "c_0000000003": 2000}
    assert obsolete(created, 1000 + CHANGE_EXPIRATION_MS) == ["c_0000000001"]
    assert obsolete(created, 1001 + CHANGE_EXPIRATION_MS) == ["c_0000000001", "c_0000000002"]
    assert obsolete(created, CHANGE_EXPIRATION_MS) == []


def test_purge_obsolete_on_a_local_store(tmp_path: Path) -> None:
    clock = Clock()
    store = LocalStore(tmp_path / "meta.json", clock)
    old = store.create("/config/changes/config_change_", b"1", sequential=True, makepath=True)
    clock.now += 600
    new = store.create("/config/changes/config_change_", b"2", sequential=True)
    clock.now += 400  # old: 1000 s, new: 400 s
    assert purge_obsolete(store, "/config/changes", int(clock.now * 1000)) == [old.rsplit("/", 1)[1]]
    assert store.children("/config/changes") == [new.rsplit("/", 1)[1]]
    assert purge_obsolete(store, "/absent", int(clock.now * 1000)) == []
    # nodes read back from the file count as created when the store is opened
    reopened = LocalStore(tmp_path / "meta.json", clock)
    assert reopened.ctime_ms(new) == int(clock.now * 1000)
    assert reopened.ctime_ms("/nope") is None


def test_acl_reload_purges_old_acl_change_notifications() -> None:
    clock = Clock()
    store = LocalStore(None, clock)
    acls = AclStore(store, AclAuthorizer(), clock=clock)
    acls.watch(lambda f: f())  # the watch reloads (and purges) at once
    entry = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    acls.write(ResourcePattern(ResourceType.TOPIC, "a", PatternType.LITERAL), {entry})
    acls.write(ResourcePattern(ResourceType.TOPIC, "p-", PatternType.PREFIXED), {entry})
    assert len(store.children("/kafka-acl-changes")) == 1
    assert len(store.children("/kafka-acl-extended-changes")) == 1
    clock.now += CHANGE_EXPIRATION_MS / 1000 + 1
    acls.write(ResourcePattern(ResourceType.TOPIC, "b", PatternType.LITERAL), {entry})
    # the reload that the new notification caused deleted both expired ones
    literal = store.children("/kafka-acl-changes")
    assert len(literal) == 1 and store.get(f"/kafka-acl-changes/{literal[0]}")[0] == b"Topic:b"
    assert store.children("/kafka-acl-extended-changes") == []
    # the ACLs themselves stay
    assert len(acls.authorizer.bindings()) == 3
