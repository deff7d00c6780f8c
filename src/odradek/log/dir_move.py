"""Moving a partition's log to another log dir of the same broker (KIP-113, AlterReplicaLogDirs).

As Kafka does it (ReplicaManager.alterReplicaLogDirs, ReplicaAlterLogDirsThread, LogManager's
``replaceCurrentWithFutureLog``): the destination log dir gets the *future* log
``<topic>-<partition>.<uniqueId>-future``; a background task copies the current log into it and keeps
copying what is appended meanwhile until it has caught up; then, in one turn of the event loop (no
append can come in between), the rest is copied, the current log's directory is renamed
``<topic>-<partition>.<uniqueId>-delete`` (the same unique id), the future's to ``<topic>-<partition>``,
and the log opened there replaces the current one; the old directory is removed after
``file.delete.delay.ms`` (fetches in flight still read it, as after a topic deletion).

The copy is by file: the segments' ``.log`` files byte range by byte range (segments only grow, and a
segment rewritten by compaction or recreated by a truncation has a new inode or a smaller size and is
copied again), then producer snapshots, transaction indexes (``.txnindex``: small, appended to and
truncated, so copied whole like the snapshots), the leader epoch checkpoint and ``partition.metadata``;
the offset and time indexes are rebuilt when the moved log is opened (recovery from its recovery point).

A restart in the middle (``recover_moves``, before the log dirs are loaded): a future log whose
current log exists is moved again from scratch; a future log whose current log was already renamed
``-delete`` with the same unique id was complete (the rename comes only after the last copy), and the
swap is finished; any other future log is an orphan and removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.fsutil import fsync_dir, fsync_file

log = logging.getLogger("odradek.log")

FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
_SUFFIXED = re.compile(r"^(.+)\.([0-9a-f]{32})-(future|delete)$")
#: what is left to copy when the copy task swaps (the rest is copied synchronously on the loop)
SWAP_THRESHOLD_BYTES = 1 << 20
_CHUNK = 1 << 20
# files copied whole at the swap (segments are copied by range before; indexes are rebuilt)
_META_SUFFIXES = (".snapshot", ".txnindex")
_META_FILES = ("partition.metadata", "leader-epoch-checkpoint")


def suffixed_dir_name(name: str, uid: str, suffix: str) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName`` / ``logDeleteDirName``: ``<name>.<uniqueId><suffix>``."""
    return f"{name}.{uid}{suffix}"


def parse_suffixed_dir_name(name: str) -> tuple[str, str, str] | None:
    """``<topic>-<partition>.<uniqueId>-future|-delete`` -> (``<topic>-<partition>``, uniqueId, suffix)."""
    m = _SUFFIXED.match(name)
    if m is None:
        return None
    return m.group(1), m.group(2), "-" + m.group(3)


@dataclass
class FutureLog:
    """A move in progress: the future log's directory and what has been copied into it."""

    topic: str
    partition: int
    dest: Path  # the destination log dir
    uid: str
    # segment file name -> (inode of the source file, bytes copied)
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    cancelled: bool = False

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def path(self) -> Path:
        return self.dest / suffixed_dir_name(self.name, self.uid, FUTURE_DIR_SUFFIX)

    @property
    def size(self) -> int:
        return sum(n for _ino, n in self.copied.values())


@dataclass(frozen=True)
class _Range:
    name: str
    inode: int
    start: int
    end: int


def plan(fut: FutureLog, source_dir: Path, sizes: Mapping[str, int] | None = None) -> tuple[list[_Range], list[str]]:
    """What to copy now (byte ranges of the source's ``.log`` files) and which files of the future log
    no longer have a source (deleted by retention, or a leftover). ``sizes``: the log's own size of each
    segment file by name; bytes past it (a follower's splice in flight) are not copied."""
    ranges: list[_Range] = []
    present: set[str] = set()
    with os.scandir(source_dir) as it:
        for e in it:
            if not e.name.endswith(".log"):
                continue
            try:
                st = e.stat()
            except FileNotFoundError:
                continue
            present.add(e.name)
            size = st.st_size if sizes is None else min(st.st_size, sizes.get(e.name, st.st_size))
            ino, done = fut.copied.get(e.name, (st.st_ino, 0))
            if ino != st.st_ino or done > size:
                ranges.append(_Range(e.name, st.st_ino, 0, size))  # rewritten or truncated
            elif done < size:
                ranges.append(_Range(e.name, st.st_ino, done, size))
    stale = [n for n in fut.copied if n not in present]
    return sorted(ranges, key=lambda r: r.name), stale


