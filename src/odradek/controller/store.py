"""MetadataStore: the znode-tree interface the controller is written against.

Two implementations: :class:`LocalStore` (embedded single-node default: the tree held
in memory and persisted to one JSON file, replaced atomically on every change) and,
for clusters, a ZooKeeper store over kazoo. Paths and payloads are Kafka's
ZooKeeper-mode ones (``/brokers/topics/<t>``, ``/config/topics/<t>``, ...).

File layout of LocalStore (``<log.dir>/odradek-metadata.json``)::

    {"version": 1, "nodes": {"<path>": {"data": "<base64>", "version": <int>}, ...}}

Ephemeral nodes are not persisted (they belong to a session that ends with the process).
Creation times (``ctime_ms``, for purging change notifications) are kept in memory only: a
node read from the file counts as created when the store was opened.

Every mutation is all-or-nothing, as a ZooKeeper write is: when the file cannot be written
(:class:`PersistError`), the in-memory tree, node versions, ephemeral set and sequence counter
are back to what they were before the call and no watcher fires.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


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


def _fragment(path: str, data: bytes, version: int) -> str:
    """A node's member of the file's "nodes" object."""
    key = f'"{path}"' if path.isascii() and path.isprintable() and '"' not in path and "\\" not in path \
        else json.dumps(path)
    return f'{key}:{{"data":"{base64.b64encode(data).decode()}","version":{version}}}'


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class LocalStore:
    """In-process znode tree persisted to a JSON file."""

    def __init__(self, file: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.file = file
        self._clock = clock
        self._nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self._ctimes: dict[str, int] = {}
        self._ephemeral: set[str] = set()
        self._watchers: dict[str, list[Watcher]] = {}
        self._sequence = 0
        # path -> the node's member of the file's "nodes" object, kept with every change, so that a
        # write joins them instead of encoding every node again (persistent nodes only)
        self._fragments: dict[str, str] = {"/": _fragment("/", b"", 0)}
        if file is not None and file.exists():
            doc = json.loads(file.read_text(encoding="utf-8"))
            for path, node in doc.get("nodes", {}).items():
                self._nodes[path] = (base64.b64decode(node["data"]), int(node["version"]))
                self._fragments[path] = _fragment(path, *self._nodes[path])
        opened = int(clock() * 1000)
        self._ctimes = dict.fromkeys(self._nodes, opened)

    # -- persistence
    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Undo every in-memory change made inside the block if it raises (a failed check
        or a failed write of the file): nodes, versions, ephemeral set and sequence."""
        saved = (dict(self._nodes), set(self._ephemeral), self._sequence, dict(self._ctimes), dict(self._fragments))
        try:
            yield
        except BaseException:
            self._nodes, self._ephemeral, self._sequence, self._ctimes, self._fragments = saved
            raise

    def _persist(self) -> None:
        if self.file is None:
            return
        try:
            self._write_file()
        except OSError as e:
            raise PersistError(f"could not write {self.file}: {e}") from e

    def _write_file(self) -> None:
        """The whole tree, joined from each node's member encoded when the node changed: with
        10,000 partitions' state znodes a write encodes only what the mutation touched."""
        assert self.file is not None
        text = '{"version":1,"nodes":{' + ",".join(self._fragments.values()) + "}}"
        tmp = self.file.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.file)

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
        self._nodes[path] = (bytes(data), 0)
        self._ctimes[path] = int(self._clock() * 1000)
        if ephemeral:
            self._ephemeral.add(path)
        else:
            self._fragments[path] = _fragment(path, data, 0)
        return touched

    def _set(self, path: str, data: bytes, version: int) -> set[str]:
        if path not in self._nodes:
            raise NoNodeError(path)
        cur = self._nodes[path][1]
        if version != -1 and version != cur:
            raise BadVersionError(path)
        self._nodes[path] = (bytes(data), cur + 1)
        if path not in self._ephemeral:
            self._fragments[path] = _fragment(path, data, cur + 1)
        return {path}

    def _delete(self, path: str, version: int, recursive: bool) -> set[str]:
        if path not in self._nodes:
            raise NoNodeError(path)
        if version != -1 and version != self._nodes[path][1]:
            raise BadVersionError(path)
        prefix = path.rstrip("/") + "/"
        kids = [p for p in self._nodes if p.startswith(prefix)]
        if kids and not recursive:
            raise NotEmptyError(path)
        for p in [*kids, path]:
            del self._nodes[p]
            self._fragments.pop(p, None)
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
            count = len(self._nodes)
            touched = self._create(path, data, ephemeral, makepath)
            # parents made by makepath are persistent, even those of an ephemeral node
            if not ephemeral or len(self._nodes) - count > 1:
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
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

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
        for p in list(self._ephemeral):
            self._nodes.pop(p, None)
        self._ephemeral.clear()
