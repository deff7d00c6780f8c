"""The LocalStore file: checksum, previous copy, fallback, one-line errors (issue 33, item 2)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from odradek.controller import store_file
from odradek.controller.store import LocalStore, MetadataFileError


def _store_with_topics(path: Path, *names: str) -> LocalStore:
    store = LocalStore(path)
    for n in names:
        store.create(f"/brokers/topics/{n}", n.encode(), makepath=True)
    return store


def test_every_change_keeps_the_file_it_replaced_as_prev(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b")
    prev = store_file.prev_path(f)
    assert prev.name == "odradek-metadata.json.prev"
    assert LocalStore(f).exists("/brokers/topics/b") is not None
    # the copy is the state before the last change (topic b not yet created)
    assert store_file.read(prev) is not None
    assert "/brokers/topics/b" not in (store_file.read(prev) or {})
    assert "/brokers/topics/a" in (store_file.read(prev) or {})
    assert not store_file.tmp_path(f).exists()


@pytest.mark.parametrize("damage", ["truncated", "garbled", "flipped", "empty", "missing", "not-utf8"])
def test_damaged_current_file_falls_back_to_prev_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b", "c")
    raw = f.read_bytes()
    if damage == "truncated":
        f.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbled":
        f.write_bytes(raw.replace(b'"nodes"', b'"n0des"'))
    elif damage == "flipped":  # still valid JSON: only the checksum tells
        doc = json.loads(raw)
        doc["nodes"]["/brokers/topics/c"]["version"] = 7
        f.write_text(json.dumps(doc))
    elif damage == "empty":
        f.write_bytes(b"")
    elif damage == "missing":
        f.unlink()
    else:
        f.write_bytes(b"\xff\xfe" + raw[2:])
    with caplog.at_level(logging.WARNING, "odradek.store"):
        store = LocalStore(f)
    assert store.exists("/brokers/topics/a") is not None and store.exists("/brokers/topics/b") is not None
    assert store.exists("/brokers/topics/c") is None  # the last change before the damage
    assert any("using the previous copy" in r.getMessage() for r in caplog.records)
    # the damaged file is kept aside, never deleted; the current file is whole again
    aside = sorted(p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert len(aside) == (0 if damage == "missing" else 1)
    assert store_file.read(f) is not None
    # and the next change keeps a good previous copy
    store.create("/brokers/topics/d", b"", makepath=True)
    assert "/brokers/topics/b" in (store_file.read(store_file.prev_path(f)) or {})


def test_neither_file_usable_is_one_line_error_naming_both(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a", "b")
    f.write_bytes(b'{"version": 2, "nodes": {"/x"')
    store_file.prev_path(f).write_bytes(b"")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(MetadataFileError) as e:
        LocalStore(f)
    msg = str(e.value)
    assert "\n" not in msg and str(f) in msg and "odradek-metadata.json.prev" in msg
    assert "not JSON" in msg and "empty" in msg
    assert sorted(os.listdir(tmp_path)) == before  # nothing renamed or deleted


def test_missing_file_is_a_new_store_unless_it_must_exist(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    assert LocalStore(f).exists("/brokers/topics") is None
    with pytest.raises(MetadataFileError, match="is missing, and so is its previous copy.*a broker ran here"):
        LocalStore(f, must_exist="a broker ran here")


def test_version_1_file_without_checksum_is_read(tmp_path: Path) -> None:
    f = tmp_path / "odradek-metadata.json"
    f.write_text('{"version":1,"nodes":{"/":{"data":"","version":0},"/brokers":{"data":"eA==","version":3}}}')
    store = LocalStore(f)
    assert store.get("/brokers") == (b"x", 3)
    store.set("/brokers", b"y")
    assert json.loads(f.read_text())["version"] == store_file.FORMAT_VERSION
    assert LocalStore(f).get("/brokers") == (b"y", 4)


def test_crash_between_the_renames_leaves_prev_to_start_from(tmp_path: Path) -> None:
    """The current file renamed to .prev, the new one not yet in place (a kill -9 between the two
    renames): the store opens at the state before the unacknowledged change."""
    f = tmp_path / "odradek-metadata.json"
    _store_with_topics(f, "a")
    os.replace(f, store_file.prev_path(f))
    store_file.tmp_path(f).write_bytes(b'{"version":2,"cr')  # a half-written temporary file is ignored
    assert LocalStore(f).exists("/brokers/topics/a") is not None
