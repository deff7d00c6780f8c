"""The ``__cluster_metadata-0`` partition on disk, as Kafka's KafkaMetadataLog keeps it (KIP-595, KIP-630).

Layout, in ``metadata.log.dir`` (Kafka's, file for file)::

    __cluster_metadata-0/
        00000000000000000000.log          segments of v2 batches (odradek.log's Log: Kafka's UnifiedLog), the
        00000000000000000000.index        batch header's partitionLeaderEpoch holding the quorum epoch the
        00000000000000000000.timeindex    batch was appended in; offset and time indexes beside each segment
        leader-epoch-checkpoint           the first offset of each quorum epoch (LeaderEpochFileCache)
        <end offset:020d>-<epoch:010d>.checkpoint
                                          a snapshot (KIP-630): every record of the image at end offset - 1,
                                          written as ``.checkpoint.part``, fsynced, renamed, the directory fsynced
        quorum-state                      the raft election state (KIP-595), odradek.raft's, not this module's

A snapshot file is batches like the log's (:mod:`.batches`): a control batch with the SnapshotHeaderRecord
(``lastContainedLogTimestamp``) and, in a bootstrap snapshot of a dynamic quorum (KIP-853), the
KRaftVersionRecord and VotersRecord; data batches of the image's records (:func:`.image.image_records`);
a control batch with the SnapshotFooterRecord. Offsets inside the file count from 0; every batch carries
the snapshot's epoch. ``00000000000000000000-0000000000.checkpoint`` is the bootstrap snapshot
``kafka-storage format`` writes (Kafka 4.4 writes the bootstrap FeatureLevelRecords there; the
``bootstrap.checkpoint`` file of Kafka 3.x is gone).

:meth:`MetadataLog.load` is the latest snapshot applied to an empty image, then the log's batches from the
snapshot's end offset (:func:`.delta.apply_batches`, KIP-868 transactions included). Opening the log
recovers it as Kafka's does after an unclean shutdown: a torn batch at the tail is cut off; ``.part`` and
``.deleted`` snapshot files left by a crash are removed.

Retention (Kafka's KafkaMetadataLog.cleanSnapshots): a snapshot other than the latest is deleted, and the
log before the next snapshot with it, once the log and snapshots together exceed
``metadata.max.retention.bytes`` or the snapshot's last contained record is older than
``metadata.max.retention.ms`` (-1: no limit); the log start offset never passes the high watermark.
:meth:`MetadataLog.should_snapshot` says when a new snapshot is due (Kafka's SnapshotGenerator):
``metadata.log.max.record.bytes.between.snapshots`` bytes appended since the last one, or
``metadata.log.max.snapshot.interval.ms`` since it with something appended.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.static.primitive import i16, i64

from odradek.fsutil import fsync_dir
from odradek.log.config import LogConfig
from odradek.log.log import Log
from odradek.metadata.batches import (
    ControlMessage,
    MetadataBatch,
    build_control_batch,
    build_records_batch,
    read_batches,
    records_of,
)
from odradek.metadata.delta import apply_batches, apply_records
from odradek.metadata.image import EMPTY_IMAGE, MetadataImage, image_records
from odradek.metadata.records import MetadataRecord, RecordAndVersion, encode_record
from odradek.metadata.schema import MetadataRecordError
from odradek.protocol.records import batch_crc_ok, iter_batches

log = logging.getLogger("odradek.metadata.log")

TOPIC = "__cluster_metadata"
PARTITION_DIR = f"{TOPIC}-0"
SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
DELETED_SUFFIX = ".deleted"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
MAX_BATCH_BYTES = 8 * 1024 * 1024  # KafkaRaftClient.MAX_BATCH_SIZE_BYTES
_RECORDS_PER_BATCH = 1000


class SnapshotId(NamedTuple):
    """Kafka's OffsetAndEpoch of a snapshot: the offset after its last record, and that record's epoch."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"


BOOTSTRAP_SNAPSHOT = SnapshotId(0, 0)  # Snapshots.BOOTSTRAP_SNAPSHOT_ID