def copy_ranges(source_dir: Path, future_dir: Path, ranges: list[_Range]) -> list[_Range]:
    """Copy the ranges (fsyncing each file); returns those copied (a source gone meanwhile is skipped)."""
    done: list[_Range] = []
    for r in ranges:
        try:
            src = os.open(source_dir / r.name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            if os.fstat(src).st_ino != r.inode:
                continue
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if r.start == 0 else 0)
            dst = os.open(future_dir / r.name, flags, 0o644)
            try:
                pos = r.start
                while pos < r.end:
                    chunk = os.pread(src, min(_CHUNK, r.end - pos), pos)
                    if not chunk:
                        break
                    os.pwrite(dst, chunk, pos)
                    pos += len(chunk)
                os.ftruncate(dst, pos)
                os.fsync(dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        done.append(_Range(r.name, r.inode, r.start, pos))
    return done


def record(fut: FutureLog, copied: list[_Range]) -> None:
    for r in copied:
        fut.copied[r.name] = (r.inode, r.end)


def drop_stale(fut: FutureLog, stale: list[str]) -> None:
    for n in stale:
        fut.copied.pop(n, None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fut.path / n)


def copy_metadata(source_dir: Path, future_dir: Path) -> None:
    """Producer snapshots, the leader epoch checkpoint and partition.metadata, whole; snapshots the
    source no longer has are removed from the future log."""
    wanted = {e.name for e in os.scandir(source_dir) if e.name.endswith(_META_SUFFIXES) or e.name in _META_FILES}
    for e in os.scandir(future_dir):
        if e.name.endswith(_META_SUFFIXES) and e.name not in wanted:
            os.unlink(e.path)
    for n in wanted:
        with contextlib.suppress(FileNotFoundError):
            shutil.copyfile(source_dir / n, future_dir / n)
            fsync_file(future_dir / n)


def copied_end_offset(fut: FutureLog, source_dir: Path, log_end_offset: int) -> int:
    """The offset up to which the future log holds the source's data (by whole segments): for
    DescribeLogDirs's offset lag of the future replica."""
    sizes: dict[str, int] = {}
    with os.scandir(source_dir) as it:
        for e in it:
            if e.name.endswith(".log"):
                with contextlib.suppress(FileNotFoundError):
                    sizes[e.name] = e.stat().st_size
    for n in sorted(sizes):
        if fut.copied.get(n, (0, -1))[1] != sizes[n]:
            return int(n.partition(".")[0]) if n.partition(".")[0].isdigit() else 0
    return log_end_offset


def new_uid() -> str:
    return uuid.uuid4().hex


def recover_moves(log_dirs: list[Path]) -> list[FutureLog]:
    """Before loading (see the module docstring): finish interrupted swaps, drop orphans; returns the
    moves to start again (their future directory emptied)."""
    futures: list[tuple[Path, str, str]] = []  # (log dir, name, uid)
    deletes: set[tuple[str, str]] = set()
    current: set[str] = set()
    for d in log_dirs:
        if not d.is_dir():
            continue
        with os.scandir(d) as it:
            for e in it:
                if not e.is_dir(follow_symlinks=False):
                    continue
                parsed = parse_suffixed_dir_name(e.name)
                if parsed is None:
                    current.add(e.name)
                elif parsed[2] == FUTURE_DIR_SUFFIX:
                    futures.append((d, parsed[0], parsed[1]))
                else:
                    deletes.add((parsed[0], parsed[1]))
    resumed: list[FutureLog] = []
    seen: set[str] = set()
    for d, name, uid in futures:
        path = d / suffixed_dir_name(name, uid, FUTURE_DIR_SUFFIX)
        topic, _, part = name.rpartition("-")
        if name in current and name not in seen and part.isdigit():
            seen.add(name)
            for e in os.scandir(path):
                os.unlink(e.path)
            log.info("Resuming the move of %s to %s (future log %s)", name, d, path)
            resumed.append(FutureLog(topic, int(part), d, uid))
        elif name not in current and (name, uid) in deletes:
            os.rename(path, d / name)
            fsync_dir(d)
            current.add(name)
            log.info("Finished the interrupted move of %s to %s", name, d)
        else:
            shutil.rmtree(path, ignore_errors=True)
            log.info("Removed the orphan future log %s", path)
    return resumed
