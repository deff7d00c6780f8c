"""Log compaction (Kafka's LogCleaner): keep the latest record of every key.

Applies to logs whose ``cleanup.policy`` contains ``compact``. Per log:

- **Cleanable range.** From the log's first segment up to the *first uncleanable
  offset*: the base offset of the segment holding min(active segment base, high
  watermark, first unstable offset, first segment with a record newer than
  ``min.compaction.lag.ms``). Always whole segments; the active segment is never
  touched. The part from the *cleaner checkpoint* (first uncleaned offset, per log)
  on is *dirty*; below it is *clean*. A log is cleaned when dirty bytes / (clean +
  dirty bytes) >= ``min.cleanable.dirty.ratio``, when its oldest dirty record is
  older than ``max.compaction.lag.ms``, or when a tombstone's delete horizon set by
  an earlier clean has passed.
- **Offset map.** key -> highest offset over the dirty segments (every batch is
  decoded, any codec). Capped at ``log.cleaner.dedupe.buffer.size / 24 * 0.9``
  keys (Kafka's sizing: 16-byte MD5 + 8-byte offset, load factor 0.9); when full,
  cleaning stops at the last fully mapped segment.
- **Rewrite.** Segments from the log start to the end of the dirty range, in groups
  of consecutive segments whose sizes add up to at most ``segment.bytes`` (and
  their indexes to ``segment.index.bytes``, and offsets fit in 32 bits relative to
  the group's base). A record is kept iff it has a key, and its offset is >= the
  map's offset for the key (or the key is not in the map), and, for a tombstone
  (null value), its batch's delete horizon has not passed. Records of aborted
  transactions are removed (and never mapped); transaction markers are removed once
  their transaction has no data left and their delete horizon has passed (KIP-98,
  as Kafka's cleaner). How batches are
  rewritten (byte layouts), the delete horizon, the cleaned files and the swap:
  :mod:`odradek.log.clean_task`.

``cleaner-offset-checkpoint`` (per log directory) holds each log's first uncleaned
offset, in the offset checkpoint format of :mod:`odradek.log.checkpoint`.

Threads: :meth:`LogCleaner.prepare` and :meth:`LogCleaner.commit` run on the
broker's thread; :meth:`CleanTask.run` runs in a worker thread and touches only
descriptors opened for it in ``prepare`` (inactive segments are immutable) and the
new files. ``commit`` discards the task when the log's segments changed meanwhile.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from odradek.fsutil import fsync_dir
from odradek.log.checkpoint import TopicPartition, read_offset_checkpoint, write_offset_checkpoint
from odradek.log.clean_task import (
    CLEANED_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    CleanAborted,
    CleanStats,
    CleanTask,
    SourceSegment,
    complete_swaps,
    has_keyless_record,
)
from odradek.log.config import MAX_LONG
from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, filename_prefix
from odradek.log.txn_index import TXN_INDEX_SUFFIX
from odradek.protocol.records import read_inflate_limit

if TYPE_CHECKING:
    import asyncio

    from odradek.log.log import Log

__all__ = [
    "CLEANER_CHECKPOINT", "CleanStats", "CleanTask", "CleanableRange", "CleanerConfig", "LogCleaner",
    "complete_swaps", "has_keyless_record",
]

log = logging.getLogger("odradek.log.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_FAILURE_BACKOFF_MS = 60_000


# ---------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level cleaner settings (``log.cleaner.*``)."""

    enabled: bool = True
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728

    @property
    def max_map_entries(self) -> int:
        return max(int(self.dedupe_buffer_size // 24 * 0.9), 1)


class CleanableRange(NamedTuple):
    """Segments [0, end_index) are cleanable; [dirty_index, end_index) are dirty."""

    first_dirty: int
    end_offset: int
    dirty_index: int
    end_index: int
    clean_bytes: int
    dirty_bytes: int
    needs_now: bool  # max.compaction.lag.ms exceeded or a delete horizon has passed

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


# ---------------------------------------------------------------------------------- the cleaner


class LogCleaner:
    """Chooses logs to compact, prepares, runs (one worker thread) and installs cleans."""

    def __init__(self, config: CleanerConfig | None = None) -> None:
        self.config = config or CleanerConfig()
        self._checkpoints: dict[tuple[Path, TopicPartition], int] = {}
        self._horizons: dict[tuple[Path, TopicPartition], int] = {}
        self._uncleanable_until: dict[tuple[Path, TopicPartition], int] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._inflight: tuple[CleanTask, concurrent.futures.Future[None]] | None = None
        self.cleaned = 0  # number of cleans installed (for tests and metrics)

    # -------------------------------------------------------------- checkpoints

    @staticmethod
    def _key(lg: Log) -> tuple[Path, TopicPartition]:
        return lg.dir.parent, (lg.topic, lg.partition)

    def load_checkpoints(self, log_dir: Path) -> None:
        for tp, off in read_offset_checkpoint(log_dir / CLEANER_CHECKPOINT).items():
            self._checkpoints[(log_dir, tp)] = off

    def checkpoint_of(self, lg: Log) -> int | None:
        return self._checkpoints.get(self._key(lg))

    def _write_checkpoints(self, log_dir: Path) -> None:
        offsets = {tp: off for (d, tp), off in self._checkpoints.items() if d == log_dir}
        write_offset_checkpoint(log_dir / CLEANER_CHECKPOINT, offsets)

    def forget(self, lg: Log) -> None:
        """The log was deleted: drop its checkpoint (and abort a clean of it)."""
        key = self._key(lg)
        self._horizons.pop(key, None)
        self._uncleanable_until.pop(key, None)
        if self._inflight is not None and self._inflight[0].log is lg:
            self._inflight[0].abort()
        if self._checkpoints.pop(key, None) is not None and key[0].exists():
            self._write_checkpoints(key[0])

    # -------------------------------------------------------------- choosing

    def cleanable_range(self, lg: Log, now_ms: int) -> CleanableRange | None:
        """Kafka's cleanableOffsets + dirty ratio for one log (caller's thread)."""
        segs = lg.segments
        if len(segs) < 2:
            return None
        cfg = lg.config
        bases = [s.base_offset for s in segs]
        key = self._key(lg)
        first_dirty = self._checkpoints.get(key, lg.log_start_offset)
        if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
            first_dirty = lg.log_start_offset
        bound = min(segs[-1].base_offset, lg.high_watermark)
        fuo = lg.first_unstable_offset()
        if fuo is not None:
            bound = min(bound, fuo)
        dirty_index = max(bisect.bisect_right(bases, first_dirty) - 1, 0)
        if cfg.min_compaction_lag_ms > 0:
            for s in segs[dirty_index:-1]:
                if s.base_offset >= bound:
                    break
                if s.largest_timestamp() > now_ms - cfg.min_compaction_lag_ms:
                    bound = min(bound, s.base_offset)
                    break
        end_index = bisect.bisect_right(bases, bound) - 1
        if end_index <= 0:
            return None
        dirty_index = min(dirty_index, end_index)
        if first_dirty > bases[end_index]:
            first_dirty = bases[end_index]
        clean_bytes = sum(s.size for s in segs[:dirty_index])
        dirty_bytes = sum(s.size for s in segs[dirty_index:end_index])
        needs_now = False
        if dirty_bytes and cfg.max_compaction_lag_ms < MAX_LONG:
            first = segs[dirty_index]
            h = first.log.read_header(0)
            ts = h.max_timestamp if h is not None and h.max_timestamp >= 0 else first.largest_timestamp()
            needs_now = now_ms - ts > cfg.max_compaction_lag_ms
        horizon = self._horizons.get(key)
        if horizon is not None and horizon <= now_ms:
            needs_now = True
        return CleanableRange(
            first_dirty, bases[end_index], dirty_index, end_index, clean_bytes, dirty_bytes, needs_now
        )

    def grab_filthiest(self, logs: Iterable[Log], now_ms: int) -> CleanTask | None:
        """Prepare a clean of the log that most needs one (logs past their max
        compaction lag or delete horizon first, then the highest dirty ratio >=
        min.cleanable.dirty.ratio)."""
        best: tuple[tuple[bool, float], Log, CleanableRange] | None = None
        for lg in logs:
            if lg.closed or not lg.config.compact_enabled:
                continue
            key = self._key(lg)
            until = self._uncleanable_until.get(key)
            if until is not None and now_ms < until:
                continue
            rng = self.cleanable_range(lg, now_ms)
            if rng is None:
                continue
            if not rng.needs_now and not (rng.dirty_bytes > 0 and rng.ratio >= lg.config.min_cleanable_dirty_ratio):
                continue
            rank = (rng.needs_now, rng.ratio)
            if best is None or rank > best[0]:
                best = (rank, lg, rng)
        if best is None:
            return None
        return self.prepare(best[1], now_ms, best[2])

    def prepare(self, lg: Log, now_ms: int, rng: CleanableRange | None = None) -> CleanTask | None:
        """Snapshot what a clean of ``lg`` needs (caller's thread): the inactive segments
        to rewrite, a read-only descriptor for each, and the configs. None when there is
        nothing to clean."""
        if rng is None:
            rng = self.cleanable_range(lg, now_ms)
        if rng is None:
            return None
        segs = lg.segments[: rng.end_index]
        if any(s.is_active for s in segs):
            return None
        sources: list[SourceSegment] = []
        try:
            for s in segs:
                fd = os.open(s.log.path, os.O_RDONLY)
                sources.append(
                    SourceSegment(s.base_offset, s.log.path, s.size, fd, _file_size(s.offset_index_path),
                            _file_size(s.time_index_path))
                )
        except OSError:
            for src in sources:
                os.close(src.fd)
            raise
        cfg = lg.config
        return CleanTask(
            log=lg, key=self._key(lg), dir=lg.dir, segments=segs, sources=sources, map_start=rng.dirty_index,
            first_dirty=rng.first_dirty, end_offset=rng.end_offset, now_ms=now_ms,
            delete_retention_ms=cfg.delete_retention_ms, segment_bytes=cfg.segment_bytes,
            segment_index_bytes=cfg.segment_index_bytes, index_interval_bytes=cfg.index_interval_bytes,
            max_map_entries=self.config.max_map_entries, inflate_limit=read_inflate_limit(cfg.max_message_bytes),
            aborted_txns=lg.collect_aborted_transactions(segs[0].base_offset, rng.end_offset),
        )

    # -------------------------------------------------------------- installing

    def commit(self, lg: Log, task: CleanTask, now_ms: int) -> CleanStats | None:
        """Install a finished task (caller's thread): check the log still has exactly the
        task's segments, swap the cleaned files in, advance the cleaner checkpoint.
        Returns None (and deletes the task's files) when the task failed or is stale."""
        if task.error is not None or not task.finished:
            if task.error is not None and not isinstance(task.error, CleanAborted):
                log.error("Cleaning %s failed; will retry later", task.log_name, exc_info=task.error)
                self._uncleanable_until[task.key] = now_ms + _FAILURE_BACKOFF_MS
            task.discard()
            return None
        if lg is not task.log or lg.closed or lg.dir != task.dir or not lg.dir.exists():
            log.info("Discarding the clean of %s: the log was deleted or moved", task.log_name)
            task.discard()
            return None
        current = lg.segments
        n = sum(out.n_segments for out in task.outputs)
        old = task.segments[:n]
        if (
            n == 0
            or len(current) <= n
            or any(a is not b for a, b in zip(current[:n], old, strict=False))
            or any(s.is_active for s in old)
        ):
            log.info("Discarding the clean of %s: its segments changed while it ran", task.log_name)
            task.discard()
            return None
        # .cleaned -> .swap: from here a crash completes the swap on restart
        for out in task.outputs:
            prefix = task.dir / filename_prefix(out.base)
            for suffix in SEGMENT_SUFFIXES:
                os.replace(f"{prefix}{suffix}{CLEANED_SUFFIX}", f"{prefix}{suffix}{SWAP_SUFFIX}")
        fsync_dir(task.dir)
        cfg = lg.config

        def install() -> list[LogSegment]:
            new: list[LogSegment] = []
            for out in task.outputs:
                prefix = task.dir / filename_prefix(out.base)
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
                    os.replace(f"{prefix}{suffix}{SWAP_SUFFIX}", f"{prefix}{suffix}")
                new.append(LogSegment.open(task.dir, out.base, cfg, out.size, active=False, time_ms=now_ms))
            return new

        lg.replace_segments(old, install, now_ms)
        fsync_dir(task.dir)
        stats = task.stats
        stats.segments_before = n
        stats.segments_after = len(task.outputs)
        stats.total_seconds = time.monotonic() - task.started_at
        self._checkpoints[task.key] = task.end_offset
        self._write_checkpoints(task.key[0])
        if stats.min_horizon is not None:
            self._horizons[task.key] = stats.min_horizon
        else:
            self._horizons.pop(task.key, None)
        self._uncleanable_until.pop(task.key, None)
        self.cleaned += 1
        before, after = stats.bytes_read, stats.bytes_written
        log.info(
            "Cleaned log %s up to offset %d (dirty from %d): %d -> %d bytes (%.1f%% smaller) in %d -> %d "
            "segment(s); %d records read, %d kept, %d removed (%d tombstones, %d without key); "
            "%d map entries; %.3f s in the worker, %.3f s in total",
            task.log_name, task.end_offset, task.first_dirty, before, after,
            100.0 * (before - after) / before if before else 0.0, stats.segments_before, stats.segments_after,
            stats.records_read, stats.records_kept, stats.records_removed, stats.tombstones_removed,
            stats.keyless_removed, stats.map_entries, stats.run_seconds, stats.total_seconds,
        )
        return stats

    # -------------------------------------------------------------- driving

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-cleaner")
        return self._pool

    @property
    def busy(self) -> bool:
        return self._inflight is not None

    def maybe_clean(
        self,
        logs: Iterable[Log],
        now_ms: int,
        *,
        wake: Callable[[], object] | None = None,
        is_live: Callable[[Log], bool] | None = None,
    ) -> CleanStats | None:
        """Poll-style driver for the broker's loop thread. Installs a finished clean
        (returning its stats), then, if no clean is running, starts the next one in the
        worker thread. ``wake`` is called from the worker thread when a run ends (e.g.
        ``lambda: loop.call_soon_threadsafe(tick)``) so the install need not wait for
        the next tick. ``is_live(log)`` says whether a log is still served."""
        result: CleanStats | None = None
        if self._inflight is not None:
            task, fut = self._inflight
            if not fut.done():
                return None
            self._inflight = None
            lg = task.log
            if is_live is not None and not is_live(lg):
                task.discard()
            else:
                try:
                    result = self.commit(lg, task, now_ms)
                except Exception:
                    log.exception("Installing the clean of %s failed", task.log_name)
                    self._uncleanable_until[task.key] = now_ms + _FAILURE_BACKOFF_MS
                    task.discard()
        if not self.config.enabled:
            return result
        try:
            nxt = self.grab_filthiest(logs, now_ms)
        except Exception:
            log.exception("Choosing a log to clean failed")
            return result
        if nxt is None:
            return result
        fut = self._executor().submit(nxt.run)
        if wake is not None:
            fut.add_done_callback(lambda _f: _call_quietly(wake))
        self._inflight = (nxt, fut)
        return result

    async def clean_once(
        self, logs: Iterable[Log], loop: asyncio.AbstractEventLoop, clock: Callable[[], int]
    ) -> CleanStats | None:
        """Choose, run in the worker thread (awaiting it), install. Do not mix with
        :meth:`maybe_clean`."""
        task = self.grab_filthiest(logs, clock())
        if task is None:
            return None
        await loop.run_in_executor(self._executor(), task.run)
        return self.commit(task.log, task, clock())

    def clean_now(self, logs: Iterable[Log], now_ms: int) -> CleanStats | None:
        """Synchronous: choose, run in this thread, install (tests, tools)."""
        task = self.grab_filthiest(logs, now_ms)
        if task is None:
            return None
        task.run()
        return self.commit(task.log, task, now_ms)

    def shutdown(self) -> None:
        """Abort a running clean, wait for the worker, delete its files."""
        if self._inflight is not None:
            task, fut = self._inflight
            task.abort()
            with contextlib.suppress(Exception):
                fut.result()
            task.discard()
            self._inflight = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _call_quietly(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:  # e.g. the event loop is already closed
        log.debug("cleaner wake-up callback failed", exc_info=True)