def snapshot_id_of(name: str) -> SnapshotId | None:
    m = _SNAPSHOT_NAME.match(name)
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class MetadataLogConfig:
    """Kafka's metadata log settings (MetadataLogConfig), with Kafka 4.4's defaults."""

    segment_bytes: int = 1073741824  # metadata.log.segment.bytes
    segment_ms: int = 604800000  # metadata.log.segment.ms
    max_record_bytes_between_snapshots: int = 20971520  # metadata.log.max.record.bytes.between.snapshots
    max_snapshot_interval_ms: int = 3600000  # metadata.log.max.snapshot.interval.ms (0: no time trigger)
    retention_bytes: int = 104857600  # metadata.max.retention.bytes (-1: no limit)
    retention_ms: int = 604800000  # metadata.max.retention.ms (-1: no limit)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetadataLogConfig:
        names = {
            "segment_bytes": "metadata.log.segment.bytes", "segment_ms": "metadata.log.segment.ms",
            "max_record_bytes_between_snapshots": "metadata.log.max.record.bytes.between.snapshots",
            "max_snapshot_interval_ms": "metadata.log.max.snapshot.interval.ms",
            "retention_bytes": "metadata.max.retention.bytes", "retention_ms": "metadata.max.retention.ms",
        }
        changes: dict[str, int] = {}
        for attr, name in names.items():
            raw = props.get(name)
            if raw is not None and raw.strip():
                try:
                    changes[attr] = int(raw.strip())
                except ValueError:
                    raise ValueError(f"Invalid value {raw} for configuration {name}: Not a number of type LONG") \
                        from None
        return replace(cls(), **changes)

    def log_config(self) -> LogConfig:
        # the metadata log is never deleted by time or size: snapshots decide (cleanSnapshots); files of
        # deleted segments go at once
        return LogConfig(segment_bytes=self.segment_bytes, segment_ms=self.segment_ms, retention_ms=-1,
                         retention_bytes=-1, file_delete_delay_ms=0, max_message_bytes=MAX_BATCH_BYTES)


# ------------------------------------------------------------------------------------------ snapshot files


def snapshot_bytes(
    records: Sequence[MetadataRecord | RecordAndVersion],
    *,
    epoch: int,
    timestamp: int,
    last_contained_timestamp: int | None = None,
    controls: Sequence[ControlMessage] = (),
) -> bytes:
    """A snapshot's bytes (Kafka's RecordsSnapshotWriter): the header batch (SnapshotHeaderRecord, then
    ``controls``: KRaftVersionRecord and VotersRecord in a bootstrap snapshot), the records in batches of at
    most 1,000 records and 8 MiB, the footer batch; offsets from 0, every batch in ``epoch``."""
    header = SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(
        timestamp if last_contained_timestamp is None else last_contained_timestamp))
    out = bytearray(build_control_batch([header, *controls], base_offset=0, leader_epoch=epoch, timestamp=timestamp))
    offset = 1 + len(controls)
    chunk: list[MetadataRecord | RecordAndVersion] = []
    size = 0
    for r in records:
        n = len(encode_record(r.record, r.version) if isinstance(r, RecordAndVersion) else encode_record(r))
        if chunk and (len(chunk) >= _RECORDS_PER_BATCH or size + n > MAX_BATCH_BYTES - 1024):
            out += build_records_batch(chunk, base_offset=offset, leader_epoch=epoch, timestamp=timestamp)
            offset += len(chunk)
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        out += build_records_batch(chunk, base_offset=offset, leader_epoch=epoch, timestamp=timestamp)
        offset += len(chunk)
    out += build_control_batch([SnapshotFooterRecord(version=i16(0))], base_offset=offset, leader_epoch=epoch,
                               timestamp=timestamp)
    return bytes(out)


