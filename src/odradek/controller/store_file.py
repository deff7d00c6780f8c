"""The embedded LocalStore's files: a snapshot of the tree and a journal of the changes made since.

A change costs what it changed: it is appended to the journal as one entry (its own length and
CRC-32, then fsync), and the whole tree is written only when the journal has grown past the
snapshot's size (at least :data:`JOURNAL_MIN_BYTES`), or when the files must be made whole again
(see Reading), or when the store is closed with changes in its journal.

Files in ``<log.dir>``:

- ``odradek-metadata.json``: the snapshot, and ``odradek-metadata.json.prev`` the one it replaced;
- ``odradek-metadata.journal``: the changes since the snapshot, and ``odradek-metadata.journal.prev``
  the changes since the previous snapshot;
- ``odradek-metadata.tmp``, ``odradek-metadata.journal.tmp``: a compaction under way (ignored on reading);
- ``<name>.corrupt-<ms>``: a damaged file kept for inspection (nothing is ever deleted on reading).

Snapshot layout (one line of JSON, ASCII)::

    {"version": 3, "generation": <G>, "crc32": <C>, "nodes": {"<path>": {"data": "<base64>", "version": <int>}, ...}}

``G`` counts the snapshots written (1, 2, ...); ``C`` is zlib's CRC-32 of ``b"<G>\\n"`` followed by the
canonical text of ``nodes`` (``json.dumps`` with sorted keys, no spaces, ASCII escapes), so a truncated,
garbled or hand-edited file is told from a good one. Earlier formats are read as they are, as
generation 0: version 2 (no ``generation``; the CRC-32 of the nodes' text alone) and version 1 (no
checksum either); the first change then writes a version 3 snapshot (the upgrade).

Journal layout (binary, integers big-endian)::

    header   magic "OdrkMJnl" (8 bytes) | format u32 = 1 | generation u64 | prev_generation i64
             | prev_length u64 | crc32 u32 (of the 36 bytes before it)                       40 bytes
    entry*   length u32 | crc32 u32 | payload (length bytes)
    payload  count u32, then count operations:
             put:    kind u8 = 1 | path_length u16 | path (UTF-8) | version i32 | data_length u32 | data
             delete: kind u8 = 2 | path_length u16 | path (UTF-8)

``generation`` is the snapshot the entries apply to; ``prev_generation`` / ``prev_length`` say that this
snapshot is exactly snapshot ``prev_generation`` with the first ``prev_length`` bytes of its journal
(header included) applied, or -1 / 0 when it is not known (a snapshot written after a recovery). An
entry is one mutation of the store (a create, set, delete or multi) with every node it changed: a put
holds the node's new data and version, a delete one removed node (a recursive delete lists each). The
entry's crc32 is zlib's CRC-32 of its length field followed by its payload. Replaying an entry sets
what it names, so a stale entry applied twice changes nothing.

Appending (:meth:`MetadataFiles.commit`): the entry is written at the end of the journal (opened
per entry, without ``O_CREAT``: a journal that is something else now is an error, one that is gone is
written again with a snapshot) and fdatasynced before the change is applied and acknowledged. When the
write or the sync fails the journal is cut back to its previous length; when even that fails, the next
change writes a snapshot instead of appending after the unknown bytes. When the journal has then
outgrown the snapshot, a compaction follows (its failure is logged: the change is in the journal).
The first change of a new store, or of one read from an earlier format or without a journal that
follows its snapshot, writes a snapshot instead.

Compaction (:meth:`MetadataFiles.compact`): a new journal (header only) goes to
``odradek-metadata.journal.tmp`` and the snapshot to ``odradek-metadata.tmp``, both fsynced; then the
current snapshot is renamed to ``.prev``, the new one put in its place, the current journal renamed to
``.prev``, the new one put in its place, and the directory fsynced. A crash at any point leaves a
state the reader puts together without loss: before the snapshot's rename, the old files; between
the two snapshot renames, ``.prev`` and the journal that follows it; after them, the new snapshot,
whose journal is either the stale one (its generation is older: ignored, its changes are in the
snapshot) or missing or the new one.

Reading (:meth:`MetadataFiles.load`): the snapshot when it is whole, then the journal's entries when
its generation is the snapshot's. A last entry that is cut short, or fails its CRC with nothing after
it, or is followed by nothing but zeros (a write the crash interrupted: never acknowledged) is dropped
with a warning and cut off the file. A bad entry with more after it (damage, not a crash) makes the journal corrupt: the entries
before it are used, the journal is renamed ``.corrupt-<ms>`` with a warning and a snapshot is written
at once. A snapshot that is damaged or missing is renamed ``.corrupt-<ms>`` (when there is one) and
the previous copy is used, with a warning, and the journals that follow it: ``journal.prev`` when its
generation is that of ``.prev``, up to the new journal's ``prev_length``, then the new journal; or
the journal itself when its generation is that of ``.prev`` (the crash between the snapshot renames);
a journal that follows neither is renamed ``.corrupt-<ms>``; a snapshot is then written at once.
Neither snapshot usable is :class:`MetadataFileError`, one line naming both files; no snapshot at all is a new store (a journal left without one is renamed
``.corrupt-<ms>`` with a warning), unless the caller says one must exist (the log dir's
``meta.properties`` shows a broker ran there: its topics would otherwise be forgotten).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.fsutil import fsync_dir, fsync_file, write_file

log = logging.getLogger("odradek.store")

FORMAT_VERSION = 3
JOURNAL_FORMAT = 1
JOURNAL_MAGIC = b"OdrkMJnl"
JOURNAL_MIN_BYTES = 1 << 20  # a journal may grow to the snapshot's size, and to this at least, before compaction
PREV_SUFFIX = ".prev"
CORRUPT_SUFFIX = ".corrupt-"

Nodes = dict[str, tuple[bytes, int]]
Changes = Mapping[str, tuple[bytes, int] | None]  # path -> its new (data, version), or None: deleted

_HEADER = struct.Struct(">8sIQqQ")  # magic, format, generation, prev_generation, prev_length
HEADER_SIZE = _HEADER.size + 4
_ENTRY = struct.Struct(">II")  # length, crc32
_PUT, _DELETE = 1, 2


class MetadataFileError(Exception):
    """Neither the metadata file nor its previous copy can be read; nothing was changed on disk."""


def prev_path(file: Path) -> Path:
    return file.with_name(file.name + PREV_SUFFIX)


def tmp_path(file: Path) -> Path:
    return file.with_suffix(".tmp")


def journal_path(file: Path) -> Path:
    return file.with_suffix(".journal")


def _canonical(nodes_doc: object) -> bytes:
    return json.dumps(nodes_doc, separators=(",", ":"), sort_keys=True).encode()


# -- the snapshot


def encode(nodes: Nodes, generation: int = 1) -> bytes:
    # built in canonical order (paths sorted, "data" before "version"), so the nodes' text is encoded once
    # and is itself the canonical text the checksum covers
    nodes_doc = {p: {"data": base64.b64encode(d).decode(), "version": v} for p, (d, v) in sorted(nodes.items())}
    text = _canonical(nodes_doc)
    crc = zlib.crc32(text, zlib.crc32(b"%d\n" % generation))
    return b'{"version":%d,"generation":%d,"crc32":%d,"nodes":%s}' % (FORMAT_VERSION, generation, crc, text)


def decode_snapshot(raw: bytes) -> tuple[Nodes, int]:
    """The nodes of a snapshot's bytes and its generation (0 for the formats before 3); ValueError
    saying what is wrong with them."""
    if not raw:
        raise ValueError("empty")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at byte {e.pos} of {len(raw)})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise ValueError("no nodes object")
    version = doc.get("version")
    generation = 0
    if version == FORMAT_VERSION:
        stated = doc.get("generation")
        if not isinstance(stated, int) or isinstance(stated, bool) or stated < 1:
            raise ValueError(f"bad generation {stated!r}")
        generation = stated
        if zlib.crc32(_canonical(doc["nodes"]), zlib.crc32(b"%d\n" % generation)) != doc.get("crc32"):
            raise ValueError("checksum mismatch")
    elif version == 2:
        if zlib.crc32(_canonical(doc["nodes"])) != doc.get("crc32"):
            raise ValueError("checksum mismatch")
    elif version != 1:
        raise ValueError(f"unknown format version {version!r}")
    out: Nodes = {}
    try:
        for path, node in doc["nodes"].items():
            out[path] = (base64.b64decode(node["data"], validate=True), int(node["version"]))
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise ValueError(f"malformed node ({e})") from None
    return out, generation


def decode(raw: bytes) -> Nodes:
    """The nodes of a snapshot's bytes; ValueError saying what is wrong with them."""
    return decode_snapshot(raw)[0]


