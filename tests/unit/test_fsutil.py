"""odradek.fsutil.write_atomic: the order of its steps, and what each injected failure leaves on disk
(the old file intact, no temporary file), as its docstring promises."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek import fsutil

_real_fsync = os.fsync
_real_replace = os.replace
_real_write = os.write


def _names(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def _record(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Log fsyncs (of a directory or a file) and renames in the order they happen."""
    events: list[str] = []

    def fsync(fd: int) -> None:
        kind = "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        events.append(f"fsync {kind}")
        _real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        events.append(f"rename {os.path.basename(src)} -> {os.path.basename(dst)}")
        _real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _fail_on(call: Callable[..., object], when: Callable[..., bool]) -> Callable[..., object]:
    def failing(*args: object) -> object:
        if when(*args):
            raise OSError(errno.EIO, "injected")
        return call(*args)

    return failing


def test_steps_in_order_and_nothing_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old\n")
    events = _record(monkeypatch)
    fsutil.write_atomic(target, b"new\n")
    assert events == ["fsync checkpoint.tmp", "rename checkpoint.tmp -> checkpoint", "fsync dir"]
    assert target.read_bytes() == b"new\n"
    assert _names(tmp_path) == {"checkpoint"}


def test_previous_keeps_the_file_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, prev, tmp = tmp_path / "store.json", tmp_path / "store.json.prev", tmp_path / "store.tmp"
    fsutil.write_atomic(target, b"1", tmp=tmp, previous=prev)
    assert not prev.exists()  # nothing to keep yet
    events = _record(monkeypatch)
    fsutil.write_atomic(target, b"2", tmp=tmp, previous=prev)
    assert events == [
        "fsync store.tmp", "rename store.json -> store.json.prev", "rename store.tmp -> store.json", "fsync dir",
    ]
    assert target.read_bytes() == b"2" and prev.read_bytes() == b"1"
    assert _names(tmp_path) == {"store.json", "store.json.prev"}


def test_without_sync_nothing_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "snapshot"
    events = _record(monkeypatch)
    fsutil.write_atomic(target, b"x" * 100, sync=False)
    assert events == ["rename snapshot.tmp -> snapshot"]
    assert target.read_bytes() == b"x" * 100


def test_without_the_directory_fsync_only_the_data_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "leader-epoch-checkpoint"
    events = _record(monkeypatch)
    fsutil.write_atomic(target, b"0\n0\n", sync_dir=False)
    assert events == ["fsync leader-epoch-checkpoint.tmp", "rename leader-epoch-checkpoint.tmp -> leader-epoch-checkpoint"]
    assert target.read_bytes() == b"0\n0\n"


def test_fsync_of_the_data_failing_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "meta.properties"
    target.write_bytes(b"broker.id=1\n")
    monkeypatch.setattr(os, "fsync", _fail_on(_real_fsync, lambda fd: True))
    with pytest.raises(OSError, match="injected"):
        fsutil.write_atomic(target, b"broker.id=2\n")
    assert target.read_bytes() == b"broker.id=1\n"
    assert _names(tmp_path) == {"meta.properties"}  # the temporary file removed


def test_short_writes_are_completed_and_a_failing_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "write", lambda fd, data: _real_write(fd, bytes(data[:3])))  # 3 bytes per call
    fsutil.write_atomic(target, b"0123456789")
    assert target.read_bytes() == b"0123456789"
    monkeypatch.setattr(os, "write", _fail_on(_real_write, lambda fd, data: True))  # a full disk
    with pytest.raises(OSError, match="injected"):
        fsutil.write_atomic(target, b"abcdef")
    assert target.read_bytes() == b"0123456789"
    assert _names(tmp_path) == {"checkpoint"}


def test_rename_failing_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "replace", _fail_on(_real_replace, lambda src, dst: True))
    with pytest.raises(OSError, match="injected"):
        fsutil.write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == {"checkpoint"}


@pytest.mark.parametrize("failing", ["into-place", "aside"])
def test_a_rename_failing_with_previous_leaves_the_current_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Renaming the new file into place failing puts the one moved aside back; moving the current
    file aside failing leaves it (and the older copy) where they were."""
    target, prev, tmp = tmp_path / "store.json", tmp_path / "store.json.prev", tmp_path / "store.tmp"
    fsutil.write_atomic(target, b"1", tmp=tmp, previous=prev)
    fsutil.write_atomic(target, b"2", tmp=tmp, previous=prev)
    fails = tmp if failing == "into-place" else target
    monkeypatch.setattr(os, "replace", _fail_on(_real_replace, lambda src, dst: Path(src) == fails))
    with pytest.raises(OSError, match="injected"):
        fsutil.write_atomic(target, b"3", tmp=tmp, previous=prev)
    assert target.read_bytes() == b"2"
    assert not tmp.exists()
    if failing == "aside":
        assert prev.read_bytes() == b"1"


def test_directory_fsync_failing_raises_with_the_new_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "fsync", _fail_on(_real_fsync, lambda fd: os.path.isdir(f"/proc/self/fd/{fd}")))
    with pytest.raises(OSError, match="injected"):
        fsutil.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"  # in place, not known to be durable: the caller is told
    assert _names(tmp_path) == {"checkpoint"}


def test_a_stray_temporary_file_from_a_crash_is_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "leader-epoch-checkpoint"
    target.write_bytes(b"0\n1\n0 0\n")
    fsutil.tmp_path(target).write_bytes(b"0\n5\n0 0\n1 1\n2 2\n3 3\n4 4\n7")  # a crash mid-write, longer
    assert target.read_bytes() == b"0\n1\n0 0\n"  # the crash left the old file
    fsutil.write_atomic(target, b"0\n0\n")
    assert target.read_bytes() == b"0\n0\n"
    assert _names(tmp_path) == {"leader-epoch-checkpoint"}


def test_write_file_and_fsync_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "00000000000000000000.index.cleaned"
    events = _record(monkeypatch)
    fsutil.write_file(path, bytearray(b"abc"))
    fsutil.write_file(path, b"de", sync=False)  # truncates
    fsutil.fsync_file(path)
    assert path.read_bytes() == b"de"
    assert events == ["fsync 00000000000000000000.index.cleaned", "fsync 00000000000000000000.index.cleaned"]
    with pytest.raises(FileNotFoundError):
        fsutil.fsync_file(tmp_path / "gone")
