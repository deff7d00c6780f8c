"""All partition logs of a broker across its log directories (Kafka's LogManager).

Per log directory (``log.dirs`` entry)::

    <topic>-<partition>/                      one partition (odradek.log.log_loader)
    <topic>-<partition>.<uuid hex>-delete/    a deleted partition awaiting removal
    <topic>-<partition>.<uuid hex>-future/    a partition being moved here (odradek.log.dir_move)
    <topic>-<partition>.<uuid hex>-stray/     a log the metadata does not account for (KIP-858):
                                              kept as it is, never loaded, never deleted
    recovery-point-offset-checkpoint          offset checkpoint files
    log-start-offset-checkpoint                 (odradek.log.checkpoint)
    replication-offset-checkpoint               (high watermarks)
    cleaner-offset-checkpoint                   (first uncleaned offsets, odradek.log.cleaner)
    .kafka_cleanshutdown                      empty file: present only after a clean shutdown
    meta.properties                           the broker's, not touched here

Startup reads the checkpoints, loads every partition directory (without any
scan after a clean shutdown, recovering from the recovery point otherwise),
then removes the clean-shutdown marker; shutdown closes every log (flush,
producer snapshot, trimmed indexes), writes the checkpoints and the marker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.fsutil import fsync_dir, write_atomic
from odradek.log import dir_move
from odradek.log.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from odradek.log.cleaner import CleanerConfig, CleanStats, LogCleaner
from odradek.log.config import LogConfig
from odradek.log.errors import InconsistentTopicIdError, LogError
from odradek.log.log import Log, dir_name, parse_dir_name
from odradek.log.segment import now_ms as _clock

if TYPE_CHECKING:
    import asyncio

# an unclean start logs this many partitions' recovery lines at INFO per directory, the rest at DEBUG
# (those that lost bytes always at INFO); the directory's total follows
RECOVERY_LINES_AT_INFO = 100

log = logging.getLogger("odradek.log")

DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
_SKIPPED_DIR_SUFFIXES = ("-future", STRAY_DIR_SUFFIX)


def deleted_logs_open_files_limit() -> int:
    """How many segment files logs awaiting deletion may keep open: an eighth of the process's
    descriptor limit (RLIMIT_NOFILE), at least 64."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(64, soft // 8)


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        config_for_topic: Callable[[str], LogConfig],
        cleaner_config: CleanerConfig | None = None,
        now_ms: Callable[[], int] = _clock,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.now_ms = now_ms  # the broker's clock (odradek.clock), handed to every log
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config_for_topic = config_for_topic
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        self.offline_partitions: set[TopicPartition] = set()
        self._pending_dir_deletes: list[tuple[int, Log, Path]] = []
        # a deleted log keeps its files open for file.delete.delay.ms so that fetches still sending
        # from it finish (Kafka's LogManager.asyncDelete); these are the ones still open, oldest
        # first, with their segment counts. Past ``deleted_logs_open_files`` the oldest are closed
        # at once (a connection still sending from one is closed and its client fetches again), so
        # deleting topics over and over cannot exhaust the process's descriptors.
        self._deleted_open: dict[int, tuple[Log, int]] = {}  # id(log) -> (log, segment files)
        self._deleted_open_files = 0
        self.deleted_logs_open_files = deleted_logs_open_files_limit()
        self.cleaner = LogCleaner(cleaner_config)
        self.started = False
        self._futures: dict[TopicPartition, dir_move.FutureLog] = {}

    # ------------------------------------------------------------------ startup

    def startup(self) -> None:
        resumed = self._recover_moves()
        for d in self.log_dirs:
            self._load_dir(d)
        self.started = True
        self._resume_moves(resumed)

    def _load_dir(self, d: Path) -> None:
        start = time.monotonic()
        d.mkdir(parents=True, exist_ok=True)
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner.load_checkpoints(d)
        loaded = 0
        with os.scandir(d) as it:
            entries = [e for e in it if e.is_dir()]
        for entry in entries:
            name = entry.name
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(entry.path, ignore_errors=True)
                log.info("Removed %s left over from a log deletion", entry.path)
                continue
            if name.endswith(_SKIPPED_DIR_SUFFIXES):
                continue
            tp = parse_dir_name(name)
            if tp is None:
                # Kafka's LogManager takes the whole log dir offline here; one stray directory should not
                # cost every partition in it, so it is named, left untouched and not served
                log.warning("Skipping %r in %s: not a <topic>-<partition> directory", name, d)
                continue
            if tp in self._logs:
                raise LogError(f"duplicate log directories for {name}: {self._dir_of[tp]} and {d}")
            lg = Log.open(
                Path(entry.path),
                self.config_for_topic(tp[0]),
                clean=clean,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                log_recovery=loaded < RECOVERY_LINES_AT_INFO,
                now_ms=self.now_ms,
            )
            self._add(tp, lg, d)
            loaded += 1
        if clean:
            marker.unlink()
            fsync_dir(d)
        log.info(
            "Loaded %d log(s) from %s after %s shutdown in %.0f ms",
            loaded, d, "a clean" if clean else "an unclean", (time.monotonic() - start) * 1000,
        )

    # ------------------------------------------------------------------ lookup / create / delete

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def mark_dir_offline(self, d: Path) -> list[TopicPartition]:
        """A log dir failed (an I/O error): its logs are dropped from service (their files
        are left as they are) and no new log goes there. Returns the partitions it held."""
        d = Path(d)
        if d in self.offline_dirs or d not in self.log_dirs:
            return []
        self.offline_dirs.add(d)
        gone = [tp for tp, ld in self._dir_of.items() if ld == d]
        for tp in gone:
            lg = self._logs.pop(tp)
            del self._dir_of[tp]
            with contextlib.suppress(OSError):
                lg.close_handlers()
            self.offline_partitions.add(tp)
        log.error("log dir %s is offline (%d partitions): %s", d, len(gone),
                  "no log dir left" if self.offline_dirs >= set(self.log_dirs) else "serving from the others")
        return gone

    def dir_containing(self, path: Path) -> Path | None:
        for d in self.log_dirs:
            if Path(path) == d or d in Path(path).parents:
                return d
        return None

    def get_or_create_log(self, topic: str, partition: int, topic_id: uuid.UUID | None = None) -> Log:
        tp = (topic, partition)
        lg = self._logs.get(tp)
        if lg is not None:
            if topic_id is not None and lg.topic_id is None:
                lg.assign_topic_id(topic_id)
            elif topic_id is not None and lg.topic_id != topic_id:
                # Kafka's LogManager.getOrCreateLog: never serve one topic's log as another's
                raise InconsistentTopicIdError(
                    f"the log of {topic}-{partition} in {lg.dir} belongs to topic id {lg.topic_id}, not {topic_id}")
            return lg
        if tp in self.offline_partitions:
            raise OSError(f"{topic}-{partition} is in an offline log dir")
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise OSError("every log dir is offline")
        if len(online) == 1:
            parent = online[0]
        else:  # the log dir holding the fewest partitions (Kafka's default placement)
            counts = Counter(self._dir_of.values())
            parent = min(online, key=lambda d: counts[d])
        lg = Log.create(parent, topic, partition, self.config_for_topic(topic), topic_id, now_ms=self.now_ms)
        self._add(tp, lg, parent)
        return lg

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Rename ``<topic>-<partition>`` to ``<topic>-<partition>.<uuid>-delete`` and
        remove it after file.delete.delay.ms (descriptors stay open until then)."""
        tp = (topic, partition)
        self.cancel_move(topic, partition)
        lg = self._logs.pop(tp, None)
        if lg is None:
            return False
        parent = self._dir_of.pop(tp)
        self.cleaner.forget(lg)
        target = parent / f"{dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(lg.dir, target)
        fsync_dir(parent)
        t = self.now_ms() if now_ms is None else now_ms
        self._schedule_dir_delete(t + lg.config.file_delete_delay_ms, lg, target)
        log.info("Log for partition %s is renamed to %s and scheduled for deletion", lg.name, target)
        self._process_dir_deletes(t)
        return True

    def _schedule_dir_delete(self, due: int, lg: Log, path: Path) -> None:
        self._pending_dir_deletes.append((due, lg, path))
        files = lg.number_of_segments
        self._deleted_open[id(lg)] = (lg, files)
        self._deleted_open_files += files
        closed = 0
        while self._deleted_open_files > self.deleted_logs_open_files and len(self._deleted_open) > 1:
            old, n = self._deleted_open.pop(next(iter(self._deleted_open)))
            self._deleted_open_files -= n
            old.close_handlers()
            closed += 1
        if closed:
            log.warning("%d deleted logs closed before file.delete.delay.ms: logs awaiting deletion held more "
                        "than %d open segment files", closed, self.deleted_logs_open_files)

    def mark_stray(self, topic: str, partition: int, reason: str) -> Path | None:
        """A log the metadata does not account for (Kafka's stray log, KIP-858): closed, renamed
        ``<topic>-<partition>.<uuid hex>-stray`` and left on disk (not loaded again, not served,
        never deleted: the operator decides). Returns the new path."""
        tp = (topic, partition)
        self.cancel_move(topic, partition)
        lg = self._logs.pop(tp, None)
        if lg is None:
            return None
        parent = self._dir_of.pop(tp)
        self.cleaner.forget(lg)
        lg.close()
        target = parent / f"{dir_name(topic, partition)}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}"
        os.rename(lg.dir, target)
        fsync_dir(parent)
        log.warning("Found stray log %s (%s): renamed to %s and kept; it is not served and not deleted",
                    lg.name, reason, target)
        return target

    def _process_dir_deletes(self, now_ms: int, *, force: bool = False) -> int:
        keep: list[tuple[int, Log, Path]] = []
        done = 0
        for due, lg, path in self._pending_dir_deletes:
            if force or due <= now_ms:
                lg.close_handlers()
                entry = self._deleted_open.pop(id(lg), None)
                if entry is not None:
                    self._deleted_open_files -= entry[1]
                shutil.rmtree(path, ignore_errors=True)
                log.info("Deleted log for partition %s (%s)", lg.name, path)
                done += 1
            else:
                keep.append((due, lg, path))
        self._pending_dir_deletes = keep
        return done

    # ------------------------------------------------------------------ periodic work

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention for every log, then delayed file deletions; returns segments deleted."""
        t = self.now_ms() if now_ms is None else now_ms
        deleted = 0
        for lg in list(self._logs.values()):
            deleted += lg.delete_old_segments(t)
            lg.process_pending_deletes(t)
        self._process_dir_deletes(t)
        return deleted

    def flush_dirty(self, now_ms: int | None = None, on_error: Callable[[Path, OSError], None] | None = None) -> int:
        """Flush segments rolled since the last call, and logs whose flush.ms has
        passed; returns how many logs were flushed. Call it about once a second. With ``on_error``, a
        log that cannot be flushed (its producer snapshot or leader epoch checkpoint refused by a full
        disk) is handed to it and the others are still flushed (Kafka's LogManager.flushDirtyLogs: the
        IOException takes the log's dir offline); without, the error is raised."""
        t = self.now_ms() if now_ms is None else now_ms
        flushed = 0
        for lg in list(self._logs.values()):
            try:
                flushed += lg.maybe_flush(t)
            except OSError as e:
                if on_error is None:
                    raise
                on_error(lg.dir, e)
        return flushed

    def maybe_clean(self, now_ms: int | None = None, wake: Callable[[], object] | None = None) -> CleanStats | None:
        """Log compaction, poll style, for the broker's loop thread (see
        :meth:`odradek.log.cleaner.LogCleaner.maybe_clean`): installs a finished clean,
        then starts the next one in the cleaner's worker thread. Call it every
        log.cleaner.backoff.ms; ``wake`` (called from the worker thread when a run ends)
        should schedule another call on the loop."""
        t = self.now_ms() if now_ms is None else now_ms
        return self.cleaner.maybe_clean(
            self.logs(), t, wake=wake, is_live=lambda lg: self._logs.get((lg.topic, lg.partition)) is lg
        )

    async def clean_once(self, loop: asyncio.AbstractEventLoop) -> CleanStats | None:
        """Alternative driver: one clean, the heavy part awaited in the worker thread."""
        return await self.cleaner.clean_once(self.logs(), loop, _clock)

    def remove_expired_producers(self, expiration_ms: int, now_ms: int | None = None) -> int:
        """producer.id.expiration.ms for every log (Kafka's PeriodicProducerExpirationCheck):
        forget the idempotent producers idle for ``expiration_ms`` with no open transaction;
        a log whose producer state is not loaded yet holds nothing to remove and skips the
        expired entries of its snapshot when it loads it. Call it every producer.id.expiration.check.interval.ms;
        returns how many producers were removed."""
        t = self.now_ms() if now_ms is None else now_ms
        removed = 0
        for lg in self._logs.values():
            ps = lg.producer_state
            ps.expiration_ms = expiration_ms
            removed += ps.remove_expired_producers(t)
        if removed:
            log.debug("Removed %d expired producer id(s) (producer.id.expiration.ms=%d)", removed, expiration_ms)
        return removed

    def _add(self, tp: tuple[str, int], lg: Log, d: Path) -> None:
        self._logs[tp] = lg
        self._dir_of[tp] = d
        lg.on_recovery_point_lowered = lambda: self.checkpoint_recovery_points(d)

    def checkpoint_recovery_points(self, d: Path) -> None:
        """Write ``d``'s recovery-point checkpoint now (Kafka's checkpointRecoveryOffsetsInDir, which its
        LogManager.truncateTo calls): a log truncated below its checkpointed recovery point must not be
        recovered from that point after a crash. Its index entries and leader epochs above the truncation
        are gone, and the recovery trusts what lies below the point it reads."""
        if d in self.offline_dirs:
            return
        tps = [tp for tp, ld in self._dir_of.items() if ld == d]
        write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, {tp: self._logs[tp].recovery_point for tp in tps})

    def checkpoint(self, on_error: Callable[[Path, OSError], None] | None = None) -> None:
        """Write recovery points, log start offsets and high watermarks of every log dir. With
        ``on_error``, a dir whose checkpoint cannot be written (a full disk) is handed to it and the
        others are still written (Kafka's CheckpointFileWithFailureHandler takes that log dir offline
        through the LogDirFailureChannel); without, the error is raised."""
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            logs = [self._logs[tp] for tp, ld in self._dir_of.items() if ld == d]
            files: list[tuple[str, dict[TopicPartition, int]]] = [
                (RECOVERY_POINT_CHECKPOINT, {(lg.topic, lg.partition): lg.recovery_point for lg in logs}),
                (LOG_START_OFFSET_CHECKPOINT, {(lg.topic, lg.partition): lg.log_start_offset for lg in logs}),
                (REPLICATION_OFFSET_CHECKPOINT, {(lg.topic, lg.partition): lg.high_watermark for lg in logs}),
            ]
            for name, values in files:
                try:
                    write_offset_checkpoint(d / name, values)
                except OSError as e:
                    if on_error is None:
                        raise
                    on_error(d / name, e)  # names the file in the log line
                    break

    def shutdown(self) -> None:
        """Close every log cleanly, write checkpoints, then the clean-shutdown markers."""
        start = time.monotonic()
        self._stop_moves()
        self.cleaner.shutdown()
        # Kafka fsyncs each log as it closes it; with 10,000 partitions that is 50,000 fsyncs
        # (.log, two indexes, snapshot, epoch checkpoint) and took over a minute here. Every log
        # is written out first and one sync(2) then makes all of it durable, before the
        # checkpoints and the clean-shutdown markers that vouch for it.
        for lg in self._logs.values():
            lg.close(fsync=False)
        os.sync()
        self._process_dir_deletes(0, force=True)
        self.checkpoint()
        for d in self.log_dirs:
            if d not in self.offline_dirs:
                write_atomic(d / CLEAN_SHUTDOWN_FILE, b"")
        log.info(
            "Shut down %d log(s) cleanly in %.0f ms", len(self._logs), (time.monotonic() - start) * 1000
        )
        self._logs.clear()
        self._dir_of.clear()
        self.started = False


    # ------------------------------------------------------------------ moves between log dirs (KIP-113)

    def _recover_moves(self) -> list[dir_move.FutureLog]:
        return dir_move.recover_moves(self.log_dirs)

    def _resume_moves(self, resumed: list[dir_move.FutureLog]) -> None:
        import asyncio

        for fut in resumed:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # not in the broker (tools): the move is dropped, the current log stays
                shutil.rmtree(fut.path, ignore_errors=True)
                continue
            if (fut.topic, fut.partition) in self._logs and fut.dest in self.log_dirs:
                self._futures[(fut.topic, fut.partition)] = fut
                self._spawn_move(fut)
            else:
                shutil.rmtree(fut.path, ignore_errors=True)

    def future_of(self, topic: str, partition: int) -> dir_move.FutureLog | None:
        """The move in progress of this partition's log, if any."""
        return self._futures.get((topic, partition))

    def futures(self) -> list[dir_move.FutureLog]:
        return list(self._futures.values())

    def future_end_offset(self, fut: dir_move.FutureLog) -> int:
        lg = self._logs.get((fut.topic, fut.partition))
        if lg is None:
            return 0
        return dir_move.copied_end_offset(fut, lg.dir, lg.log_end_offset)

    def start_move(self, topic: str, partition: int, dest: Path) -> bool:
        """Move the partition's log to the log dir ``dest`` (one of ``log_dirs``, online): creates the
        future log there and starts copying (ReplicaManager.alterReplicaLogDirs). False when there is
        nothing to do (already there, or already moving there). Needs a running event loop."""
        tp = (topic, partition)
        lg = self._logs.get(tp)
        if lg is None:
            raise KeyError(tp)
        current = self._futures.get(tp)
        if current is not None and current.dest == dest:
            return False
        if current is not None:  # the destination changed: this move stops (futureReplicaDirChanged)
            self.cancel_move(topic, partition)
        if self._dir_of[tp] == dest:
            return False
        fut = dir_move.FutureLog(topic, partition, dest, dir_move.new_uid())
        fut.path.mkdir()
        fsync_dir(dest)
        self._futures[tp] = fut
        log.info("Moving %s from %s to %s (future log %s)", lg.name, self._dir_of[tp], dest, fut.path)
        self._spawn_move(fut)
        return True

    def cancel_move(self, topic: str, partition: int) -> None:
        fut = self._futures.pop((topic, partition), None)
        if fut is None:
            return
        fut.cancelled = True
        if fut.task is not None:
            fut.task.cancel()
        shutil.rmtree(fut.path, ignore_errors=True)
        log.info("Stopped moving %s-%d to %s", topic, partition, fut.dest)

    def _stop_moves(self) -> None:
        """Shutdown: the copy tasks stop; the future logs stay and the moves resume on the next start."""
        for fut in self._futures.values():
            fut.cancelled = True
            if fut.task is not None:
                fut.task.cancel()
        self._futures.clear()

    def _spawn_move(self, fut: dir_move.FutureLog) -> None:
        import asyncio

        fut.task = asyncio.get_running_loop().create_task(self._run_move(fut), name=f"move-{fut.name}")

    async def _run_move(self, fut: dir_move.FutureLog) -> None:
        """Kafka's ReplicaAlterLogDirsThread in spirit: copy in a worker thread, round after round, until
        what is left is small; then swap on the loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        tp = (fut.topic, fut.partition)
        try:
            while not fut.cancelled:
                lg = self._logs.get(tp)
                if lg is None or self._futures.get(tp) is not fut:
                    return
                ranges, stale = dir_move.plan(fut, lg.dir, lg.segment_file_sizes())
                dir_move.drop_stale(fut, stale)
                if sum(r.end - r.start for r in ranges) <= dir_move.SWAP_THRESHOLD_BYTES:
                    self._finish_move(fut, lg)
                    return
                copied = await loop.run_in_executor(None, dir_move.copy_ranges, lg.dir, fut.path, ranges)
                if not fut.cancelled:
                    dir_move.record(fut, copied)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except OSError as e:
            log.error("Moving %s to %s failed: %s", fut.name, fut.dest, e)
            if self._futures.get(tp) is fut:
                self.cancel_move(fut.topic, fut.partition)

    def _finish_move(self, fut: dir_move.FutureLog, src: Log) -> None:
        """Copy the rest and swap (LogManager.replaceCurrentWithFutureLog); runs in one loop turn."""
        tp = (fut.topic, fut.partition)
        source_parent = self._dir_of[tp]
        src.flush()
        ranges, stale = dir_move.plan(fut, src.dir, src.segment_file_sizes())
        dir_move.drop_stale(fut, stale)
        dir_move.record(fut, dir_move.copy_ranges(src.dir, fut.path, ranges))
        dir_move.copy_metadata(src.dir, fut.path)
        fsync_dir(fut.path)
        # the current log goes first: a crash between the renames leaves a complete future log and a
        # -delete dir of the same unique id, which the next start turns into the finished move
        doomed = source_parent / dir_move.suffixed_dir_name(src.name, fut.uid, DELETE_DIR_SUFFIX)
        os.rename(src.dir, doomed)
        fsync_dir(source_parent)
        target = fut.dest / src.name
        os.rename(fut.path, target)
        fsync_dir(fut.dest)
        del self._futures[tp]
        moved = Log.open(
            target, src.config, clean=False, recovery_point=src.recovery_point,
            log_start_offset=src.log_start_offset, high_watermark=src.high_watermark, now_ms=self.now_ms,
        )
        self.cleaner.forget(src)
        self._add(tp, moved, fut.dest)
        t = self.now_ms()
        self._schedule_dir_delete(t + src.config.file_delete_delay_ms, src, doomed)
        log.info("Moved %s from %s to %s (log end offset %d)", src.name, source_parent, fut.dest,
                 moved.log_end_offset)
