"""Kafka's small metadata files: offset checkpoints and ``partition.metadata``.

Offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``), text, one
item per line::

    0                          version
    <N>                        number of entries
    <topic> <partition> <offset>   N lines

``partition.metadata`` (KIP-516), text::

    version: 0
    topic_id: <topic id, 16 bytes as base64url without padding>

Both are written atomically and durably by :func:`odradek.fsutil.write_atomic` (``<file>.tmp``,
fsync, rename over the file, fsync the directory; what a crash leaves is said there).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path

from odradek.fsutil import write_atomic, write_file
from odradek.log.errors import LogError

log = logging.getLogger("odradek.log")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA_FILE = "partition.metadata"

TopicPartition = tuple[str, int]


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))]
    lines.extend(f"{t} {p} {o}" for (t, p), o in sorted(offsets.items()))
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Parse a checkpoint file; a missing file is empty, a malformed one is logged
    and treated as empty (which only makes recovery more thorough)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        lines = text.splitlines()
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, part, off = line.split(" ")
            out[(topic, int(part))] = int(off)
        if len(out) != count:
            raise ValueError(f"expected {count} entries, found {len(out)}")
        return out
    except (ValueError, IndexError) as exc:
        log.error("Malformed checkpoint file %s (%s); ignoring it", path, exc)
        return {}


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(
    partition_dir: Path, topic_id: uuid.UUID, *, sync: bool = True, new: bool = False
) -> None:
    """``new``: the directory was just created, so the file is written in place (no temporary
    file and rename: nothing older can be half-replaced)."""
    body = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n".encode()
    path = partition_dir / PARTITION_METADATA_FILE
    if new and not sync:
        write_file(path, body, sync=False)
        return
    write_atomic(path, body, sync=sync)


def read_partition_metadata(partition_dir: Path) -> uuid.UUID | None:
    """The topic id, None when the file does not exist (a log from before topic ids: it is given
    the topic's) or is empty. A file that is there but cannot be read is LogError naming it: the log would
    otherwise be taken for whichever topic now has its name (Kafka refuses to load it too)."""
    path = partition_dir / PARTITION_METADATA_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror or e}") from None
    if not raw:
        # written in place without fsync when the log was created (write_partition_metadata new=True): a
        # power loss right after leaves it empty, which says no more than a missing file
        log.warning("Empty %s: the log takes the topic id of the topic that has its name", path)
        return None
    fix = "restore it, or remove it to have the log take the topic id of the topic that has its name"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(f"Malformed {path}: not UTF-8 text; {fix}") from None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise LogError(f"Malformed {path}: expected 'version: 0' and 'topic_id: <id>' lines; {fix}")
    try:
        topic_id = decode_topic_id(fields["topic_id"])
    except ValueError:
        raise LogError(f"Malformed topic id {fields['topic_id'][:40]!r} in {path}; {fix}") from None
    return topic_id