def write_snapshot_file(directory: Path, snapshot_id: SnapshotId, data: bytes) -> Path:
    """Write a snapshot into ``directory`` (a ``__cluster_metadata-0``, made when missing) as Kafka's
    FileRawSnapshotWriter does: ``<name>.checkpoint.part``, fsync, rename, fsync of the directory; the
    finished file is read-only (0400), as Kafka leaves it. An existing snapshot of that id is refused."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / snapshot_id.file_name
    if final.exists():
        raise FileExistsError(f"snapshot {final} already exists")
    part = directory / (snapshot_id.file_name + PART_SUFFIX)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(part, 0o400)
    os.replace(part, final)
    fsync_dir(directory)
    return final


def read_snapshot_file(path: Path) -> list[MetadataBatch]:
    """A snapshot's batches, checked: the first record a SnapshotHeaderRecord, the last a
    SnapshotFooterRecord, every batch's CRC and record whole (:class:`MetadataRecordError` otherwise)."""
    try:
        batches = list(read_batches(path.read_bytes()))
    except MetadataRecordError as e:
        raise MetadataRecordError(f"snapshot {path}: {e}") from None
    entries = [e for b in batches for e in b.entries]
    if not entries or not isinstance(entries[0].control, SnapshotHeaderRecord):
        raise MetadataRecordError(f"snapshot {path} does not start with a SnapshotHeaderRecord")
    if not isinstance(entries[-1].control, SnapshotFooterRecord):
        raise MetadataRecordError(f"snapshot {path} does not end with a SnapshotFooterRecord (cut short?)")
    return batches


def snapshot_timestamp(batches: Sequence[MetadataBatch]) -> int:
    header = batches[0].entries[0].control
    assert isinstance(header, SnapshotHeaderRecord)
    return int(header.last_contained_log_timestamp)


def image_of_snapshot(snapshot_id: SnapshotId, batches: Sequence[MetadataBatch]) -> MetadataImage:
    """The image a snapshot holds, at offset ``end_offset - 1`` and the snapshot's epoch."""
    image = apply_records(EMPTY_IMAGE, records_of(batches))
    return replace(image, offset=snapshot_id.end_offset - 1, epoch=snapshot_id.epoch)


# ------------------------------------------------------------------------------------------ the partition


