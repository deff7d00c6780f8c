"""The LocalStore files: a snapshot and a journal of changes, checksums, previous copies, fallback,
one-line errors (issue 33)."""

from __future__ import annotations

import json
import logging
import os
import zlib
from pathlib import Path

import pytest

from odradek.controller import store_file
from odradek.controller.store import LocalStore, MetadataFileError, PersistError


def _store_with_topics(path: Path, *names: str) -> LocalStore:
    store = LocalStore(path)
    for n in names:
        store.create(f"/brokers/topics/{n}", n.encode(), makepath=True)
    return store


def _journal(f: Path) -> Path:
    return store_file.journal_path(f)


def _entry_ends(journal: Path) -> list[int]:
    j, why = store_file._read_journal(journal)
    assert j is not None, why
    return [end for end, _ in j.entries]


def _topics(store: LocalStore) -> list[str]:
    return store.children("/brokers/topics") if store.exists("/brokers/topics") is not None else []


@pytest.fixture
def small_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compact as soon as the journal outgrows the snapshot (no 1 MiB floor)."""
    monkeypatch.setattr(store_file, "JOURNAL_MIN_BYTES", 0)


def test_a_change_is_one_journal_entry_and_the_snapshot_is_not_rewritten(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a")  # the first change of a new store writes the snapshot
    assert json.loads(f.read_bytes())["generation"] == 1
    snapshot, inode = f.read_bytes(), f.stat().st_ino
    for n in ("b", "c", "d"):
        store.create(f"/brokers/topics/{n}", b"x" * 10)
    store.set("/brokers/topics/b", b"y")
    store.delete("/brokers/topics/c")
    assert f.read_bytes() == snapshot and f.stat().st_ino == inode
    assert len(_entry_ends(_journal(f))) == 5
    assert not store_file.prev_path(f).exists()
    assert LocalStore(f).children("/brokers/topics") == ["a", "b", "d"]
    assert LocalStore(f).get("/brokers/topics/b") == (b"y", 1)


def test_an_entry_holds_what_changed_whatever_the_size_of_the_tree(tmp_path: Path) -> None:
    sizes = []
    for n in (10, 2000):
        f = tmp_path / f"{n}" / "odradek-metadata.json"
        f.parent.mkdir()
        store = _store_with_topics(f, *(f"t{i}" for i in range(n)))
        before = _journal(f).stat().st_size
        store.set("/brokers/topics/t1", b"z" * 100)
        sizes.append(_journal(f).stat().st_size - before)
    assert sizes[0] == sizes[1] < 200


def test_ephemeral_nodes_and_no_op_changes_write_nothing(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a")
    size = _journal(f).stat().st_size
    store.create("/brokers/topics/e", b"", ephemeral=True)
    store.delete("/brokers/topics/e")
    assert _journal(f).stat().st_size == size


@pytest.mark.usefixtures("small_journal")
def test_the_journal_is_compacted_when_it_outgrows_the_snapshot(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a")
    for i in range(30):
        store.create(f"/brokers/topics/x{i}", b"v" * 50)
    gen = json.loads(f.read_bytes())["generation"]
    assert gen > 2
    # the journal never grows past the snapshot; both keep their previous copy
    assert _journal(f).stat().st_size <= f.stat().st_size
    assert store_file.read(store_file.prev_path(f)) is not None
    assert store_file.prev_path(_journal(f)).exists()
    assert len(LocalStore(f).children("/brokers/topics")) == 31


def test_close_folds_the_journal_into_a_new_snapshot(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a", "b")
    store.create("/e", b"", ephemeral=True)
    store.close()
    assert _journal(f).stat().st_size == store_file.HEADER_SIZE
    assert set(store_file.read(f) or {}) >= {"/brokers/topics/a", "/brokers/topics/b"}
    assert "/e" not in (store_file.read(f) or {})
    # the previous copies: the snapshot before, and the journal that took it to the new one
    assert "/brokers/topics/b" not in (store_file.read(store_file.prev_path(f)) or {})
    assert len(_entry_ends(store_file.prev_path(_journal(f)))) == 1
    assert LocalStore(f).children("/brokers/topics") == ["a", "b"]


def _chained(tmp_path: Path) -> Path:
    """Topics a, b, c across two snapshots and their journals: a in the first snapshot, b in its
    journal (now journal.prev), c in the current journal."""
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a", "b")
    store.close()
    store = LocalStore(f)
    store.create("/brokers/topics/c", b"c")
    return f


@pytest.mark.parametrize("damage", ["truncated", "garbled", "flipped", "empty", "missing", "not-utf8"])
def test_damaged_snapshot_falls_back_to_prev_and_both_journals_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    f = _chained(tmp_path)
    raw = f.read_bytes()
    if damage == "truncated":
        f.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbled":
        f.write_bytes(raw.replace(b'"nodes"', b'"n0des"'))
    elif damage == "flipped":  # still valid JSON: only the checksum tells
        doc = json.loads(raw)
        doc["nodes"]["/brokers/topics/b"]["version"] = 7
        f.write_text(json.dumps(doc))
    elif damage == "empty":
        f.write_bytes(b"")
    elif damage == "missing":
        f.unlink()
    else:
        f.write_bytes(b"\xff\xfe" + raw[2:])
    with caplog.at_level(logging.WARNING, "odradek.store"):
        store = LocalStore(f)
    # nothing is lost: .prev, then the journal that took it to the damaged snapshot, then the current one
    assert _topics(store) == ["a", "b", "c"]
    assert any("using the previous copy odradek-metadata.json.prev and the journal odradek-metadata.journal.prev "
               "and odradek-metadata.journal" in r.getMessage() for r in caplog.records), caplog.text
    # the damaged file is kept aside, never deleted; the snapshot is whole again
    aside = sorted(p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert len(aside) == (0 if damage == "missing" else 1)
    assert set(store_file.read(f) or {}) >= {"/brokers/topics/a", "/brokers/topics/b", "/brokers/topics/c"}
    store.create("/brokers/topics/d", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "c", "d"]


def test_damaged_snapshot_without_a_following_journal_keeps_what_prev_and_its_journal_hold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = _chained(tmp_path)
    f.write_bytes(b"{")
    # a journal that does not say which snapshot it follows (as after a recovery): not applied, kept aside
    raw = _journal(f).read_bytes()
    gen = json.loads(store_file.prev_path(f).read_bytes())["generation"] + 1
    _journal(f).write_bytes(store_file.journal_header(gen) + raw[store_file.HEADER_SIZE:])
    with caplog.at_level(logging.WARNING, "odradek.store"):
        assert _topics(LocalStore(f)) == ["a", "b"]
    assert "changes after those may be lost" in caplog.text
    assert "does not follow the previous copy" in caplog.text
    assert len([p for p in os.listdir(tmp_path) if p.startswith("odradek-metadata.journal.corrupt-")]) == 1


def test_neither_snapshot_usable_is_one_line_error_naming_both(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b").close()
    f.write_bytes(b'{"version": 3, "nodes": {"/x"')
    store_file.prev_path(f).write_bytes(b"")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(MetadataFileError) as e:
        LocalStore(f)
    msg = str(e.value)
    assert "\n" not in msg and str(f) in msg and "odradek-metadata.json.prev" in msg
    assert "not JSON" in msg and "empty" in msg
    assert sorted(os.listdir(tmp_path)) == before  # nothing renamed or deleted


def test_missing_files_are_a_new_store_unless_it_must_exist(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    assert LocalStore(f).exists("/brokers/topics") is None
    assert os.listdir(tmp_path) == []  # opening writes nothing
    with pytest.raises(MetadataFileError, match="is missing, and so is its previous copy.*a broker ran here"):
        LocalStore(f, must_exist="a broker ran here")


def test_a_journal_without_its_snapshot_is_kept_aside_unless_the_store_must_exist(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b")
    f.unlink()
    with pytest.raises(MetadataFileError, match="is missing, and so is its previous copy.*a broker ran here"):
        LocalStore(f, must_exist="a broker ran here")
    assert sorted(os.listdir(tmp_path)) == ["odradek-metadata.journal"]
    # the operator removed meta.properties to start with empty metadata (the README's last resort)
    with caplog.at_level(logging.WARNING, "odradek.store"):
        assert _topics(LocalStore(f)) == []
    assert "has no snapshot to apply to" in caplog.text
    assert [p.startswith("odradek-metadata.journal.corrupt-") for p in os.listdir(tmp_path)] == [True]


@pytest.mark.parametrize("version", [1, 2])
def test_a_file_of_an_earlier_format_is_read_and_upgraded_by_the_first_change(tmp_path: Path, version: int) -> None:
    f = tmp_path / "odradek-metadata.json"
    nodes = b'{"/":{"data":"","version":0},"/brokers":{"data":"eA==","version":3}}'
    if version == 1:
        f.write_bytes(b'{"version":1,"nodes":%s}' % nodes)
    else:  # what the single-file store wrote: the CRC-32 of the nodes' canonical text
        f.write_bytes(b'{"version":2,"crc32":%d,"nodes":%s}' % (zlib.crc32(nodes), nodes))
    old = f.read_bytes()
    store = LocalStore(f)
    assert store.get("/brokers") == (b"x", 3)
    assert os.listdir(tmp_path) == ["odradek-metadata.json"]  # reading writes nothing
    store.set("/brokers", b"y")
    assert json.loads(f.read_text())["version"] == store_file.FORMAT_VERSION
    assert store_file.prev_path(f).read_bytes() == old  # the old file is kept as the previous copy
    store.set("/brokers", b"z")  # and the changes after the upgrade go to the journal
    assert len(_entry_ends(_journal(f))) == 1
    assert LocalStore(f).get("/brokers") == (b"z", 5)


@pytest.mark.parametrize("cut", ["entry-header", "payload", "zeros", "bad-crc-last"])
def test_a_torn_last_journal_entry_is_dropped_and_logged(
    tmp_path: Path, cut: str, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b", "c")
    j = _journal(f)
    raw = j.read_bytes()
    ends = _entry_ends(j)
    start = ends[-2]  # the last entry (topic c) begins here
    if cut == "entry-header":
        j.write_bytes(raw[:start + 5])
    elif cut == "payload":
        j.write_bytes(raw[:-3])
    elif cut == "zeros":  # the file grew, its last blocks never written
        j.write_bytes(raw[:start] + b"\0" * (len(raw) - start))
    else:  # whole length, wrong bytes (the last write reached the disk only in part)
        j.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    with caplog.at_level(logging.WARNING, "odradek.store"):
        store = LocalStore(f)
    assert _topics(store) == ["a", "b"]
    assert "a change the crash interrupted (never acknowledged): dropped" in caplog.text
    assert j.stat().st_size == start  # cut off, so the next entry does not follow the torn bytes
    assert not [p for p in os.listdir(tmp_path) if ".corrupt-" in p]
    store.create("/brokers/topics/d", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "d"]


def test_a_corrupt_entry_in_the_middle_of_the_journal_is_a_damaged_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b", "c", "d")
    j = _journal(f)
    raw = bytearray(j.read_bytes())
    ends = _entry_ends(j)  # entries: b, c, d (a is in the snapshot)
    raw[ends[0] + 12] ^= 0x40  # in entry c's payload
    j.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, "odradek.store"):
        store = LocalStore(f)
    assert _topics(store) == ["a", "b"]  # the changes before the damage
    assert "is damaged (entry checksum mismatch at byte" in caplog.text
    [aside] = [p for p in os.listdir(tmp_path) if p.startswith("odradek-metadata.journal.corrupt-")]
    assert (tmp_path / aside).read_bytes() == bytes(raw)  # kept for inspection
    # a snapshot of what was read, and a new journal: the same state at the next start
    assert _topics(LocalStore(f)) == ["a", "b"]
    store.create("/brokers/topics/e", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "e"]


def test_crash_between_the_snapshot_and_the_journal_rotation_leaves_a_stale_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A kill -9 after the new snapshot is in place but before the journal it folded is replaced:
    both are left; the journal is not replayed, and the next change does not go after its entries
    (they would be ignored at the next start with the journal)."""
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a")
    store.create("/brokers/topics/b", b"1")
    store.set("/brokers/topics/b", b"2")
    old_journal = _journal(f).read_bytes()
    gen = json.loads(f.read_bytes())["generation"]
    store.close()  # a compaction
    assert json.loads(f.read_bytes())["generation"] == gen + 1
    _journal(f).write_bytes(old_journal)  # as if the journal's rename never happened
    with caplog.at_level(logging.INFO, "odradek.store"):
        store = LocalStore(f)
    assert _topics(store) == ["a", "b"] and store.get("/brokers/topics/b") == (b"2", 1)
    assert "older than the snapshot" in caplog.text
    store.create("/brokers/topics/c", b"")  # a snapshot again, and a journal that follows it
    store.create("/brokers/topics/d", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "c", "d"]
    assert len(_entry_ends(_journal(f))) == 1


