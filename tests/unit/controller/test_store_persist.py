"""LocalStore mutations are all-or-nothing when the file cannot be written (issue 12, item 9)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.controller import store_file
from odradek.controller.store import LocalStore, NodeExistsError, Op, PersistError
from odradek.controller.topics import TopicError, TopicRegistry
from odradek.protocol import errors


class Fault:
    """Makes the store's file writes fail while on: a directory at the journal's path (the journal moved
    aside, and back after) and at the temporary snapshot's (a compaction fails too)."""

    def __init__(self, store: LocalStore) -> None:
        assert store.file is not None
        self.tmp = store.file.with_suffix(".tmp")
        self.journal = store_file.journal_path(store.file)
        self.aside = self.journal.with_name("journal-aside")

    def __enter__(self) -> Fault:
        if self.journal.exists():
            os.replace(self.journal, self.aside)
        self.journal.mkdir()
        self.tmp.mkdir()
        return self

    def __exit__(self, *exc: object) -> None:
        self.tmp.rmdir()
        self.journal.rmdir()
        if self.aside.exists():
            os.replace(self.aside, self.journal)


def _on_disk(store: LocalStore) -> tuple[bytes, bytes]:
    assert store.file is not None
    return store.file.read_bytes(), store_file.journal_path(store.file).read_bytes()


def _state(store: LocalStore) -> tuple[object, ...]:
    kids = {parent: set(names) for parent, names in store._kids.items()}
    return dict(store._nodes), set(store._ephemeral), store._sequence, kids


def _store(tmp_path: Path) -> tuple[LocalStore, list[str]]:
    store = LocalStore(tmp_path / "meta.json")
    store.create("/brokers/topics/a", b"1", makepath=True)
    store.create("/e", b"", ephemeral=True)
    fired: list[str] = []
    for p in ("/brokers/topics", "/brokers/topics/a", "/brokers/topics/b", "/x", "/", "/e", "/seq"):
        store.watch(p, fired.append)
    return store, fired


@pytest.mark.parametrize(
    "mutation",
    [
        lambda s: s.create("/brokers/topics/b", b"2"),
        lambda s: s.create("/x/y/z", b"", makepath=True),
        lambda s: s.create("/seq/n-", b"", makepath=True, sequential=True),
        lambda s: s.create("/x/eph", b"", ephemeral=True, makepath=True),  # its parent /x is persistent
        lambda s: s.set("/brokers/topics/a", b"9"),
        lambda s: s.delete("/brokers", recursive=True),
        lambda s: s.multi([Op("create", "/brokers/topics/b", b"2"), Op("set", "/brokers/topics/a", b"3"),
                           Op("delete", "/e")]),
    ],
    ids=["create", "create-makepath", "create-sequential", "create-ephemeral-makepath", "set", "delete", "multi"],
)
def test_failed_write_rolls_back_and_fires_nothing(tmp_path: Path, mutation) -> None:  # type: ignore[no-untyped-def]
    store, fired = _store(tmp_path)
    before = _state(store)
    on_disk = _on_disk(store)
    with Fault(store), pytest.raises(PersistError):
        mutation(store)
    assert _state(store) == before
    assert fired == []
    assert _on_disk(store) == on_disk
    mutation(store)  # the fault cleared, the same change goes through
    assert fired and _state(store) != before
    persistent = {k: v for k, v in store._nodes.items() if k not in store._ephemeral}
    assert LocalStore(store.file)._nodes == persistent


def test_ephemeral_create_under_existing_parent_does_not_write(tmp_path: Path) -> None:
    store, fired = _store(tmp_path)
    with Fault(store):
        store.create("/brokers/topics/eph", b"", ephemeral=True)  # nothing persistent changes
    assert store.exists("/brokers/topics/eph") == 0


def test_failed_check_still_rolls_back(tmp_path: Path) -> None:
    store, fired = _store(tmp_path)
    before = _state(store)
    with pytest.raises(NodeExistsError):
        store.multi([Op("create", "/brokers/topics/b", b"2"), Op("create", "/brokers/topics/a", b"again")])
    assert _state(store) == before and fired == []


def test_failed_topic_creation_leaves_no_phantom(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "meta.json")
    reg = TopicRegistry(store, lambda: [0])
    reg.controller_managed = True
    with Fault(store), pytest.raises(PersistError):
        reg.create_topic("t", 1, 1)
    assert store.exists("/brokers/topics/t") is None and store.exists("/config/topics/t") is None
    reg.create_topic("t", 1, 1)  # not TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicError) as e:
        reg.create_topic("t", 1, 1)
    assert e.value.error_code == errors.TOPIC_ALREADY_EXISTS
    assert LocalStore(tmp_path / "meta.json").exists("/brokers/topics/t") is not None
