"""The log of one partition (Kafka's UnifiedLog, local part): an ordered list of
segments, the offsets that bound them, appends, reads, retention and truncation.

On-disk layout: see :mod:`odradek.log.log_loader` (partition directory) and the
modules it points to. Offsets: ``log_start_offset`` <= ``high_watermark`` <=
``log_end_offset``; ``recovery_point`` is the offset below which everything has
been fsynced (segments from the one holding it on are recovered after a crash).

Not thread-safe: the broker calls every method from one thread. Appends and
reads do per-batch work only; payload bytes are written once and never read
back into Python (except the CRC recomputation for LogAppendTime topics).

Transactions (KIP-98; Kafka's UnifiedLog with ProducerStateManager and TransactionIndex).
The API the server side calls:

- Produce of a transactional batch (``is_transactional``): :meth:`append_as_leader` as for
  any batch; the producer's transaction begins at its first transactional batch.
- WriteTxnMarkers: :meth:`append_txn_marker` (producer id, producer epoch, coordinator
  epoch, commit or abort, leader epoch) -> :class:`AppendInfo` of the control batch.
  Raises ``ProducerStateError`` 47 (older producer epoch) or 52
  (TRANSACTION_COORDINATOR_FENCED: older coordinator epoch than the last marker's).
  :meth:`append_as_leader` with ``origin=AppendOrigin.COORDINATOR`` accepts marker batches as well.
- Replication: :meth:`append_as_follower` parses the markers it is given; producer state,
  ongoing transactions and transaction indexes follow.
- Fetch: how far a read goes is its :class:`~odradek.log.fetch_isolation.FetchIsolation` (Kafka's), made
  once from the request by the protocol handler: :meth:`latest_offset` is the offset it stops before (log end
  for a follower, high watermark for read_uncommitted, last stable offset for read_committed), given to
  :meth:`read` as ``max_offset``. :meth:`read_isolated` does both (Kafka's UnifiedLog.read) -> (data, the
  aborted transactions overlapping it for ``TXN_COMMITTED``, as :class:`odradek.log.txn_index.AbortedTxn`
  with ``producer_id`` and ``first_offset``, the two fields of the response). Or, step by step:
  :meth:`read`, then :meth:`collect_aborted_transactions` over [fetch offset, :meth:`fetch_upper_bound` of
  the data). The response's ``last_stable_offset`` field is :attr:`last_stable_offset` (for any isolation).
- ListOffsets: :meth:`latest_offset` of the request's isolation (``FetchIsolation.for_list_offsets``). A
  timestamp lookup (:meth:`fetch_offset_by_timestamp`) must treat a found offset at or past it as not found
  yet, as Kafka's Partition.fetchOffsetForTimestamp does.
- :attr:`last_stable_offset`: min(first unstable offset, high watermark) (Kafka's
  UnifiedLog.lastStableOffset), computed from the producer state on each call, so it
  moves with appends, markers and :meth:`update_high_watermark`. The first unstable
  offset is the first offset of the earliest transaction that is ongoing, or completed
  with its marker not yet below the high watermark.

Aborted transactions are indexed in the ``.txnindex`` of the segment holding their ABORT
marker (:mod:`odradek.log.txn_index`). After an unclean shutdown the producer state is
rebuilt from the newest snapshot at or below the first recovered segment, replaying the
batches from there: that refills the recovered segments' transaction indexes and the
ongoing transactions (the loader resets those indexes). After a clean shutdown the
snapshot at the log end offset and the index files are used as they are.

One concept in one file (over 600 lines): one partition's log (Kafka's UnifiedLog, local part).
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from odradek.fsutil import fsync_dir
from odradek.log.checkpoint import read_partition_metadata, write_partition_metadata
from odradek.log.config import LogConfig
from odradek.log.errors import InconsistentTopicIdError, LogError, OffsetOutOfRangeError
from odradek.log.fetch_isolation import FetchIsolation
from odradek.log.file_records import FetchData, FileRecords
from odradek.log.leader_epoch import LeaderEpochCache
from odradek.log.log_loader import load_segments
from odradek.log.producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerStateEntry,
    ProducerStateManager,
    snapshot_path,
)
from odradek.log.segment import LogSegment
from odradek.log.segment import now_ms as _clock
from odradek.log.txn_index import AbortedTxn
from odradek.log.txn_marker import ControlRecordType, EndTxnMarker, build_marker_batch, parse_marker
from odradek.log.validator import AppendOrigin, ValidationPolicy, validate_and_assign_offsets
from odradek.log.verification_state import VerificationGuard
from odradek.names import is_legal_topic_name
from odradek.protocol.records import LOG_OVERHEAD, BatchHeader, read_inflate_limit

log = logging.getLogger("odradek.log")

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
_HIGH_WATERMARK = FetchIsolation.HIGH_WATERMARK
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED

# a flush that moves the recovery point this far into the active segment past its last producer snapshot
# takes one at the log end (Log._snapshot_for_recovery)
SNAPSHOT_AT_FLUSH_BYTES = 16 << 20

_DIR_NAME = re.compile(r"(.+)-([0-9]{1,10})")


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    record_count: int
    duplicate: bool = False


def parse_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition), split on the last '-'; None unless the topic is a
    legal name and the partition a decimal number (ASCII digits: ``str.isdigit`` accepts others)."""
    m = _DIR_NAME.fullmatch(name)
    if m is None or not is_legal_topic_name(m.group(1)) or int(m.group(2)) > 2**31 - 1:
        return None
    return m.group(1), int(m.group(2))


def dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Log:
    def __init__(
        self,
        dir: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        high_watermark: int,
        topic_id: uuid.UUID | None = None,
        producer_state_loaded: bool = False,
        time_ms: int | None = None,
        rebuild_txn_indexes_from: int | None = None,
        now_ms: Callable[[], int] = _clock,
    ) -> None:
        # the owner's clock (odradek.clock; LogManager passes the broker's): a method given no time reads it
        self.now_ms = now_ms
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_end_offset = log_end_offset
        # tiered storage (KIP-405, Kafka's UnifiedLog): the log starts in the remote tier, below the first
        # local segment; the local log start offset is where the local segments start
        # (highest_offset_in_remote_storage: the last offset copied, set by the remote log manager)
        self.highest_offset_in_remote_storage = -1
        if config.remote_storage_enable:
            self.log_start_offset = min(log_start_offset, log_end_offset)
        else:
            self.log_start_offset = min(max(log_start_offset, segments[0].base_offset), log_end_offset)
        self.local_log_start_offset = min(max(self.log_start_offset, segments[0].base_offset), log_end_offset)
        self.recovery_point = min(recovery_point, log_end_offset)
        self._high_watermark = min(max(high_watermark, self.log_start_offset), log_end_offset)
        self.producer_state = ProducerStateManager(dir, self.name)
        # the base offset of the first segment recovered after an unclean shutdown: the producer
        # state is rebuilt from a snapshot at or below it, refilling the transaction indexes
        self._rebuild_txn_from = rebuild_txn_indexes_from
        self.leader_epoch_cache = LeaderEpochCache(dir)
        # a crash may have cut the log; written by the next flush (an epoch that became leader at
        # the log end and wrote nothing is dropped here on every start: 10,000 fsyncs at 10,000 partitions)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset, write=False)
        self._ps_loaded = False
        self._snapshot_position = 0  # active segment size at its last producer snapshot inside it
        # the owner's recovery-point checkpoint, written at once when a truncation lowers the point
        self.on_recovery_point_lowered: Callable[[], None] | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._last_flush_ms = now_ms() if time_ms is None else time_ms
        self._roll_flush_pending = False
        self._dir_dirty = False
        self._position_cache: tuple[int, int, int] = (-1, -1, -1)  # offset, segment base, position
        self.closed = False
        self._policy: tuple[LogConfig, ValidationPolicy] | None = None  # the config it was derived from
        if producer_state_loaded or rebuild_txn_indexes_from is not None:
            self._ensure_producer_state()

    # ------------------------------------------------------------------ construction

    @property
    def name(self) -> str:
        return dir_name(self.topic, self.partition)

    @classmethod
    def create(
        cls,
        parent: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
        *,
        time_ms: int | None = None,
        now_ms: Callable[[], int] = _clock,
    ) -> Log:
        """Create ``<parent>/<topic>-<partition>`` (or open it if it exists); ``now_ms`` is the log's clock."""
        d = parent / dir_name(topic, partition)
        try:
            os.mkdir(d)  # one system call where exists() + mkdir() took two
            existing = False
        except FileExistsError:
            existing = True
        except FileNotFoundError:  # the log dir itself is missing
            d.mkdir(parents=True, exist_ok=True)
            existing = False
        if existing:
            lg = cls.open(d, config, clean=False, recovery_point=0, time_ms=time_ms, now_ms=now_ms)
            if topic_id is not None and lg.topic_id is None:
                lg.assign_topic_id(topic_id)
            elif topic_id is not None and lg.topic_id != topic_id:
                lg.close_handlers()
                raise InconsistentTopicIdError(
                    f"the log of {topic}-{partition} in {d} belongs to topic id {lg.topic_id}, not {topic_id}")
            return lg
        t = now_ms() if time_ms is None else time_ms
        seg = LogSegment.create(d, 0, config, t, lazy=True)
        # No fsync here (three per partition made creating 1,000 partitions take ~5 s): the
        # topic id is also in the metadata store, and a partition whose directory a crash
        # loses before the next flush held no data yet; the broker recreates it on start.
        if topic_id is not None:
            write_partition_metadata(d, topic_id, sync=False, new=True)
        lg = cls(
            d, topic, partition, config, [seg], log_start_offset=0, log_end_offset=0,
            recovery_point=0, high_watermark=0, topic_id=topic_id, time_ms=t, now_ms=now_ms,
        )
        lg.producer_state.map_end_offset = 0
        lg._ps_loaded = True
        log.info("Created log for partition %s in %s", lg.name, d)
        return lg

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        clean: bool,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        time_ms: int | None = None,
        log_recovery: bool = True,
        now_ms: Callable[[], int] = _clock,
    ) -> Log:
        """Load an existing partition directory (see :mod:`odradek.log.log_loader`). ``log_recovery``
        false: the line about an unclean load is logged at INFO only if bytes were truncated."""
        parsed = parse_dir_name(dir.name)
        if parsed is None:
            raise ValueError(f"{dir.name} is not a <topic>-<partition> directory name")
        topic, partition = parsed
        t = now_ms() if time_ms is None else time_ms
        loaded = load_segments(
            dir, config, clean=clean, recovery_point=recovery_point,
            log_start_offset=log_start_offset, now_ms=t, name=dir.name,
        )
        lg = cls(
            dir, topic, partition, config, loaded.segments,
            log_start_offset=log_start_offset, log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point, high_watermark=high_watermark,
            topic_id=read_partition_metadata(dir), producer_state_loaded=not clean, time_ms=t,
            rebuild_txn_indexes_from=loaded.recovered_from if loaded.recovered_from >= 0 else None, now_ms=now_ms,
        )
        # the epoch checkpoint is written without fsync on assign (KAFKA-15046): what a crash
        # lost of it comes back from the recovered batches' leader epochs
        cache = lg.leader_epoch_cache
        for epoch, start in loaded.recovered_epochs:
            if epoch > cache.latest_epoch:
                cache.assign(epoch, start)
        if not clean:
            # at DEBUG when the caller says so (LogManager: past the first 100 recovered partitions of a
            # directory, unless bytes were truncated; 10,000 INFO lines were ~1 s of a recovery here)
            log.log(
                logging.INFO if loaded.truncated_bytes or log_recovery else logging.DEBUG,
                "Recovered partition %s: %d segment(s) checked from offset %d (recovery point %d), %d bytes "
                "truncated, log end offset %d",
                lg.name, loaded.recovered_segments, loaded.checked_from, recovery_point, loaded.truncated_bytes,
                lg.log_end_offset,
            )
        return lg

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        write_partition_metadata(self.dir, topic_id)
        self.topic_id = topic_id

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.config = config

    # ------------------------------------------------------------------ accessors

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def number_of_segments(self) -> int:
        return len(self._segments)

    def _ensure_producer_state(self) -> ProducerStateManager:
        ps = self.producer_state
        if not self._ps_loaded:
            ps.load(
                self.local_log_start_offset, self.log_end_offset, self._batches_from, self._index_completed,
                max_snapshot_offset=self._rebuild_txn_from,
            )
            self._rebuild_txn_from = None
            self._ps_loaded = True
            ps.on_high_watermark(self._high_watermark)
        return ps

    def _index_completed(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Kafka's LogSegment.updateTxnIndex: an aborted transaction goes into the transaction
        index of the segment holding its marker. Idempotent (a replay after a truncation or a
        restart meets transactions already indexed)."""
        if not completed.is_aborted:
            return
        i = max(bisect.bisect_right(self._bases, completed.last_offset) - 1, 0)
        idx = self._segments[i].txn_index
        if idx.last_offset < completed.last_offset:
            idx.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                  last_stable_offset))

    def _complete_txns(self, ps: ProducerStateManager, completed: list[CompletedTxn]) -> None:
        for c in completed:
            self._index_completed(c, ps.last_stable_offset_after(c))
            ps.complete_txn(c)
        if completed:
            ps.on_high_watermark(self._high_watermark)

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationGuard | None:
        """Kafka's UnifiedLog.maybeStartTransactionVerification: None when the producer has a
        transaction open here (its later batches need no verification), else the guard of its
        verification state entry, created now if none is under way, for the append to carry
        (:mod:`odradek.log.verification_state`)."""
        ps = self._ensure_producer_state()
        if ps.has_ongoing_transaction(producer_id):
            return None
        return ps.maybe_create_verification_state_entry(producer_id, sequence, epoch, now_ms).guard

    def producer_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._ensure_producer_state().producers.get(producer_id)

    def producer_state_entries(self) -> list[ProducerStateEntry]:
        """Every producer the partition knows (DescribeProducers)."""
        return list(self._ensure_producer_state().producers.values())

    def first_unstable_offset(self) -> int | None:
        return self._ensure_producer_state().first_unstable_offset()

    def _batches_from(self, offset: int) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """(header, parsed marker of a control batch) of the batches whose last offset is
        >= ``offset``, in order: only control batches are read beyond their header."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for n, seg in enumerate(self._segments[i:]):
            start = 0
            if n == 0:
                found = seg.translate_offset(offset)
                if found is None:
                    continue
                start = found[0]
            records = seg.log
            for pos, h in records.iter_headers(start):
                if h.is_control:
                    try:
                        marker = parse_marker(records.pread(h.size, pos), h)
                    except LogError as exc:  # it passed its CRC: a writer's bug, not a torn write
                        log.warning("%s: control batch at offset %d ignored: %s", self.name, h.base_offset, exc)
                        marker = None
                    yield h, marker
                else:
                    yield h, None

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches whose last offset is >= ``offset``, in order."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        segs = self._segments[i:]
        for n, seg in enumerate(segs):
            start = 0
            if n == 0:
                found = seg.translate_offset(offset)
                if found is None:
                    continue
                start = found[0]
            for _pos, h in seg.log.iter_headers(start):
                yield h

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = offset
        if self._ps_loaded:
            self.producer_state.on_high_watermark(offset)

    def update_high_watermark(self, offset: int) -> int:
        hw = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.high_watermark = hw
        return hw

    # ------------------------------------------------------------------ transactions

    @property
    def last_stable_offset(self) -> int:
        """Kafka's UnifiedLog.lastStableOffset: min(first unstable offset, high watermark),
        at least the log start offset. Read-committed fetches stop here."""
        hw = self._high_watermark
        fuo = self._ensure_producer_state().first_unstable_offset()
        if fuo is None or fuo >= hw:
            return hw
        return max(fuo, self.log_start_offset)

    def latest_offset(self, isolation: FetchIsolation) -> int:
        """The offset a read with ``isolation`` stops before (Kafka's UnifiedLog.read maxOffsetMetadata, and
        ListOffsets latest, Partition.fetchOffsetForTimestamp's lastFetchableOffset): the log end offset
        (``LOG_END``), the high watermark (``HIGH_WATERMARK``) or the last stable offset (``TXN_COMMITTED``)."""
        if isolation is _HIGH_WATERMARK:
            return self._high_watermark
        if isolation is _TXN_COMMITTED:
            return self.last_stable_offset
        return self.log_end_offset

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Kafka's UnifiedLog.collectAbortedTransactions: the aborted transactions overlapping
        [start_offset, upper_bound_offset) (lastOffset >= start and firstOffset < upper), from
        the transaction indexes of the segment holding ``start_offset`` and the later ones,
        stopping at the first entry whose lastStableOffset reaches the upper bound."""
        out: list[AbortedTxn] = []
        i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        for seg in self._segments[i:]:
            res = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(res.aborted)
            if res.is_complete:
                break
        return out

    def fetch_upper_bound(self, data: FetchData) -> int:
        """Kafka's fetchUpperBoundOffset: the offset of the first batch after the data read (the
        next segment's base offset, or the log end offset, when the data ends its segment)."""
        if not data.regions:
            return data.fetch_offset
        i = bisect.bisect_left(self._bases, data.segment_base_offset)
        if i >= len(self._bases) or self._bases[i] != data.segment_base_offset:
            return self.log_end_offset
        seg = self._segments[i]
        last = data.regions[-1]
        h = seg.log.read_header(last.position + last.length)
        if h is not None:
            return h.base_offset
        return self._bases[i + 1] if i + 1 < len(self._bases) else self.log_end_offset

    def read_isolated(
        self, fetch_offset: int, max_bytes: int, isolation: FetchIsolation, min_one_message: bool
    ) -> tuple[FetchData, list[AbortedTxn]]:
        """Kafka's UnifiedLog.read: :meth:`read` up to :meth:`latest_offset` of ``isolation``, and for
        ``TXN_COMMITTED`` the aborted transactions the data overlaps (none when no data is returned, and
        none for the other isolations). Raises :class:`OffsetOutOfRangeError` as :meth:`read`."""
        data = self.read(fetch_offset, max_bytes, self.latest_offset(isolation), min_one_message)
        if data.size == 0 or isolation is not _TXN_COMMITTED:
            return data, []
        return data, self.collect_aborted_transactions(fetch_offset, self.fetch_upper_bound(data))

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType | bool,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendInfo:
        """WriteTxnMarkers as a leader: append the COMMIT (``result`` True or
        ``ControlRecordType.COMMIT``) or ABORT marker of the producer's transaction (one
        control batch, :mod:`odradek.log.txn_marker`), ending it. Returns the batch's
        :class:`AppendInfo`; raises ``ProducerStateError`` 47 or 52 (see the module docstring)."""
        if isinstance(result, bool):
            result = ControlRecordType.COMMIT if result else ControlRecordType.ABORT
        batch = bytearray(build_marker_batch(producer_id, producer_epoch, coordinator_epoch, result, timestamp=now_ms))
        return self.append_as_leader(batch, None, leader_epoch, now_ms, origin=AppendOrigin.COORDINATOR)

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        headers: list[BatchHeader] | None,
        leader_epoch: int,
        now_ms: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        check_records: bool = True,
        require_verification: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendInfo:
        """Validate batches, assign their offsets and append them.

        Validation and offset assignment are :func:`odradek.log.validator.validate_and_assign_offsets`
        (Kafka's LogValidator); ``headers`` may come from ``records.validate_batches(records)``
        (framing and CRC already checked), else the validator checks them. The buffer is
        rewritten in place when it is a bytearray (or writable memoryview), else copied once.
        Raises ``InvalidRecordError`` (2, 10, 18, 32, 87; KIP-467 record errors) or
        ``ProducerStateError`` (45, 47); a duplicate idempotent batch returns the original
        offsets with ``duplicate=True`` and writes nothing. ``origin`` COORDINATOR
        allows control batches; ``check_records=False``
        (odradek.validate.records) skips the walk of uncompressed records. ``require_verification``
        and ``verification_guard``: the first transactional batch of a transaction needs the guard its
        verification began with (:meth:`maybe_start_transaction_verification`; KIP-890)."""
        cfg = self.config
        policy = self._policy
        if policy is None or policy[0] is not cfg or policy[1].check_records != check_records:
            self._policy = policy = (cfg, ValidationPolicy.of(cfg, check_records=check_records))
        result = validate_and_assign_offsets(
            records, first_offset=self.log_end_offset, leader_epoch=leader_epoch, now_ms=now_ms,
            policy=policy[1], partition=self.name, origin=origin, headers=headers,
        )
        buf, out, last_offset, max_ts, count = result
        total = len(buf)
        offset = last_offset + 1
        log_append_time = cfg.log_append_time
        first_offset = self.log_end_offset

        ps = self._ensure_producer_state()
        from_client = origin is AppendOrigin.CLIENT
        markers = self._markers(buf, out) if not from_client else None
        updates, dup = ps.validate(out, check_duplicates=from_client, markers=markers,
                                   require_verification=require_verification, verification_guard=verification_guard)
        if dup is not None:
            return self._duplicate_info(dup)

        seg = self._segments[-1]
        if seg.should_roll(total, max_ts, last_offset, now_ms):
            self.roll(now_ms)
            seg = self._segments[-1]
        seg.append(buf, out)
        cache = self.leader_epoch_cache
        if leader_epoch > cache.latest_epoch:
            cache.assign(leader_epoch, first_offset)
        self.log_end_offset = offset
        ps.commit(updates, offset)
        if updates.completed:
            self._complete_txns(ps, updates.completed)

        if self.log_end_offset - self.recovery_point >= cfg.flush_messages or (
            now_ms - self._last_flush_ms >= cfg.flush_ms
        ):
            self.flush(time_ms=now_ms)
        return AppendInfo(
            first_offset, last_offset, now_ms if log_append_time else -1, self.log_start_offset, count, False
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, headers: list[BatchHeader], now_ms: int,
        placed: tuple[FileRecords, int] | None = None,
    ) -> int:
        """Append batches fetched from the leader as they are: offsets, leader epochs and
        producer fields untouched (replication). Batches wholly below the log end offset
        are skipped; a batch straddling it, or a gap, raises :class:`LogError` (the caller
        truncates and fetches again). Producer state and the leader epoch cache follow
        the batches. Returns the new log end offset.

        ``placed``: ``records`` are already in the active segment's file at that position (its end,
        from :meth:`splice_target`), written there by the fetcher; they are counted where they lie,
        or, when the append needs them elsewhere (a roll, batches to skip), copied from there and
        cut from the file's tail. The caller cuts whatever the append did not take
        (``FileRecords.discard_past_end``)."""
        view = memoryview(records)
        pos = 0
        start_pos = -1
        kept: list[BatchHeader] = []
        expected = self.log_end_offset
        for h in headers:
            size = h.batch_length + LOG_OVERHEAD
            if start_pos < 0 and h.last_offset < self.log_end_offset:  # only before the first batch kept
                pos += size
                continue
            if h.base_offset != expected:
                raise LogError(
                    f"follower append to {self.name}: batch at {h.base_offset} does not continue the log at {expected}"
                )
            if start_pos < 0:
                start_pos = pos
            kept.append(h)
            expected = h.last_offset + 1
            pos += size
        if not kept:
            return self.log_end_offset
        data = view[start_pos:pos]
        # markers are parsed before anything is written (an undecodable one raises LogError)
        markers: list[EndTxnMarker | None] = []
        at = 0
        for h in kept:
            markers.append(parse_marker(data[at : at + h.size], h) if h.is_control else None)
            at += h.size
        max_ts = max(h.max_timestamp for h in kept)
        roll = self.active_segment.should_roll(len(data), max_ts, expected - 1, now_ms)
        written_at = -1
        if placed is not None:
            fr, at = placed
            if self.active_segment.log is not fr or fr.size != at:
                raise LogError(f"follower append to {self.name}: the log moved past the records written for it")
            if start_pos == 0 and not roll:
                written_at = at
            else:  # needed elsewhere: copied out of the file's tail, which is cut
                data = memoryview(bytes(data))
                fr.discard_past_end()
        if roll:
            self.roll(now_ms)
        # one write, straight from the fetch response (or none: the fetcher wrote them in place)
        self.active_segment.append(data, kept, written_at=written_at)
        cache = self.leader_epoch_cache
        for h in kept:
            if h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)
        ps = self._ensure_producer_state()
        for h, marker in zip(kept, markers, strict=True):
            completed = ps.replay_batch(h, marker)
            if completed is not None:
                self._complete_txns(ps, [completed])
        self.log_end_offset = expected
        return expected

    def segment_file_sizes(self) -> dict[str, int]:
        """Each segment's ``.log`` file name and the bytes of it the log holds (a file may be longer
        for a moment: a follower's splice in flight)."""
        return {seg.log.path.name: seg.log.size for seg in self.segments}

    def splice_target(self) -> tuple[FileRecords, int] | None:
        """Where a follower may write fetched records straight into the file of the active segment
        (its end) before :meth:`append_as_follower` counts them there: ``(file, position)``, or None
        when the file cannot take bytes past its end (preallocated, closed)."""
        fr = self.active_segment.log
        if fr.splice_position < 0 and not fr.exists and not fr.preallocated:
            try:
                fr.fileno()  # a lazily made file: made now, as the append would
            except ValueError:  # closed
                return None
        pos = fr.splice_position
        return None if pos < 0 else (fr, pos)

    @staticmethod
    def _markers(
        buf: bytes | bytearray | memoryview, headers: list[BatchHeader]
    ) -> dict[int, EndTxnMarker | None] | None:
        """base offset -> parsed marker of each control batch of an append (None if none)."""
        out: dict[int, EndTxnMarker | None] | None = None
        pos = 0
        for h in headers:
            if h.is_control:
                if out is None:
                    out = {}
                out[h.base_offset] = parse_marker(memoryview(buf)[pos : pos + h.size], h)
            pos += h.size
        return out

    def _duplicate_info(self, dup: BatchMetadata) -> AppendInfo:
        lat = dup.timestamp if self.config.log_append_time else -1
        count = dup.last_offset - dup.first_offset + 1
        return AppendInfo(dup.first_offset, dup.last_offset, lat, self.log_start_offset, count, True)

    # ------------------------------------------------------------------ roll / flush

    def roll(self, time_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active
        segment is empty and already starts there)."""
        t = self.now_ms() if time_ms is None else time_ms
        active = self.active_segment
        new_base = self.log_end_offset
        if active.size == 0 and active.base_offset == new_base:
            return active
        if new_base <= active.base_offset:
            raise LogError(f"cannot roll {self.name} at {new_base}: active segment starts at {active.base_offset}")
        ps = self._ensure_producer_state()
        active.on_become_inactive()
        seg = LogSegment.create(self.dir, new_base, self.config, t)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        ps.map_end_offset = new_base
        ps.take_snapshot(sync=False)
        self._roll_flush_pending = True
        log.info("Rolled new log segment for %s at offset %d", self.name, new_base)
        return seg

    def flush(self, offset: int | None = None, *, time_ms: int | None = None, fsync: bool = True) -> None:
        """fsync every dirty segment below ``offset`` (default: all) and advance the
        recovery point to it. ``fsync=False``: the caller syncs the whole file system
        afterwards (a clean shutdown), only what is in memory is written out here."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if not fsync:
            self.leader_epoch_cache.sync(fsync=False)
            if target > self.recovery_point:
                self.recovery_point = target
            return
        replaced = self._snapshot_for_recovery() if target == self.log_end_offset else -1
        for seg in self._segments:
            if seg.base_offset >= target and target != self.log_end_offset:
                break
            if seg.dirty:
                seg.flush()
        self.producer_state.sync()
        self.leader_epoch_cache.sync()
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        if target > self.recovery_point:
            self.recovery_point = target
        if replaced >= 0:
            self.producer_state.delete_snapshot(replaced)
        self._last_flush_ms = self.now_ms() if time_ms is None else time_ms

    def _snapshot_for_recovery(self) -> int:
        """A producer snapshot at the log end when the active segment grew SNAPSHOT_AT_FLUSH_BYTES past its
        last one. A recovery after a crash checks the batches from the recovery point on and replays the
        producer state from the newest snapshot at or below it: without this, that replay reads every
        batch header of the active segment (up to segment.bytes), as Kafka's does (it snapshots at rolls
        only). The previous snapshot taken this way inside the segment is returned to be deleted once the
        new one is synced (-1: none)."""
        if not self._ps_loaded:
            return -1  # nothing appended since a clean open: the snapshot at the log end is there
        seg = self.active_segment
        ps = self.producer_state
        previous = ps.last_snapshot_offset
        mark = self._snapshot_position if seg.base_offset < previous <= self.log_end_offset else 0
        if seg.size - mark < SNAPSHOT_AT_FLUSH_BYTES or previous == self.log_end_offset:
            return -1
        ps.map_end_offset = self.log_end_offset
        ps.take_snapshot(sync=False)  # synced with the segments
        self._snapshot_position = seg.size
        self._dir_dirty = True
        return previous if seg.base_offset < previous < self.log_end_offset else -1

    def flush_rolled_segments(self) -> bool:
        """Flush segments rolled since the last call (Kafka does this right after a roll
        on its scheduler; here the log manager's ``flush_dirty`` does)."""
        if not self._roll_flush_pending:
            return False
        self._roll_flush_pending = False
        self.flush(self.active_segment.base_offset)
        return True

    def maybe_flush(self, time_ms: int) -> bool:
        """flush.ms: flush when that long has passed since the last flush."""
        if not self._roll_flush_pending and time_ms - self._last_flush_ms < self.config.flush_ms:
            return False  # the common case, checked for every log each second
        flushed = self.flush_rolled_segments()
        if self.log_end_offset > self.recovery_point and time_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush(time_ms=time_ms)
            return True
        return flushed

    # ------------------------------------------------------------------ read

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool) -> FetchData:
        """File regions (from one segment) starting at the batch containing
        ``fetch_offset`` and ending before the first batch at or beyond ``max_offset``
        (high watermark or last stable offset), capped at ``max_bytes`` (the last batch
        may be cut) unless ``min_one_message`` and the first batch alone is larger."""
        leo = self.log_end_offset
        if fetch_offset < self.local_log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {self.name}: "
                f"[{self.local_log_start_offset}, {leo}]"
            )
        if fetch_offset >= max_offset or fetch_offset == leo:
            return FetchData.empty(fetch_offset)
        bases = self._bases
        segs = self._segments
        i = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
        n = len(segs)
        while i < n:
            seg = segs[i]
            if max_offset >= leo or (i + 1 < n and max_offset >= bases[i + 1]):
                end = None
            else:
                end = self._position_of(seg, max_offset)
            data = seg.read(fetch_offset, max_bytes, end, min_one_message)
            if data is not None:
                return data
            i += 1
        return FetchData.empty(fetch_offset)

    def _position_of(self, seg: LogSegment, offset: int) -> int:
        c_off, c_base, c_pos = self._position_cache
        if c_off == offset and c_base == seg.base_offset:
            return c_pos
        found = seg.translate_offset(offset)
        pos = found[0] if found is not None else seg.size
        self._position_cache = (offset, seg.base_offset, pos)
        return pos

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp).

        -2 earliest -> (log start offset, -1); -1 latest -> (log end offset, -1) (the
        caller clamps to :meth:`latest_offset` of its isolation); -3 max timestamp ->
        (offset of the first record carrying the largest timestamp, it). Otherwise the
        first record with timestamp >= ``timestamp`` at or after the log start offset
        (Kafka's semantics; only the one matching batch is decoded, inflated to at most
        ``read_inflate_limit(max.message.bytes)`` bytes). None when no record qualifies.
        Raises ``InvalidRecordError`` when that batch's records do not decode."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:  # KIP-1005: where the local segments start
            return self.local_log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        found = self.offset_for_timestamp(timestamp)
        return None if found is None else (found[0], found[1])

    def offset_for_timestamp(self, timestamp: int, starting_offset: int | None = None) -> tuple[int, int, int] | None:
        """ListOffsets -3 (max timestamp) or by timestamp over the local segments (Kafka's
        UnifiedLog.fetchOffsetByTimestamp for MAX_TIMESTAMP, and searchOffsetInLocalLog): (offset,
        timestamp, the leader epoch of its batch or -1). -3: the first record carrying the largest
        timestamp; a timestamp: the first record with timestamp >= it at or after ``starting_offset``
        (the log start offset by default; a tiered log's local search after the remote tier found nothing
        starts at the local log start offset). None when no record qualifies; ``InvalidRecordError``
        when the matching batch's records do not decode."""
        limit = read_inflate_limit(self.config.max_message_bytes)
        start = self.log_start_offset if starting_offset is None else starting_offset
        if timestamp == MAX_TIMESTAMP:
            best: LogSegment | None = None
            for seg in self._segments:
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            found = best.translate_offset(best.offset_of_max_timestamp)
            if found is None:
                return None
            pos, h = found
            return best.first_record_with_epoch(pos, h, h.max_timestamp, start, limit) or (
                max(h.base_offset, start), h.max_timestamp, h.partition_leader_epoch if h.partition_leader_epoch >= 0
                else -1,
            )
        for seg in self._segments:
            if seg.max_timestamp >= timestamp:
                res = seg.find_timestamp_and_offset(timestamp, start, limit)
                if res is not None:
                    return res
        return None

    # ------------------------------------------------------------------ retention

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: segments past retention.ms, then beyond retention.bytes (only
        when cleanup.policy has ``delete``), then segments below the log start offset.
        Returns the number of segments deleted (their files go after file.delete.delay.ms)."""
        deleted = 0
        cfg = self.config
        # a tiered log keeps local.retention.* of what is copied already (Kafka's UnifiedLog.deleteOldSegments
        # with remoteLogEnabled); retention.* over the whole log is the remote log manager's
        tiered = cfg.remote_copy_enabled  # remote.log.copy.disable: retention.* again (KIP-950)
        retention_ms = cfg.local_retention_ms_effective if tiered else cfg.retention_ms
        retention_bytes = cfg.local_retention_bytes_effective if tiered else cfg.retention_bytes
        what = "local retention" if tiered else "retention"
        if cfg.delete_enabled:
            if retention_ms >= 0:
                deleted += self._delete_segments(
                    lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms,
                    f"{what} time {retention_ms}ms breach", now_ms,
                )
            if retention_bytes >= 0:
                diff = self.size_in_bytes - retention_bytes

                def size_breached(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(size_breached, f"{what} size {retention_bytes} breach", now_ms)
        deleted += self._delete_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
            "log start offset breach", now_ms,
        )
        return deleted

    def _deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        out: list[LogSegment] = []
        segs = self._segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if self.high_watermark < upper or not predicate(seg, nxt):
                break
            # a tiered log deletes locally only what is in the remote store (Kafka's isSegmentEligibleForDeletion)
            if self.config.remote_copy_enabled and upper - 1 > self.highest_offset_in_remote_storage:
                break
            out.append(seg)
        return out

    def _delete_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str, now_ms: int
    ) -> int:
        doomed = self._deletable_segments(predicate)
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll(now_ms)
        for seg in doomed:
            self._remove_segment(seg, now_ms)
            log.info("Deleting segment %d of %s due to %s", seg.base_offset, self.name, reason)
        first = self._segments[0].base_offset
        if first > self.local_log_start_offset:
            self.local_log_start_offset = first
        if not self.config.remote_copy_enabled and first > self.log_start_offset:  # UnifiedLog.incrementStartOffset
            self.log_start_offset = first
        self.producer_state.delete_snapshots_before(self.local_log_start_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.process_pending_deletes(now_ms)
        return len(doomed)

    def _remove_segment(self, seg: LogSegment, now_ms: int) -> None:
        i = self._segments.index(seg)
        del self._segments[i]
        del self._bases[i]
        seg.rename_for_delete()
        self._dir_dirty = True
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, seg))

    def replace_segments(
        self, old: list[LogSegment], install: Callable[[], list[LogSegment]], now_ms: int
    ) -> list[LogSegment]:
        """Compaction's swap (Kafka's replaceSegments). ``old`` must be consecutive
        inactive segments of this log. They are renamed to ``.deleted`` (descriptors stay
        open, so outstanding reads keep working) and scheduled for deletion after
        file.delete.delay.ms; then ``install()`` puts the new files in place and returns
        the new segments, which take the old ones' place in the list in one step."""
        segs = self._segments
        n = len(old)
        i = next((k for k, s in enumerate(segs) if s is old[0]), -1) if old else -1
        if i < 0 or i + n >= len(segs) or any(a is not b for a, b in zip(segs[i : i + n], old, strict=True)):
            raise LogError(f"cannot replace segments of {self.name}: they are not consecutive segments of the log")
        if any(s.is_active for s in old):
            raise LogError(f"cannot replace the active segment of {self.name}")
        due = now_ms + self.config.file_delete_delay_ms
        for seg in old:
            seg.rename_for_delete()
            self._pending_deletes.append((due, seg))
        new = install()
        self._segments[i : i + n] = new
        self._bases[i : i + n] = [s.base_offset for s in new]
        self._position_cache = (-1, -1, -1)
        self._dir_dirty = True
        return new

    def process_pending_deletes(self, now_ms: int) -> int:
        """Unlink segments whose file.delete.delay.ms has passed; returns how many."""
        if not self._pending_deletes:
            return 0
        keep: list[tuple[int, LogSegment]] = []
        done = 0
        for due, seg in self._pending_deletes:
            if due <= now_ms:
                seg.delete_files()
                done += 1
            else:
                keep.append((due, seg))
        self._pending_deletes = keep
        return done

    @property
    def pending_deletes(self) -> int:
        return len(self._pending_deletes)

    def advance_log_start_offset(self, offset: int) -> bool:
        """Remote retention deleted the remote segments below ``offset`` (Kafka's
        UnifiedLog.maybeIncrementLogStartOffset with SegmentDeletion): the log now starts there. True if it moved."""
        offset = min(offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        if offset > self.local_log_start_offset:
            self.local_log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        log.info("Incremented log start offset of %s to %d due to remote segment deletion", self.name, offset)
        return True

    def delete_records_before(self, offset: int, now_ms: int | None = None) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1: the high
        watermark), at most the high watermark; delete segments wholly below it.
        Returns the new log start offset (the low watermark)."""
        t = self.now_ms() if now_ms is None else now_ms
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.name} before {offset}: high watermark is {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.local_log_start_offset = max(self.local_log_start_offset, offset)
            log.info("Incremented log start offset of %s to %d", self.name, offset)
            self._delete_segments(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                "log start offset breach", t,
            )
            self.producer_state.delete_snapshots_before(self.log_start_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return self.log_start_offset

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, time_ms: int | None = None) -> bool:
        """Remove every batch at or beyond ``offset`` (replication); True if anything changed."""
        t = self.now_ms() if time_ms is None else time_ms
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset")
        if offset >= self.log_end_offset:
            return False
        log.info("Truncating %s to offset %d", self.name, offset)
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, t)
            return True
        for seg in [s for s in self._segments if s.base_offset > offset]:
            self._remove_segment(seg, t)
        self.active_segment.truncate_to(offset, t)
        self._set_end_after_truncation(offset)
        self.process_pending_deletes(t)
        return True

    def truncate_fully_and_start_at(self, offset: int, time_ms: int | None = None) -> None:
        t = self.now_ms() if time_ms is None else time_ms
        for seg in list(self._segments):
            self._remove_segment(seg, t)
        seg = LogSegment.create(self.dir, offset, self.config, t)
        self._segments.append(seg)
        self._bases.append(offset)
        self.log_start_offset = offset
        self.local_log_start_offset = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully()
        self.producer_state.delete_snapshots_after(-1)
        self._set_end_after_truncation(offset)
        self.process_pending_deletes(t)

    def rebuild_from_remote_tier(
        self, local_start: int, log_start: int, epochs: list[tuple[int, int]], producer_snapshot: bytes,
        time_ms: int | None = None,
    ) -> None:
        """A follower of a tiered partition whose fetch offset is below the leader's local log start (Kafka's
        TierStateMachine.buildRemoteLogAuxState): the log restarts empty at ``local_start`` with the leader
        epochs ``(epoch, start offset)`` and the producer state of the remote segment ending just before it
        (its leader-epoch checkpoint and producer snapshot); the log starts at ``log_start`` in the remote
        tier, and everything below ``local_start`` counts as copied."""
        self.truncate_fully_and_start_at(local_start, time_ms)
        for epoch, start in epochs:
            if start < local_start:
                self.leader_epoch_cache.assign(epoch, start)
        self.leader_epoch_cache.flush()
        if producer_snapshot:
            path = snapshot_path(self.dir, local_start)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(producer_snapshot)
            os.replace(tmp, path)
        self.producer_state.truncate_fully()
        self._ps_loaded = False
        self._ensure_producer_state()
        self.log_start_offset = min(max(log_start, 0), local_start)
        self.highest_offset_in_remote_storage = max(self.highest_offset_in_remote_storage, local_start - 1)
        self._dir_dirty = True

    def _set_end_after_truncation(self, offset: int) -> None:
        self.leader_epoch_cache.truncate_from_end(offset)
        self.log_end_offset = offset
        lowered = offset < self.recovery_point
        self.recovery_point = min(self.recovery_point, offset)
        self.high_watermark = min(self.high_watermark, offset)
        self.log_start_offset = min(self.log_start_offset, offset)
        self.local_log_start_offset = min(self.local_log_start_offset, offset)
        self._position_cache = (-1, -1, -1)
        self._dir_dirty = True
        self.producer_state.delete_snapshots_after(offset)
        self._snapshot_position = 0
        self._ps_loaded = False
        self._ensure_producer_state()
        if lowered and self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered()  # before anything is appended past the truncation

    # ------------------------------------------------------------------ lifecycle

    def close(self, *, fsync: bool = True) -> None:
        """Clean close: producer snapshot at the log end offset, flush, trim indexes,
        close files; segments awaiting deletion are deleted now. ``fsync=False``: the
        caller syncs the file system once for every log (LogManager.shutdown)."""
        if self.closed:
            return
        ps = self.producer_state
        if self._ps_loaded and ps.last_snapshot_offset != self.log_end_offset:
            ps.map_end_offset = self.log_end_offset
            ps.take_snapshot(sync=False)
        self.flush(fsync=fsync)
        for seg in self._segments:
            seg.close()
        for _due, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []
        self.closed = True

    def close_handlers(self) -> None:
        """Release descriptors and maps without writing anything (the log is being deleted)."""
        for seg in self._segments:
            seg.close_handlers()
        for _due, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []
        self.closed = True

    def delete(self) -> None:
        """Remove the partition directory and everything in it."""
        self.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)
        log.info("Deleted log for partition %s in %s", self.name, self.dir)

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
            f"end={self.log_end_offset}, segments={len(self._segments)})"
        )