@dataclass
class _Snapshot:
    nodes: Nodes
    generation: int
    size: int


def _try_read(path: Path) -> tuple[_Snapshot | None, str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    try:
        nodes, generation = decode_snapshot(raw)
    except ValueError as e:
        return None, str(e)
    return _Snapshot(nodes, generation, len(raw)), ""


def read(file: Path) -> Nodes | None:
    """The nodes of one snapshot file (no journal, no fallback), None when it is missing or damaged."""
    snap, _why = _try_read(file)
    return None if snap is None else snap.nodes


# -- the journal


def journal_header(generation: int, prev_generation: int = -1, prev_length: int = 0) -> bytes:
    head = _HEADER.pack(JOURNAL_MAGIC, JOURNAL_FORMAT, generation, prev_generation, prev_length)
    return head + struct.pack(">I", zlib.crc32(head))


def encode_entry(changes: Changes) -> bytes:
    parts = [struct.pack(">I", len(changes))]
    for path, node in sorted(changes.items()):
        p = path.encode()
        if node is None:
            parts.append(struct.pack(">BH", _DELETE, len(p)) + p)
        else:
            data, version = node
            parts.append(struct.pack(">BH", _PUT, len(p)) + p + struct.pack(">iI", version, len(data)))
            parts.append(data)
    payload = b"".join(parts)
    length = struct.pack(">I", len(payload))
    return length + struct.pack(">I", zlib.crc32(payload, zlib.crc32(length))) + payload


def _decode_payload(payload: bytes) -> list[tuple[str, tuple[bytes, int] | None]]:
    """ValueError (or struct.error) when the payload does not hold what its CRC said it does."""
    (count,) = struct.unpack_from(">I", payload, 0)
    pos = 4
    ops: list[tuple[str, tuple[bytes, int] | None]] = []
    for _ in range(count):
        kind, plen = struct.unpack_from(">BH", payload, pos)
        pos += 3
        path = payload[pos:pos + plen].decode()
        pos += plen
        if kind == _PUT:
            version, dlen = struct.unpack_from(">iI", payload, pos)
            pos += 8
            data = payload[pos:pos + dlen]
            if len(data) != dlen:
                raise ValueError("data past the entry's end")
            pos += dlen
            ops.append((path, (data, version)))
        elif kind == _DELETE:
            ops.append((path, None))
        else:
            raise ValueError(f"unknown operation {kind}")
    if pos != len(payload):
        raise ValueError("bytes after the last operation")
    return ops


@dataclass
class _Journal:
    generation: int
    prev_generation: int
    prev_length: int
    entries: list[tuple[int, list[tuple[str, tuple[bytes, int] | None]]]] = field(default_factory=list)
    valid_length: int = HEADER_SIZE  # the bytes up to the end of the last good entry
    size: int = HEADER_SIZE
    problem: str = ""  # why the bytes after valid_length are not entries
    torn: bool = False  # those bytes are an interrupted last write (else damage)

    def ops_until(self, length: int) -> Iterator[list[tuple[str, tuple[bytes, int] | None]]]:
        for end, ops in self.entries:
            if end > length:
                return
            yield ops


def _read_journal(path: Path) -> tuple[_Journal | None, str]:
    """The journal's header and good entries; (None, why) when it is missing or its header is bad."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    if len(raw) < HEADER_SIZE:
        return None, f"shorter than its header ({len(raw)} bytes)"
    magic, fmt, generation, prev_generation, prev_length = _HEADER.unpack_from(raw, 0)
    (crc,) = struct.unpack_from(">I", raw, _HEADER.size)
    if magic != JOURNAL_MAGIC or zlib.crc32(raw[:_HEADER.size]) != crc:
        return None, "not a metadata journal (bad header)"
    if fmt != JOURNAL_FORMAT:
        return None, f"unknown journal format {fmt}"
    j = _Journal(generation, prev_generation, prev_length, size=len(raw))
    pos = HEADER_SIZE
    while pos < len(raw):
        problem = ""
        if len(raw) - pos < _ENTRY.size:
            problem = "entry header cut short"
        else:
            length, crc = _ENTRY.unpack_from(raw, pos)
            end = pos + _ENTRY.size + length
            if end > len(raw):
                problem = f"entry of {length} bytes cut short"
            elif zlib.crc32(raw[pos + _ENTRY.size:end], zlib.crc32(raw[pos:pos + 4])) != crc:
                problem = "entry checksum mismatch"
            else:
                try:
                    j.entries.append((end, _decode_payload(raw[pos + _ENTRY.size:end])))
                except (ValueError, struct.error, UnicodeDecodeError) as e:
                    problem = f"malformed entry ({e})"
        if problem:
            j.problem = f"{problem} at byte {pos}"
            # cut short, or nothing but zeros after it: the write a crash interrupted
            j.torn = problem.endswith("cut short") or not raw[pos + _ENTRY.size:].strip(b"\0") or (
                problem == "entry checksum mismatch" and end == len(raw))
            break
        pos = end
        j.valid_length = pos
    return j, ""


def _apply(nodes: Nodes, ops: list[tuple[str, tuple[bytes, int] | None]]) -> None:
    for path, node in ops:
        if node is None:
            nodes.pop(path, None)
        else:
            nodes[path] = node


def _aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}{CORRUPT_SUFFIX}{int(time.time() * 1000)}")
    os.replace(path, aside)
    return aside


class MetadataFiles:
    """The snapshot and journal of one LocalStore: :meth:`load` once, then :meth:`commit` per change."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.journal = journal_path(file)
        self.generation = 0  # the current snapshot's, 0 when there is none
        self.snapshot_size = 0
        self.journal_size = 0  # bytes of the current journal (header included), 0 when it does not follow
        self.journal_entries = 0
        self.max_generation = 0  # the highest generation seen in any file: the next snapshot's is above it
        self.needs_compaction = True  # no journal to append to yet

    # -- reading
    def peek(self) -> Nodes | None:
        """The nodes of the snapshot and the good entries of its own journal, read only (for offline
        tools: nothing is repaired, set aside or compacted); None when the snapshot is missing or
        damaged, which only :meth:`load` recovers from."""
        snap, _why = _try_read(self.file)
        if snap is None:
            return None
        nodes = dict(snap.nodes)
        cur, _jwhy = _read_journal(self.journal)
        if cur is not None and cur.generation == snap.generation:
            for ops in cur.ops_until(cur.valid_length):
                _apply(nodes, ops)
        return nodes

    def load(self, *, must_exist: bool = False, why_must_exist: str = "") -> Nodes | None:
        """The stored nodes; None when there is no file at all and ``must_exist`` is false (a new
        store). MetadataFileError when neither snapshot can be read."""
        file, journal = self.file, self.journal
        snap, why = _try_read(file)
        cur, jwhy = _read_journal(journal)
        if snap is not None:
            self.max_generation = max(snap.generation, cur.generation if cur else 0)
            self.generation, self.snapshot_size = snap.generation, snap.size
            nodes = snap.nodes
            if cur is None:
                if jwhy != "missing":
                    aside = _aside(journal)
                    log.warning("metadata journal %s is %s: kept as %s; using the snapshot %s alone (the changes "
                                "since it are lost)", journal, jwhy, aside.name, file.name)
                    self.compact(nodes)
                return nodes  # a snapshot of an earlier format, or a crash before its journal was put in place
            if cur.generation < snap.generation:
                log.info("metadata journal %s is older than the snapshot %s (a compaction was interrupted): its "
                         "changes are in the snapshot", journal, file.name)
                return nodes
            if cur.generation > snap.generation:
                aside = _aside(journal)
                log.warning("metadata journal %s follows a later snapshot than %s (generation %d, not %d): kept as "
                            "%s; using the snapshot alone", journal, file.name, cur.generation, snap.generation,
                            aside.name)
                self.compact(nodes)
                return nodes
            for ops in cur.ops_until(cur.valid_length):
                _apply(nodes, ops)
            self.journal_size, self.journal_entries = cur.valid_length, len(cur.entries)
            self.needs_compaction = False
            if cur.problem and cur.torn:
                log.warning("metadata journal %s: %s, a change the crash interrupted (never acknowledged): dropped",
                            journal, cur.problem)
                os.truncate(journal, cur.valid_length)
                fsync_file(journal)
            elif cur.problem:
                aside = _aside(journal)
                log.warning("metadata journal %s is damaged (%s, with %d bytes after it): kept as %s; using the "
                            "snapshot and the %d changes before the damage (later changes are lost)", journal,
                            cur.problem, cur.size - cur.valid_length, aside.name, len(cur.entries))
                self.compact(nodes)
            return nodes

        prev = prev_path(file)
        psnap, prev_why = _try_read(prev)
        if psnap is None:
            if why == "missing" and prev_why == "missing" and not must_exist:
                # a new store; a journal without a snapshot to apply to is kept aside (the operator removed
                # meta.properties to start with empty metadata, see the README)
                for orphan in (journal, prev_path(journal)):
                    if orphan.exists():
                        log.warning("metadata journal %s has no snapshot to apply to: kept as %s; starting with "
                                    "empty metadata", orphan, _aside(orphan).name)
                return None
            if why == "missing" and prev_why == "missing":
                raise MetadataFileError(
                    f"metadata file {file} is missing, and so is its previous copy {prev.name}, but {why_must_exist}: "
                    "refusing to start with empty metadata; restore the file from a backup (see 'Recovering the "
                    "metadata file' in the README)"
                )
            raise MetadataFileError(
                f"metadata file {file} is {why} and its previous copy {prev.name} is {prev_why}: refusing to start; "
                "nothing was changed on disk (see 'Recovering the metadata file' in the README)"
            )
        nodes = psnap.nodes
        jprev, _ = _read_journal(prev_path(journal))
        used: list[str] = []
        chain: tuple[int, int] | None = None
        if cur is not None and cur.generation == psnap.generation:
            # the crash between the snapshot's renames: the journal still follows the previous copy, and
            # becomes journal.prev beside it
            for ops in cur.ops_until(cur.valid_length):
                _apply(nodes, ops)
            used.append(journal.name)
            chain = (psnap.generation, cur.valid_length)
        elif jprev is not None and jprev.generation == psnap.generation:
            # the damaged snapshot was the previous copy and the first prev_length bytes of journal.prev
            follows = cur is not None and cur.prev_generation == psnap.generation and (
                cur.prev_length == HEADER_SIZE or any(end == cur.prev_length for end, _ in jprev.entries))
            upto = cur.prev_length if cur is not None and follows else jprev.valid_length
            for ops in jprev.ops_until(upto):
                _apply(nodes, ops)
            used.append(prev_path(journal).name)
            if cur is not None and follows:
                for ops in cur.ops_until(cur.valid_length):
                    _apply(nodes, ops)
                used.append(journal.name)
        gens = [psnap.generation, *(j.generation for j in (cur, jprev) if j is not None)]
        self.max_generation = max(gens)
        if cur is not None and journal.name not in used:
            # changes that follow the damaged snapshot: kept for inspection, not rotated away
            log.warning("metadata journal %s does not follow the previous copy %s: kept as %s", journal, prev.name,
                        _aside(journal).name)
        if why != "missing":
            aside = _aside(file)
            log.warning("metadata file %s is %s: kept as %s; using the previous copy %s%s (changes after those "
                        "may be lost)", file, why, aside.name, prev.name,
                        f" and the journal {' and '.join(used)}" if used else "")
        else:
            log.warning("metadata file %s is missing: using the previous copy %s%s (changes after those may be "
                        "lost)", file, prev.name, f" and the journal {' and '.join(used)}" if used else "")
        # the files whole again: a snapshot of what was read, a new empty journal (the previous copy stays)
        self.compact(nodes, chain)
        return nodes

    # -- writing
    def commit(self, changes: Changes, all_nodes: Callable[[], Nodes]) -> None:
        """Make ``changes`` durable (``all_nodes``: the whole tree with them, for a compaction); OSError
        when they could not be, the files then holding the state before the call (or, when only the end
        of a compaction failed, the new one: like a ZooKeeper write that timed out)."""
        if self.needs_compaction:
            self.compact(all_nodes())
            return
        try:
            self._append(encode_entry(changes))
        except FileNotFoundError:
            log.warning("metadata journal %s is gone: writing the whole tree again", self.journal)
            self.needs_compaction = True
            self.compact(all_nodes())
            return
        if self.journal_size > max(JOURNAL_MIN_BYTES, self.snapshot_size):
            try:
                self.compact(all_nodes(), (self.generation, self.journal_size))
            except OSError:  # the change is in the journal: durable; the compaction is tried again
                log.warning("metadata compaction of %s failed; the journal keeps growing until it succeeds",
                            self.file, exc_info=True)

    def _append(self, entry: bytes) -> None:
        fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        try:
            try:
                view = memoryview(entry)
                while view:
                    view = view[os.write(fd, view):]
                os.fdatasync(fd)
            except OSError:
                try:  # cut the journal back, so the next entry does not follow unknown bytes
                    os.ftruncate(fd, self.journal_size)
                    os.fsync(fd)
                except OSError:
                    self.needs_compaction = True
                raise
        finally:
            os.close(fd)
        self.journal_size += len(entry)
        self.journal_entries += 1

    def compact(self, nodes: Nodes, chain: tuple[int, int] | None = None) -> None:
        """Write ``nodes`` as a new snapshot with an empty journal, keeping the current ones as ``.prev``
        (``chain``: the generation of the snapshot that becomes ``.prev`` and the length of the journal
        that becomes ``journal.prev`` when ``nodes`` is exactly the one with the other applied)."""
        generation = self.max_generation + 1
        header = journal_header(generation, *(chain or (-1, 0)))
        jtmp = self.journal.with_name(self.journal.name + ".tmp")
        stmp = tmp_path(self.file)
        data = encode(nodes, generation)
        write_file(jtmp, header)
        try:
            write_file(stmp, data)
        except OSError:
            jtmp.unlink(missing_ok=True)
            raise
        prev = prev_path(self.file)
        had_current = self.file.exists()
        if had_current:
            os.replace(self.file, prev)
        try:
            os.replace(stmp, self.file)
        except OSError:
            if had_current:
                os.replace(prev, self.file)
            raise
        # the new snapshot is in place: the current journal no longer follows it
        self.generation = self.max_generation = generation
        self.snapshot_size = len(data)
        self.needs_compaction = True
        if self.journal.exists():
            os.replace(self.journal, prev_path(self.journal))
        os.replace(jtmp, self.journal)
        fsync_dir(self.file.parent)
        self.journal_size, self.journal_entries = len(header), 0
        self.needs_compaction = False