class MetadataLog:
    """``__cluster_metadata-0`` in ``metadata.log.dir``: the log of batches and its snapshots."""

    def __init__(self, directory: Path, log_: Log, config: MetadataLogConfig, now_ms: int) -> None:
        self.dir = directory
        self.log = log_
        self.config = config
        self._snapshots: list[SnapshotId] = self._scan_snapshots()
        self._timestamps: dict[SnapshotId, int] = {}  # lastContainedLogTimestamp of each snapshot read
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms

    @classmethod
    def open(cls, metadata_log_dir: Path, config: MetadataLogConfig | None = None, *, now_ms: int) -> MetadataLog:
        """Open (or create) ``<metadata_log_dir>/__cluster_metadata-0``, recovering a torn tail."""
        cfg = config or MetadataLogConfig()
        directory = metadata_log_dir / PARTITION_DIR
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.iterdir():  # Snapshots.deleteIfExists of a crash's partial files
            if leftover.name.endswith((SNAPSHOT_SUFFIX + PART_SUFFIX, SNAPSHOT_SUFFIX + DELETED_SUFFIX)):
                log.info("Deleting %s, left by an interrupted snapshot write or deletion", leftover)
                leftover.unlink()
        lg = Log.create(metadata_log_dir, TOPIC, 0, cfg.log_config(), time_ms=now_ms)
        store = cls(directory, lg, cfg, now_ms)
        latest = store.latest_snapshot()
        if latest is not None and latest.end_offset > lg.log_end_offset:
            # a snapshot past the log's end (KafkaMetadataLog: the log starts where the snapshot ends)
            lg.truncate_fully_and_start_at(latest.end_offset, now_ms)
        if latest is not None:
            lg.update_high_watermark(min(lg.log_end_offset, max(lg.high_watermark, latest.end_offset)))
        return store

    # --- the log -------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """The committed offset (the raft layer's), bounded by the log end; retention never passes it."""
        return self.log.update_high_watermark(min(offset, self.log.log_end_offset))

    def last_epoch(self) -> int:
        """The epoch of the log's last batch (or the latest snapshot's when the log is empty)."""
        cache = self.log.leader_epoch_cache.latest_epoch
        latest = self.latest_snapshot()
        return max(cache, latest.epoch if latest is not None else -1)

    def append(self, data: bytes | bytearray | memoryview, now_ms: int) -> int:
        """Append whole v2 batches carrying their offsets and epochs (the raft layer assigns them): they must
        continue the log at its end offset, with a CRC that holds and an epoch no lower than the last one.
        Returns the new log end offset."""
        view = memoryview(data)
        headers = []
        end = 0
        epoch = self.last_epoch()
        for pos, h in iter_batches(view):
            if h.magic != 2:
                raise MetadataRecordError(f"batch at offset {h.base_offset} has magic {h.magic}, not 2")
            if not batch_crc_ok(view, pos, h):
                raise MetadataRecordError(f"batch at offset {h.base_offset} fails its CRC-32C")
            if h.partition_leader_epoch < epoch:
                raise MetadataRecordError(f"batch at offset {h.base_offset} has epoch {h.partition_leader_epoch}, "
                                          f"below the log's last epoch {epoch}")
            epoch = h.partition_leader_epoch
            headers.append(h)
            end = pos + h.size
        if end != len(view):
            raise MetadataRecordError(f"{len(view) - end} byte(s) after the last whole batch")
        if not headers:
            return self.log.log_end_offset
        if headers[0].base_offset != self.log.log_end_offset:
            raise MetadataRecordError(f"batches start at offset {headers[0].base_offset}, not at the log end offset "
                                      f"{self.log.log_end_offset}")
        leo = self.log.append_as_follower(view, headers, now_ms)
        self._bytes_since_snapshot += len(view)
        return leo

    def flush(self) -> None:
        self.log.flush()

    def truncate_to(self, offset: int, now_ms: int) -> None:
        """Remove every batch at or after ``offset`` (a raft follower's divergence); never below the latest
        snapshot."""
        latest = self.latest_snapshot()
        if latest is not None and offset < latest.end_offset:
            raise ValueError(f"cannot truncate the metadata log to {offset}, below the latest snapshot {latest}")
        self.log.truncate_to(offset, now_ms)

    def read(self, from_offset: int = 0) -> Iterator[MetadataBatch]:
        """The log's batches from the one holding ``from_offset`` (at least the log start offset). The
        first segment is read from that batch on, found through its offset index (a reader following the
        high watermark costs what it reads, not the segment's size)."""
        segments = self.log.segments
        first = True
        for i, seg in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1].base_offset <= from_offset:
                continue
            size = seg.log.size
            start = 0
            if first:
                first = False
                found = seg.translate_offset(from_offset)
                if found is None:
                    continue
                start = found[0]
            if size <= start:
                continue
            data = os.pread(seg.log.fileno(), size - start, start)
            for batch in read_batches(data):
                if batch.last_offset >= from_offset:
                    yield batch

    # --- snapshots -----------------------------------------------------------------------------------

    def _scan_snapshots(self) -> list[SnapshotId]:
        ids = [sid for p in self.dir.iterdir() if (sid := snapshot_id_of(p.name)) is not None]
        return sorted(ids)

    def snapshots(self) -> list[SnapshotId]:
        return list(self._snapshots)

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_path(self, snapshot_id: SnapshotId) -> Path:
        return self.dir / snapshot_id.file_name

    def read_snapshot(self, snapshot_id: SnapshotId) -> list[MetadataBatch]:
        return read_snapshot_file(self.snapshot_path(snapshot_id))

    def write_snapshot(self, image: MetadataImage, *, now_ms: int, last_contained_timestamp: int | None = None,
                       controls: Sequence[ControlMessage] = ()) -> SnapshotId:
        """A snapshot of ``image`` (every record up to ``image.offset``), id ``(image.offset + 1,
        image.epoch)``. The log must hold that offset; an image older than the latest snapshot is refused."""
        sid = SnapshotId(image.offset + 1, max(image.epoch, 0))
        if sid.end_offset > self.log.log_end_offset:
            raise ValueError(f"cannot snapshot at end offset {sid.end_offset}: the log ends at {self.log.log_end_offset}")
        latest = self.latest_snapshot()
        if latest is not None and sid <= latest:
            raise ValueError(f"a snapshot at {sid} is not newer than the latest, {latest}")
        data = snapshot_bytes(image_records(image), epoch=sid.epoch, timestamp=now_ms,
                              last_contained_timestamp=last_contained_timestamp, controls=controls)
        write_snapshot_file(self.dir, sid, data)
        self._snapshots.append(sid)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms
        log.info("Wrote metadata snapshot %s (%d bytes)", sid.file_name, len(data))
        return sid

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes, now_ms: int) -> None:
        """A snapshot fetched from the leader (FetchSnapshot), checked, written, then Kafka's
        truncateToLatestSnapshot: the log starts, empty, at the snapshot's end offset, and the older snapshots
        go (nothing of the log before it is kept)."""
        try:
            batches = list(read_batches(data))
        except MetadataRecordError as e:
            raise MetadataRecordError(f"snapshot {snapshot_id.file_name} fetched: {e}") from None
        entries = [e for b in batches for e in b.entries]
        if not entries or not isinstance(entries[0].control, SnapshotHeaderRecord) \
                or not isinstance(entries[-1].control, SnapshotFooterRecord):
            raise MetadataRecordError(f"snapshot {snapshot_id.file_name} fetched has no header or footer record")
        if snapshot_id not in self._snapshots:
            write_snapshot_file(self.dir, snapshot_id, data)
            self._snapshots.append(snapshot_id)
            self._snapshots.sort()
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset, now_ms)
        self.log.update_high_watermark(snapshot_id.end_offset)
        self._delete_before(snapshot_id, now_ms)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms
        log.info("Installed metadata snapshot %s fetched from the leader; the log now starts at %d",
                 snapshot_id.file_name, snapshot_id.end_offset)

    def should_snapshot(self, now_ms: int) -> bool:
        """SnapshotGenerator's triggers: enough bytes appended since the last snapshot, or enough time with
        something appended."""
        if self._bytes_since_snapshot >= self.config.max_record_bytes_between_snapshots:
            return True
        interval = self.config.max_snapshot_interval_ms
        return interval > 0 and self._bytes_since_snapshot > 0 and now_ms - self._last_snapshot_ms >= interval

    # --- load ----------------------------------------------------------------------------------------

    def load(self) -> MetadataImage:
        """The latest snapshot, then the log after it."""
        image = EMPTY_IMAGE
        start = self.log.log_start_offset
        latest = self.latest_snapshot()
        if latest is not None:
            image = image_of_snapshot(latest, self.read_snapshot(latest))
            start = latest.end_offset
        elif start > 0:
            raise MetadataRecordError(f"{self.dir}: the log starts at offset {start} and no snapshot covers what "
                                      "comes before it")
        return apply_batches(image, self._from(start))

    def _from(self, start: int) -> Iterator[MetadataBatch]:
        """The log's batches from ``start``, the records of a batch that begins before it left out (a snapshot
        ends where the controller's last applied batch ended; this holds when it did not)."""
        for b in self.read(start):
            if b.base_offset < start:
                b = b._replace(entries=tuple(e for e in b.entries if e.offset >= start))
            yield b

    # --- retention -----------------------------------------------------------------------------------

    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes + sum(self.snapshot_path(s).stat().st_size for s in self._snapshots)

    def clean(self, now_ms: int) -> int:
        """KafkaMetadataLog.cleanSnapshots: from the oldest, each snapshot but the latest that breaks
        ``metadata.max.retention.bytes`` or ``.ms`` goes, with the log before the next snapshot. Returns
        how many snapshots were deleted."""
        deleted = 0
        while len(self._snapshots) > 1:
            oldest, nxt = self._snapshots[0], self._snapshots[1]
            too_big = 0 <= self.config.retention_bytes < self.size_in_bytes()
            ts = self._timestamps.get(oldest)
            if ts is None:
                ts = self._timestamps[oldest] = snapshot_timestamp(self.read_snapshot(oldest))
            too_old = self.config.retention_ms >= 0 and ts < now_ms - self.config.retention_ms
            if not (too_big or too_old) or nxt.end_offset > self.log.high_watermark:
                break
            self._delete_before(nxt, now_ms)
            deleted += 1
        return deleted

    def _delete_before(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        """KafkaMetadataLog.deleteBeforeSnapshot: the log start moves to the snapshot's end offset, the
        segments wholly before it and the older snapshots are deleted."""
        if snapshot_id.end_offset > self.log.log_start_offset:
            self.log.delete_records_before(snapshot_id.end_offset, now_ms)
        for old in [s for s in self._snapshots if s < snapshot_id]:
            path = self.snapshot_path(old)
            doomed = path.with_name(path.name + DELETED_SUFFIX)
            os.replace(path, doomed)
            doomed.unlink()
            self._snapshots.remove(old)
            log.info("Deleted metadata snapshot %s (retention)", path.name)
        fsync_dir(self.dir)

    def close(self) -> None:
        self.log.close()

