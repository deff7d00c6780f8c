"""Replacing a small file atomically and durably, and the fsyncs around it.

Every small file the broker rewrites whole goes through :func:`write_atomic`: the offset
checkpoints and ``partition.metadata`` (``log/checkpoint.py``), the clean-shutdown marker
(``log/manager.py``), the leader epoch checkpoint (``log/leader_epoch.py``), producer state
snapshots (``log/producer_state.py``), ``meta.properties`` (``server/meta_properties.py``) and the
embedded metadata store's file (``controller/store_file.py``, which adds its checksum and reads
back its previous copy). It is Kafka's ``CheckpointFile.write``: a temporary file, fsync, and
``Utils.atomicMoveWithFallback`` (rename over the target, then ``Utils.flushDir`` of the parent).
This module imports nothing from odradek, so every layer may use it.

Contract of ``write_atomic(path, data, sync=True, tmp=None, previous=None, sync_dir=True)``, step by
step:

1. ``tmp`` (default ``<path>.tmp``, in the same directory) is created or truncated, ``data``
   written to it and fsynced;
2. only with ``previous``, and when ``path`` exists: ``path`` is renamed to ``previous``
   (replacing an older copy there);
3. ``tmp`` is renamed over ``path``;
4. ``path``'s directory is fsynced.

When it returns, ``path`` holds exactly ``data`` and both the contents and the name are on disk;
with ``previous``, so is the file it replaced, at ``previous``. A crash (power loss, kill -9)
leaves:

- before step 2 (step 3 without ``previous``): ``path`` as it was (the old file, or none), and a
  stray temporary file, whole or partial. Nothing reads a temporary file: the next write truncates it, and the log
  loader removes ``*.tmp`` from partition directories on start (``log/log_loader.py``);
- between 2 and 3 (``previous`` only): no ``path``, the old file at ``previous`` and the new one,
  fsynced, at ``tmp``: a reader falls back to ``previous``;
- after step 3, before step 4 is done: the renames may not be on disk yet, so the directory is as
  after any one of steps 1 to 3 (a rename is atomic, and journalling file systems such as ext4 and
  XFS commit one directory's renames in order): the old file (at ``path``, or at ``previous``) or
  the new one, each whole;
- after 4: the new file.

``sync=False`` does the same steps without the two fsyncs, for callers that sync the whole file
system afterwards (a clean shutdown's ``os.sync``, a log's ``flush(fsync=False)``): the guarantee
then holds once that sync is done. Before it a crash may leave ``path`` empty or partial (the
rename can reach the disk before the data); the files written so (producer snapshots, the leader
epoch checkpoint) are read as unusable then: a snapshot fails its CRC and is deleted, an
unreadable epoch checkpoint is ignored and the epochs come back from the log's recovery.

``sync_dir=False`` leaves out step 4 only (the leader epoch checkpoint's truncations, which Kafka
takes off the request path altogether, KAFKA-15046): a crash after the return may leave the old
file instead of the new one, each whole.

A failure raises the ``OSError`` and leaves ``path`` as it was, except one in step 4: the new file
is then in place but not known to be durable. On a failure in 1 to 3 the temporary file is
removed (as far as it can be); a failure of step 3 with ``previous`` first renames ``previous``
back to ``path``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (names created, renamed, removed) durable (Kafka's Utils.flushDir)."""
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    """fsync a file by its name (FileNotFoundError when it is gone)."""
    _fsync(path, os.O_RDONLY)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until all of ``data`` is written (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path: Path, data: bytes | bytearray, *, sync: bool = True) -> None:
    """Create or truncate ``path`` and write ``data`` to it, in place (fsynced unless ``sync`` is
    false); no rename, so only for a file nothing reads before it is complete."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def tmp_path(path: Path) -> Path:
    """The default temporary file of :func:`write_atomic`: ``<path>.tmp``."""
    return path.with_name(path.name + TMP_SUFFIX)


def write_atomic(
    path: Path,
    data: bytes | bytearray,
    *,
    sync: bool = True,
    tmp: Path | None = None,
    previous: Path | None = None,
    sync_dir: bool = True,
) -> None:
    """Replace ``path`` with ``data`` as the module's docstring says: the old file or the new one,
    never a mixture; ``previous``: keep the file replaced there."""
    tmp = tmp_path(path) if tmp is None else tmp
    try:
        write_file(tmp, data, sync=sync)
        aside: Path | None = None
        if previous is not None and path.exists():
            os.replace(path, previous)
            aside = previous
        try:
            os.replace(tmp, path)
        except OSError:
            if aside is not None:
                os.replace(aside, path)
            raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync and sync_dir:
        fsync_dir(path.parent)
