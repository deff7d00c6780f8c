"""The embedded LocalStore's file: encoding, checksum, crash-safe replacement, a previous copy.

Layout (``<log.dir>/odradek-metadata.json``, one line of JSON, ASCII)::

    {"version": 2, "crc32": <int>, "nodes": {"<path>": {"data": "<base64>", "version": <int>}, ...}}

``crc32`` is zlib's CRC-32 of the canonical text of ``nodes`` (``json.dumps`` with sorted keys, no
spaces, ASCII escapes), so a truncated, garbled or hand-edited file is told from a good one. A
version 1 file (the same without ``crc32``, written before the checksum) is read as it is.

Replacing it (:func:`write`): the new text goes to ``odradek-metadata.tmp``, fsync; the current file
is renamed to ``odradek-metadata.json.prev``; the temporary file is renamed to the current name; the
directory is fsynced. A crash at any point leaves either the new file, or the old one as ``.prev``
(the write was not acknowledged), and the temporary file is ignored.

Reading (:func:`read`): the current file when it is whole; otherwise the ``.prev`` copy, with a
warning, the unusable current file first renamed ``odradek-metadata.json.corrupt-<ms>`` and kept
for inspection (nothing is deleted); neither usable is :class:`MetadataFileError`, one line naming
both files. No file at all is a new store, unless the caller says one must exist (the log dir's
``meta.properties`` shows a broker ran there: its topics would otherwise be forgotten).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import time
import zlib
from pathlib import Path

from odradek.log.checkpoint import fsync_dir

log = logging.getLogger("odradek.store")

FORMAT_VERSION = 2
PREV_SUFFIX = ".prev"
CORRUPT_SUFFIX = ".corrupt-"

Nodes = dict[str, tuple[bytes, int]]


class MetadataFileError(Exception):
    """Neither the metadata file nor its previous copy can be read; nothing was changed on disk."""


def prev_path(file: Path) -> Path:
    return file.with_name(file.name + PREV_SUFFIX)


def tmp_path(file: Path) -> Path:
    return file.with_suffix(".tmp")


def _canonical(nodes_doc: object) -> bytes:
    return json.dumps(nodes_doc, separators=(",", ":"), sort_keys=True).encode()


def encode(nodes: Nodes) -> bytes:
    # built in canonical order (paths sorted, "data" before "version"), so the nodes' text is encoded once
    # and is itself the canonical text the checksum covers
    nodes_doc = {p: {"data": base64.b64encode(d).decode(), "version": v} for p, (d, v) in sorted(nodes.items())}
    text = _canonical(nodes_doc)
    return b'{"version":%d,"crc32":%d,"nodes":%s}' % (FORMAT_VERSION, zlib.crc32(text), text)


def decode(raw: bytes) -> Nodes:
    """The nodes of a file's bytes; ValueError saying what is wrong with them."""
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
    if version == FORMAT_VERSION:
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
    return out


def _try_read(path: Path) -> tuple[Nodes | None, str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    try:
        return decode(raw), ""
    except ValueError as e:
        return None, str(e)


def read(file: Path, *, must_exist: bool = False, why_must_exist: str = "") -> Nodes | None:
    """The stored nodes, from the current file or else its previous copy; None when neither file
    exists and ``must_exist`` is false (a new store). MetadataFileError otherwise."""
    nodes, why = _try_read(file)
    if nodes is not None:
        return nodes
    prev = prev_path(file)
    prev_nodes, prev_why = _try_read(prev)
    if prev_nodes is None:
        if why == "missing" and prev_why == "missing" and not must_exist:
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
    if why != "missing":
        aside = file.with_name(f"{file.name}{CORRUPT_SUFFIX}{int(time.time() * 1000)}")
        os.replace(file, aside)
        log.warning("metadata file %s is %s: kept as %s; using the previous copy %s (the last change before the "
                    "crash or damage may be lost)", file, why, aside.name, prev.name)
    else:
        log.warning("metadata file %s is missing: using the previous copy %s (the last change before the crash "
                    "may be lost)", file, prev.name)
    # the current file again, from the copy (which stays as it is until the next change)
    data = encode(prev_nodes)
    tmp = tmp_path(file)
    _write_synced(tmp, data)
    os.replace(tmp, file)
    fsync_dir(file.parent)
    return prev_nodes


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write(file: Path, nodes: Nodes) -> None:
    """Replace the file with ``nodes``, keeping the one it replaces as the previous copy (OSError
    when it cannot: the current file is then the one before the call)."""
    tmp = tmp_path(file)
    _write_synced(tmp, encode(nodes))
    prev = prev_path(file)
    had_current = file.exists()
    if had_current:
        os.replace(file, prev)
    try:
        os.replace(tmp, file)
    except OSError:
        if had_current:
            os.replace(prev, file)
        raise
    fsync_dir(file.parent)
