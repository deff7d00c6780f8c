"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

For every producer id seen, the epoch and the metadata of its last 5 appended
batches (first/last sequence, first/last offset, max timestamp), which is what
duplicate detection and sequence checks need; plus, for transactional
producers, the first offset of the open transaction (for the last stable offset).

Snapshot file ``<20-digit offset>.snapshot`` in the partition directory holds
the state of every batch below ``offset``. Kafka's producer snapshot format,
version 1, big-endian::

    offset  size  field
    0       2     version                  int16   1
    2       4     crc                      uint32  CRC-32C of bytes [6, end)
    6       4     entry count              int32
    10      46*N  entries:
                    producerId               int64
                    epoch                    int16
                    lastSequence             int32
                    lastOffset               int64
                    offsetDelta              int32   lastOffset - firstOffset
                    timestamp                int64   max timestamp of the batch (of the
                                                     transaction marker for a producer
                                                     with no retained batch)
                    coordinatorEpoch         int32
                    currentTxnFirstOffset    int64   -1 if no open transaction

Kafka writes one entry per producer (its last batch). We write one entry per
retained batch, oldest first, so all five survive a restart; a reader that keeps
only the last entry per producer (Kafka's) still reads the file correctly. A
producer with no retained batch is written once with lastSequence -1.

Transactions (KIP-98; Kafka's ProducerStateManager, ProducerAppendInfo, TxnMetadata,
CompletedTxn). A transactional batch of a producer with no open transaction begins one
at its base offset (``current_txn_first_offset`` and an entry of ``ongoing_txns``, kept
ordered by first offset). A marker (control batch, :mod:`odradek.log.txn_marker`) ends it:
validation refuses a marker whose coordinator epoch is older than the producer's
(TRANSACTION_COORDINATOR_FENCED, 52, as Kafka's appendEndTxnMarker), and yields a
:class:`CompletedTxn` (first offset = the transaction's, or the marker's own when none
was open). The log then indexes an aborted one with :meth:`last_stable_offset_after`
and calls :meth:`complete_txn`, which moves it to ``unreplicated_txns`` until the high
watermark passes its marker (:meth:`on_high_watermark`). ``first_unstable_offset`` is the
smallest first offset of both: the log's last stable offset is bounded by it. A snapshot
holds each producer's ``currentTxnFirstOffset``: ``ongoing_txns`` is rebuilt from it on
load (unreplicated transactions are not kept, as in Kafka: after a restart the high
watermark decides).

Expiration (Kafka's ProducerStateManager.removeExpiredProducers, KIP-854): a producer
whose last write (``last_timestamp``: the max timestamp of its last batch or transaction
marker) is ``producer.id.expiration.ms`` old or older and that has no open transaction is
removed from ``producers``. The log manager runs the check every
``producer.id.expiration.check.interval.ms``, so snapshots written after a check do not
hold the producers it removed; expired entries of a snapshot are skipped when it is loaded
(Kafka's loadFromSnapshot). As in Kafka, nothing else removes a producer (a snapshot taken
between its expiry and the next check still holds it). A later write
of an expired producer id is that of a producer with no state: accepted at any sequence,
as Kafka does since 2.5 (KIP-360; before, a sequence other than 0 got UNKNOWN_PRODUCER_ID).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import crc32c as _crc32c

from odradek.fsutil import fsync_file, write_atomic
from odradek.log.errors import (
    CORRUPT_MESSAGE,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    TRANSACTION_COORDINATOR_FENCED,
    ProducerStateError,
)
from odradek.log.txn_marker import EndTxnMarker
from odradek.log.verification_state import VerificationGuard, VerificationStateEntry
from odradek.protocol.records import BatchHeader

log = logging.getLogger("odradek.log")

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
SNAPSHOTS_TO_KEEP = 2
NO_SEQUENCE = -1
NO_EPOCH = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(Exception):
    pass


class TxnMetadata:
    """An ongoing (or completed but not yet replicated) transaction (Kafka's TxnMetadata)."""

    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int = -1) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset  # the marker's offset once completed, else -1

    def __repr__(self) -> str:
        return f"TxnMetadata(pid={self.producer_id}, first={self.first_offset}, last={self.last_offset})"


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


class BatchMetadata:
    __slots__ = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")

    def __init__(self, first_seq: int, last_seq: int, first_offset: int, last_offset: int, timestamp: int) -> None:
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (
            f"BatchMetadata(seq={self.first_seq}..{self.last_seq}, "
            f"offsets={self.first_offset}..{self.last_offset}, ts={self.timestamp})"
        )


class ProducerStateEntry:
    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch", "current_txn_first_offset", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1
        self.last_timestamp = NO_TIMESTAMP  # of the last batch or transaction marker (expiration)

    def copy(self) -> ProducerStateEntry:
        e = ProducerStateEntry(self.producer_id, self.epoch)
        e.batches.extend(self.batches)
        e.coordinator_epoch = self.coordinator_epoch
        e.current_txn_first_offset = self.current_txn_first_offset
        e.last_timestamp = self.last_timestamp
        return e

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        first, last = h.base_sequence, h.last_sequence
        for b in self.batches:
            if b.first_seq == first and b.last_seq == last:
                return b
        return None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add(self, h: BatchHeader) -> bool:
        """Record a data batch; True when it begins a transaction."""
        self.set_epoch(h.producer_epoch)
        last_offset = h.base_offset + h.last_offset_delta
        self.batches.append(BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset, last_offset, h.max_timestamp))
        self.last_timestamp = h.max_timestamp
        if h.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = h.base_offset
            return True
        return False

    def end_transaction(self, h: BatchHeader, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """A transaction marker (control batch) of this producer: the transaction it
        completes (Kafka's appendEndTxnMarker: first offset = the marker's own when no
        transaction was open), None for a control batch that is no marker."""
        self.set_epoch(h.producer_epoch)
        first = self.current_txn_first_offset
        self.current_txn_first_offset = -1
        self.last_timestamp = h.max_timestamp
        if marker is None:
            return None
        self.coordinator_epoch = marker.coordinator_epoch
        return CompletedTxn(self.producer_id, first if first >= 0 else h.base_offset, h.base_offset, marker.is_abort)

    def is_expired(self, now_ms: int, expiration_ms: int) -> bool:
        """Kafka's ProducerStateManager.isProducerExpired: idle long enough, no open transaction."""
        return self.current_txn_first_offset < 0 and now_ms - self.last_timestamp >= expiration_ms


class ProducerUpdates(dict[int, ProducerStateEntry]):
    """What :meth:`ProducerStateManager.validate` found: the updated entries by producer id,
    the transactions begun (``started``) and ended (``completed``) by the append."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[TxnMetadata] = []
        self.completed: list[CompletedTxn] = []
        self.transactional: set[int] = set()  # producers with a transactional batch or marker in the append


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """``producers`` reflects every batch with offset < ``map_end_offset``."""

    def __init__(self, dir: Path, name: str = "", expiration_ms: int | None = None) -> None:
        self.dir = dir
        self.name = name or dir.name
        # producer.id.expiration.ms, set by the log manager (None: producers never expire)
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = -1
        self._unsynced: list[Path] = []
        # first offset -> transaction, in first-offset order (Kafka's ongoingTxns TreeMap)
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        # completed transactions whose marker is not below the high watermark yet
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        # verifications under way (KIP-890 part 1, odradek.log.verification_state)
        self.verification_states: dict[int, VerificationStateEntry] = {}

    # ------------------------------------------------------------------ appends

    def validate(
        self,
        headers: list[BatchHeader],
        *,
        check_duplicates: bool = True,
        markers: Mapping[int, EndTxnMarker | None] | None = None,
        require_verification: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> tuple[ProducerUpdates, BatchMetadata | None]:
        """Check the idempotent and transactional batches of one append (offsets already
        assigned); ``markers`` maps the base offset of each control batch to its parsed
        marker.

        Returns the updated entries (with the transactions begun and completed) to
        :meth:`commit` after the write, or a duplicate's metadata (the append must then
        not be written). Raises :class:`ProducerStateError` with 47 (older epoch), 45
        (sequence gap; new epoch not starting at 0), 48 (INVALID_TXN_STATE: a
        non-transactional batch of a producer whose transaction is open, as Kafka's
        ProducerAppendInfo) or 52 (a marker from an older coordinator epoch). Like Kafka 3.x, a producer with no state accepts any first
        sequence (its state may have been removed by retention).

        ``require_verification`` (transaction.partition.verification.enable, KIP-890): a
        transactional batch of a producer with no open transaction is refused with 48 unless
        ``verification_guard`` is the guard of the producer's verification state entry (see
        :mod:`odradek.log.verification_state`); while an entry exists, a sequence above its
        lowest is refused with 45 (Kafka's ProducerAppendInfo.checkSequence)."""
        for h in headers:
            if h.producer_id >= 0:
                break
        else:  # no idempotent or transactional batch (the common plain produce): nothing to check
            return ProducerUpdates(), None
        updates = ProducerUpdates()
        producers = self.producers
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            current = producers.get(pid)
            if check_duplicates and current is not None and not h.is_control:
                dup = current.find_duplicate(h)
                if dup is not None:
                    return updates, dup
            entry = updates.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updates[pid] = entry
            epoch = h.producer_epoch
            if epoch < entry.epoch:
                raise ProducerStateError(
                    INVALID_PRODUCER_EPOCH,
                    f"epoch {epoch} of producer {pid} is older than the current epoch {entry.epoch}",
                )
            if h.is_control:
                if markers is None or h.base_offset not in markers:
                    raise ProducerStateError(CORRUPT_MESSAGE, f"control batch at {h.base_offset} was not parsed")
                marker = markers[h.base_offset]
                if marker is not None and marker.coordinator_epoch < entry.coordinator_epoch:
                    raise ProducerStateError(
                        TRANSACTION_COORDINATOR_FENCED,
                        f"marker of producer {pid} from coordinator epoch {marker.coordinator_epoch}, older than "
                        f"the last seen coordinator epoch {entry.coordinator_epoch}",
                    )
                completed = entry.end_transaction(h, marker)
                if completed is not None:
                    updates.completed.append(completed)
                updates.transactional.add(pid)
                continue
            first_seq = h.base_sequence
            if h.is_transactional:
                updates.transactional.add(pid)
                if require_verification and entry.current_txn_first_offset < 0:
                    state = self.verification_states.get(pid)
                    if state is None or state.guard is not verification_guard:
                        raise ProducerStateError(
                            INVALID_TXN_STATE,
                            f"record of producer {pid} at offset {h.base_offset} was not part of an ongoing "
                            "transaction (its verification did not hold up to the append)",
                        )
            if check_duplicates and (vstate := self.verification_states.get(pid)) is not None \
                    and first_seq > vstate.lowest_sequence:
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"out of order sequence {first_seq} from producer {pid}: sequence {vstate.lowest_sequence} "
                    "waits for its verification",
                )
            if not check_duplicates:
                pass  # a coordinator's own batch (TxnOffsetCommit): no sequences, as Kafka checks them for clients only
            elif epoch != entry.epoch:
                if first_seq != 0 and entry.epoch != NO_EPOCH:
                    raise ProducerStateError(
                        OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid} bumped its epoch to {epoch} with sequence {first_seq}, expected 0",
                    )
            elif entry.epoch != NO_EPOCH and not in_sequence(entry.last_seq, first_seq):
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"out of order sequence {first_seq} from producer {pid} (epoch {epoch}), "
                    f"last sequence {entry.last_seq}",
                )
            if not h.is_transactional and entry.current_txn_first_offset >= 0:
                raise ProducerStateError(
                    INVALID_TXN_STATE,
                    f"expected a transactional write from producer {pid} at offset {h.base_offset}: "
                    f"its transaction from offset {entry.current_txn_first_offset} is open",
                )
            if entry.add(h):
                updates.started.append(TxnMetadata(pid, h.base_offset))
        return updates, None

    def commit(self, updates: dict[int, ProducerStateEntry], end_offset: int) -> None:
        """Apply what :meth:`validate` returned once the batches are written. Completed
        transactions are left to the caller (:meth:`last_stable_offset_after`, then
        :meth:`complete_txn`, in order)."""
        if updates:
            self.producers.update(updates)
        if isinstance(updates, ProducerUpdates):
            for txn in updates.started:
                self.ongoing_txns[txn.first_offset] = txn
            if updates.transactional and self.verification_states:
                # the transaction has its first offset here now, or it has ended: a verification that
                # began before can no longer be used (Kafka's UnifiedLog.updateProducers)
                for pid in updates.transactional:
                    self.verification_states.pop(pid, None)
        self.map_end_offset = end_offset

    def replay_batch(self, h: BatchHeader, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """Apply one batch read back from the log or fetched from the leader (no checks,
        as Kafka for replication and recovery); returns the transaction a marker
        completes (the caller indexes it and calls :meth:`complete_txn`)."""
        completed = None
        if h.producer_id >= 0:
            if h.is_transactional and self.verification_states:
                self.verification_states.pop(h.producer_id, None)
            entry = self.producers.get(h.producer_id)
            if entry is None:
                entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id, h.producer_epoch)
            if h.is_control:
                completed = entry.end_transaction(h, marker)
            elif entry.add(h):
                self.ongoing_txns[h.base_offset] = TxnMetadata(h.producer_id, h.base_offset)
        self.map_end_offset = h.base_offset + h.last_offset_delta + 1
        return completed

    def replay(
        self,
        batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]],
        on_complete: Callable[[CompletedTxn, int], None] | None = None,
    ) -> None:
        """:meth:`replay_batch` for each (header, marker of a control batch); each completed
        transaction is handed to ``on_complete`` with its last stable offset (to index an
        aborted one), then completed."""
        for h, marker in batches:
            completed = self.replay_batch(h, marker)
            if completed is not None:
                if on_complete is not None:
                    on_complete(completed, self.last_stable_offset_after(completed))
                self.complete_txn(completed)

    # ------------------------------------------------------------------ transactions

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's ProducerStateManager.lastStableOffset(completedTxn): the first offset of the
        earliest ongoing transaction of another producer, else the marker's offset + 1 (the
        ``lastStableOffset`` of the transaction index entry)."""
        for txn in self.ongoing_txns.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Kafka's completeTxn: the transaction leaves ``ongoing_txns`` and waits in
        ``unreplicated_txns`` for the high watermark to pass its marker."""
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            txn = TxnMetadata(completed.producer_id, completed.first_offset)
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[txn.first_offset] = txn

    def on_high_watermark(self, high_watermark: int) -> None:
        """Kafka's onHighWatermarkUpdated: forget completed transactions whose marker is
        below the high watermark."""
        unrep = self.unreplicated_txns
        if unrep:
            for first in [f for f, t in unrep.items() if t.last_offset < high_watermark]:
                del unrep[first]

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an ongoing or unreplicated transaction, if any (Kafka's
        firstUnstableOffset)."""
        out: int | None = None
        if self.ongoing_txns:
            out = next(iter(self.ongoing_txns))
        if self.unreplicated_txns:
            u = min(self.unreplicated_txns)
            out = u if out is None else min(out, u)
        return out

    def first_undecided_offset(self) -> int | None:
        """Smallest first offset of an ongoing transaction (Kafka's firstUndecidedOffset)."""
        return next(iter(self.ongoing_txns)) if self.ongoing_txns else None

    def _rebuild_ongoing(self) -> None:
        firsts = sorted(
            (e.current_txn_first_offset, pid) for pid, e in self.producers.items() if e.current_txn_first_offset >= 0
        )
        self.ongoing_txns = {first: TxnMetadata(pid, first) for first, pid in firsts}
        self.unreplicated_txns = {}

    def truncate_fully(self) -> None:
        """Forget every producer and transaction (the log restarts at a new offset)."""
        self.producers.clear()
        self.ongoing_txns = {}
        self.unreplicated_txns = {}

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget the producers expired at ``now_ms`` (see the module docstring); returns
        how many were removed."""
        if self.expiration_ms is None:
            return 0
        expiration = self.expiration_ms
        expired = [pid for pid, e in self.producers.items() if e.is_expired(now_ms, expiration)]
        for pid in expired:
            del self.producers[pid]
        states = self.verification_states
        for pid in [pid for pid, v in states.items() if now_ms - v.timestamp_ms >= expiration]:
            del states[pid]  # a verification never answered (Kafka's removeExpiredProducers)
        return len(expired)

    # ------------------------------------------------------------------ verification (KIP-890)

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        """The producer's verification state entry, created with a new guard when there is none;
        its lowest sequence follows ``sequence`` and ``epoch`` (Kafka's
        maybeCreateVerificationStateEntry)."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    # ------------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    out.append(int(stem))
        out.sort()
        return out

    def encode_snapshot(self) -> bytes:
        body = bytearray()
        count = 0
        pack = _ENTRY.pack
        for pid, e in self.producers.items():
            if not e.batches:
                body += pack(
                    pid, e.epoch, NO_SEQUENCE, -1, 0, e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset
                )
                count += 1
            for b in e.batches:
                body += pack(
                    pid,
                    e.epoch,
                    b.last_seq,
                    b.last_offset,
                    b.last_offset - b.first_offset,
                    b.timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
                count += 1
        after_crc = count.to_bytes(4, "big", signed=True) + bytes(body)
        return _HEAD.pack(SNAPSHOT_VERSION, _crc32c.crc32c(after_crc), count) + bytes(body)

    @staticmethod
    def decode_snapshot(data: bytes) -> dict[int, ProducerStateEntry]:
        if len(data) < _HEAD.size:
            raise CorruptSnapshotError("snapshot too short")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        if _crc32c.crc32c(memoryview(data)[6:]) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
            raise CorruptSnapshotError("snapshot length does not match its entry count")
        producers: dict[int, ProducerStateEntry] = {}
        for i in range(count):
            pid, epoch, last_seq, last_off, delta, ts, coord_epoch, txn_first = _ENTRY.unpack_from(
                data, _HEAD.size + i * _ENTRY.size
            )
            e = producers.get(pid)
            if e is None:
                e = producers[pid] = ProducerStateEntry(pid, epoch)
            e.set_epoch(epoch)
            e.coordinator_epoch = coord_epoch
            e.current_txn_first_offset = txn_first
            e.last_timestamp = ts
            if last_seq >= 0:
                first_seq = (last_seq - delta) % (INT32_MAX + 1)
                e.batches.append(BatchMetadata(first_seq, last_seq, last_off - delta, last_off, ts))
        return producers

    def take_snapshot(self, *, sync: bool = True) -> Path:
        """Write the state at ``map_end_offset`` (replacing a snapshot at that offset)."""
        path = snapshot_path(self.dir, self.map_end_offset)
        write_atomic(path, self.encode_snapshot(), sync=sync)
        self.last_snapshot_offset = self.map_end_offset
        if not sync:
            self._unsynced.append(path)
        return path

    def sync(self) -> None:
        """fsync snapshots written with ``sync=False`` (the caller fsyncs the directory)."""
        for path in self._unsynced:
            with contextlib.suppress(FileNotFoundError):
                fsync_file(path)
        self._unsynced = []

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        read_batches: Callable[[int], Iterable[tuple[BatchHeader, EndTxnMarker | None]]],
        on_complete: Callable[[CompletedTxn, int], None] | None = None,
        *,
        max_snapshot_offset: int | None = None,
    ) -> None:
        """Latest valid snapshot <= ``log_end_offset`` (later ones are deleted) and <=
        ``max_snapshot_offset`` (later ones are passed over: after an unclean shutdown the
        batches of the recovered segments are replayed to refill their transaction indexes), then
        the batches after it up to the log end (``read_batches(from_offset)``: headers with
        the parsed marker of each control batch), see :meth:`replay`."""
        self.producers = {}
        self.ongoing_txns = {}
        self.unreplicated_txns = {}
        start = log_start_offset
        self.last_snapshot_offset = -1
        for off in reversed(self.snapshot_offsets()):
            path = snapshot_path(self.dir, off)
            if off > log_end_offset:
                self._unlink(path)
                continue
            if max_snapshot_offset is not None and off > max_snapshot_offset:
                # passed over, not deleted: its state is rebuilt by the replay, and it still holds
                # (the log up to it survived the recovery). Deleting it cost an unlink per partition
                # after a crash: two thirds of a kill -9 restart of 10,000 partitions
                continue
            try:
                self.producers = self.decode_snapshot(path.read_bytes())
                self.remove_expired_producers(_wall_clock_ms())  # as Kafka's loadFromSnapshot
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("Deleting corrupt producer snapshot %s: %s", path, exc)
                self._unlink(path)
                continue
            start = off
            self.last_snapshot_offset = off
            break
        self._rebuild_ongoing()
        self.map_end_offset = start
        if start < log_end_offset:
            self.replay(read_batches(start), on_complete)
        self.map_end_offset = log_end_offset

    def delete_snapshots_before(self, offset: int, keep: int = SNAPSHOTS_TO_KEEP) -> None:
        """Delete snapshots below ``offset`` except the ``keep`` newest snapshots."""
        offsets = self.snapshot_offsets()
        protected = set(offsets[-keep:]) if keep > 0 else set()
        for off in offsets:
            if off < offset and off not in protected:
                self._unlink(snapshot_path(self.dir, off))

    def delete_snapshot(self, offset: int) -> None:
        self._unlink(snapshot_path(self.dir, offset))

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete snapshots above ``offset`` (after a truncation)."""
        for off in self.snapshot_offsets():
            if off > offset:
                self._unlink(snapshot_path(self.dir, off))

    @staticmethod
    def _unlink(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
