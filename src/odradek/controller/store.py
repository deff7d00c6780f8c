"""MetadataStore: the znode-tree interface the controller is written against.

Two implementations: :class:`LocalStore` (embedded single-node default: the tree held
in memory, each change appended to a journal beside a snapshot of the whole tree) and,
for clusters, a ZooKeeper store over kazoo. Paths and payloads are Kafka's
ZooKeeper-mode ones (``/brokers/topics/<t>``, ``/config/topics/<t>``, ...).

Files of LocalStore: the snapshot ``<log.dir>/odradek-metadata.json`` and the journal
``<log.dir>/odradek-metadata.journal`` of the changes since (one checksummed entry per mutation, so a
change costs what it changed), each with the previous one kept as ``.prev`` and read when the current
snapshot is damaged or missing (layout and rules in :mod:`odradek.controller.store_file`).

The tree is a dict of paths with an index of each node's children: a create, set or delete costs
what it touches, a listing what it returns.

Ephemeral nodes are not persisted (they belong to a session that ends with the process).
Creation times (``ctime_ms``, for purging change notifications) are kept in memory only: a
node read from the file counts as created when the store was opened.

Every mutation is all-or-nothing, as a ZooKeeper write is: when the file cannot be written
(:class:`PersistError`), the in-memory tree, node versions, ephemeral set and sequence counter
are back to what they were before the call and no watcher fires.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from odradek.controller import store_file
from odradek.controller.store_file import MetadataFileError

_log = logging.getLogger("odradek.store")
_ABSENT = object()  # in the undo record: the node, its ctime or its ephemeral mark was not there

__all__ = ["MetadataFileError"]  # re-exported: what opening a LocalStore on a damaged file raises


class StoreError(Exception):
    pass


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class PersistError(StoreError):
    """The change could not be made durable (the LocalStore file could not be written);
    it was not applied."""


@dataclass
class Op:
    """One operation of :meth:`MetadataStore.multi`."""

    kind: str  # "create" | "set" | "delete" | "check"
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False


Watcher = Callable[[str], None]


class MetadataStore(Protocol):
    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False, sequential: bool = False
    ) -> str: ...
    def get(self, path: str) -> tuple[bytes, int]: ...
    def set(self, path: str, data: bytes, version: int = -1) -> int: ...
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...
    def exists(self, path: str) -> int | None: ...
    def children(self, path: str) -> list[str]: ...
    def multi(self, ops: list[Op]) -> None: ...
    def watch(self, path: str, callback: Watcher) -> None: ...
    def close(self) -> None: ...


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class LocalStore:
    """In-process znode tree persisted to a snapshot and a journal of changes."""

    def __init__(
        self, file: Path | None, clock: Callable[[], float] = time.time, *, must_exist: str = ""
    ) -> None:
        """``must_exist``: why the file must already be there (e.g. a broker ran in its log dir), or
        empty when a missing file (and missing previous copy) is a new, empty store."""
        self.file = file
        self._clock = clock
        self._nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self._ctimes: dict[str, int] = {}
        self._ephemeral: set[str] = set()
        self._watchers: dict[str, list[Watcher]] = {}
        self._sequence = 0
        # the undo record of the mutation under way: each touched path's node, ctime and ephemeral mark
        # before it (what a failed mutation restores, and what a successful one journals)
        self._undo: dict[str, tuple[object, object, bool]] | None = None
        self._files: store_file.MetadataFiles | None = None
        if file is not None:
            self._files = store_file.MetadataFiles(file)
            stored = self._files.load(must_exist=bool(must_exist), why_must_exist=must_exist)
            if stored is not None:
                self._nodes.update(stored)
        opened = int(clock() * 1000)
        self._ctimes = dict.fromkeys(self._nodes, opened)
        # each node's children's names, so that listing and recursive deletes cost what they return
        self._kids: dict[str, set[str]] = {}
        for path in self._nodes:
            self._link(path)

    def _link(self, path: str) -> None:
        if path != "/":
            parent, name = path.rsplit("/", 1)
            self._kids.setdefault(parent or "/", set()).add(name)

    def _unlink(self, path: str) -> None:
        if path != "/":
            parent, name = path.rsplit("/", 1)
            siblings = self._kids.get(parent or "/")
            if siblings is not None:
                siblings.discard(name)
                if not siblings:
                    del self._kids[parent or "/"]

    # -- persistence
    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Undo every in-memory change made inside the block if it raises (a failed check
        or a failed write of the file): nodes, versions, ephemeral set and sequence."""
        assert self._undo is None, "mutations do not nest"
        self._undo = {}
        sequence = self._sequence
        try:
            yield
        except BaseException:
            for path, (node, ctime, ephemeral) in self._undo.items():
                if node is _ABSENT:
                    if self._nodes.pop(path, None) is not None:
                        self._unlink(path)
                else:
                    if path not in self._nodes:
                        self._link(path)
                    self._nodes[path] = node  # type: ignore[assignment]
                if ctime is _ABSENT:
                    self._ctimes.pop(path, None)
                else:
                    self._ctimes[path] = ctime  # type: ignore[assignment]
                if ephemeral:
                    self._ephemeral.add(path)
                else:
                    self._ephemeral.discard(path)
            self._sequence = sequence
            raise
        finally:
            self._undo = None

    def _touch(self, path: str) -> None:
        """Remember ``path`` as it is before the mutation under way changes it."""
        assert self._undo is not None
        if path not in self._undo:
            self._undo[path] = (self._nodes.get(path, _ABSENT), self._ctimes.get(path, _ABSENT),
                                path in self._ephemeral)

    def _persist(self) -> None:
        """Make the persistent nodes the mutation under way changed durable (none: nothing is written)."""
        if self._files is None:
            return
        assert self._undo is not None
        changes: dict[str, tuple[bytes, int] | None] = {}
        for path, (before, _ctime, was_ephemeral) in self._undo.items():
            old = None if before is _ABSENT or was_ephemeral else before
            new = None if path in self._ephemeral else self._nodes.get(path)
            if old != new:
                changes[path] = new
        if not changes:
            return
        try:
            self._files.commit(changes, self._persistent_nodes)
        except OSError as e:
            raise PersistError(f"could not write {self.file}: {e}") from e

    def _persistent_nodes(self) -> dict[str, tuple[bytes, int]]:
        return {p: n for p, n in self._nodes.items() if p not in self._ephemeral}

    def _write_file(self) -> None:
        """Write the whole tree as a new snapshot (what a compaction does)."""
        if self._files is None:
            assert self.file is not None
            self._files = store_file.MetadataFiles(self.file)
        self._files.compact(self._persistent_nodes())

    def _fire(self, paths: set[str]) -> None:
        for p in sorted(paths):
            for cb in list(self._watchers.get(p, ())):
                cb(p)

    # -- primitive mutations (no persist, return touched paths)
    def _create(self, path: str, data: bytes, ephemeral: bool, makepath: bool) -> set[str]:
        if path in self._nodes:
            raise NodeExistsError(path)
        touched = {path, _parent(path)}
        parent = _parent(path)
        if parent not in self._nodes:
            if not makepath:
                raise NoNodeError(parent)
            touched |= self._create(parent, b"", False, True)
        self._touch(path)
        self._nodes[path] = (bytes(data), 0)
        self._link(path)
        self._ctimes[path] = int(self._clock() * 1000)
        if ephemeral:
            self._ephemeral.add(path)
        return touched

    def _set(self, path: str, data: bytes, version: int) -> set[str]:
        if path not in self._nodes:
            raise NoNodeError(path)
        cur = self._nodes[path][1]
        if version != -1 and version != cur:
            raise BadVersionError(path)
        self._touch(path)
        self._nodes[path] = (bytes(data), cur + 1)
        return {path}

    def _delete(self, path: str, version: int, recursive: bool) -> set[str]:
        if path not in self._nodes:
            raise NoNodeError(path)
        if version != -1 and version != self._nodes[path][1]:
            raise BadVersionError(path)
        if path in self._kids and not recursive:
            raise NotEmptyError(path)
        kids: list[str] = []
        stack = [path]
        while stack:
            parent = stack.pop()
            prefix = parent.rstrip("/") + "/"
            for name in self._kids.get(parent, ()):
                kids.append(prefix + name)
                stack.append(prefix + name)
        for p in [*kids, path]:
            self._touch(p)
            del self._nodes[p]
            self._unlink(p)
            self._ctimes.pop(p, None)
            self._ephemeral.discard(p)
        return {path, _parent(path), *kids}

    # -- MetadataStore
    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False, sequential: bool = False
    ) -> str:
        with self._transaction():
            if sequential:
                self._sequence += 1
                path = f"{path}{self._sequence:010d}"
            touched = self._create(path, data, ephemeral, makepath)
            # parents made by makepath are persistent, even those of an ephemeral node (an ephemeral node
            # alone changes nothing on disk, and _persist writes nothing)
            self._persist()
        self._fire(touched)
        return path

    def get(self, path: str) -> tuple[bytes, int]:
        try:
            return self._nodes[path]
        except KeyError:
            raise NoNodeError(path) from None

    def ctime_ms(self, path: str) -> int | None:
        """When the node was created (ms since the epoch), or when the store was opened for a node
        read from the file; None if absent."""
        return self._ctimes.get(path) if path in self._nodes else None

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        with self._transaction():
            touched = self._set(path, data, version)
            self._persist()
        self._fire(touched)
        return self._nodes[path][1]

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        with self._transaction():
            touched = self._delete(path, version, recursive)
            self._persist()
        self._fire(touched)

    def exists(self, path: str) -> int | None:
        node = self._nodes.get(path)
        return None if node is None else node[1]

    def children(self, path: str) -> list[str]:
        if path not in self._nodes:
            raise NoNodeError(path)
        return sorted(self._kids.get(path, ()))

    def multi(self, ops: list[Op]) -> None:
        """Apply all operations or none (atomic, like ZooKeeper's multi): a failed check or a
        failed write of the file leaves the store as it was, and no watcher fires."""
        touched: set[str] = set()
        with self._transaction():
            for op in ops:
                if op.kind == "create":
                    touched |= self._create(op.path, op.data, op.ephemeral, True)
                elif op.kind == "set":
                    touched |= self._set(op.path, op.data, op.version)
                elif op.kind == "delete":
                    touched |= self._delete(op.path, op.version, True)
                elif op.kind == "check":
                    if self.exists(op.path) is None or (op.version != -1 and self.exists(op.path) != op.version):
                        raise BadVersionError(op.path)
                else:
                    raise StoreError(f"unknown op {op.kind}")
            self._persist()
        self._fire(touched)

    def watch(self, path: str, callback: Watcher) -> None:
        self._watchers.setdefault(path, []).append(callback)

    def close(self) -> None:
        """End the session: its ephemeral nodes go; changes in the journal are folded into a new
        snapshot, so the next start reads one file (a failure is logged: the journal still holds them)."""
        for p in list(self._ephemeral):
            if self._nodes.pop(p, None) is not None:
                self._unlink(p)
        self._ephemeral.clear()
        files = self._files
        if files is not None and files.journal_entries and not files.needs_compaction and self._undo is None:
            try:
                files.compact(self._persistent_nodes(), (files.generation, files.journal_size))
            except OSError as e:
                _log.warning("could not write the metadata snapshot %s at close: %s", self.file, e)