def test_crash_between_the_snapshot_renames_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The current snapshot renamed to .prev, the new one not yet in place: .prev and the journal that
    follows it are the state of the last acknowledged change."""
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b")
    os.replace(f, store_file.prev_path(f))
    store_file.tmp_path(f).write_bytes(b'{"version":3,"ge')  # a half-written temporary file is ignored
    with caplog.at_level(logging.WARNING, "odradek.store"):
        store = LocalStore(f)
    assert _topics(store) == ["a", "b"]
    assert "and the journal odradek-metadata.journal " in caplog.text
    # and once more from the snapshot written then: its journal.prev and .prev chain up to it
    f.write_bytes(b"")
    assert _topics(LocalStore(f)) == ["a", "b"]


def test_crash_between_the_journal_renames_leaves_the_new_snapshot_alone(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b").close()
    _journal(f).unlink()
    store = LocalStore(f)
    assert _topics(store) == ["a", "b"]
    store.create("/brokers/topics/c", b"")  # no journal to append to: a snapshot and a new journal
    assert _journal(f).exists()
    assert _topics(LocalStore(f)) == ["a", "b", "c"]


def test_a_failed_append_is_cut_off_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a", "b")
    before = _journal(f).read_bytes()

    def no_sync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(os, "fdatasync", no_sync)
        with pytest.raises(PersistError, match="Input/output error"):
            store.create("/brokers/topics/c", b"")
    assert _journal(f).read_bytes() == before
    assert _topics(store) == ["a", "b"]
    store.create("/brokers/topics/d", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "d"]


def test_a_journal_removed_under_a_running_store_is_written_again(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "a", "b")
    _journal(f).unlink()
    store.create("/brokers/topics/c", b"")
    assert _topics(LocalStore(f)) == ["a", "b", "c"]


def test_children_and_recursive_deletes_follow_the_tree(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    store = _store_with_topics(f, "b", "a")
    store.create("/brokers/topics/a/partitions/0/state", b"", makepath=True)
    store.create("/brokers/topics/a/partitions/1/state", b"", makepath=True)
    store.create("/brokers/topics/e", b"", ephemeral=True)
    assert store.children("/") == ["brokers"]
    assert store.children("/brokers/topics") == ["a", "b", "e"]
    assert store.children("/brokers/topics/a/partitions") == ["0", "1"]
    store.delete("/brokers/topics/a", recursive=True)
    assert store.children("/brokers/topics") == ["b", "e"]
    assert store.exists("/brokers/topics/a/partitions/0/state") is None
    store.close()
    reopened = LocalStore(f)
    assert reopened.children("/brokers/topics") == ["b"]
    assert reopened.children("/brokers/topics/b") == []
