"""Loading the segments of one partition directory (Kafka's LogLoader).

Partition directory layout (``<log.dir>/<topic>-<partition>/``)::

    00000000000000000000.log         batches (odradek.log.file_records)
    00000000000000000000.index       offset index (odradek.log.offset_index)
    00000000000000000000.timeindex   time index (odradek.log.time_index)
    00000000000000000000.txnindex    aborted transactions (odradek.log.txn_index)
    00000000000000001234.snapshot    producer state (odradek.log.producer_state)
    partition.metadata               topic id (odradek.log.checkpoint)

Leftovers on load: an interrupted compaction swap (``*.swap``) is completed
first (:func:`odradek.log.cleaner.complete_swaps`); then ``*.deleted`` (segments
whose delayed deletion did not run), ``*.cleaned``, ``*.tmp``, and index files
without a ``.log`` are removed.

After a clean shutdown nothing is scanned: segments are opened from a directory
listing (one ``stat`` per ``.log``) and the log end offset comes from the last
segment's last offset index entry plus a header scan from there. After an
unclean shutdown every batch from the recovery point on is recovered (CRC-checked,
torn tail truncated, indexes rebuilt): in the segment holding the recovery point
from the batch of its last offset index entry below it (what lies below was flushed
with its index, see ``LogSegment.recover``), in the later segments from their start.
Segments below stay unopened. When a segment had to be truncated, the segments
after it are deleted. The transaction indexes are cut at the recovery point (they
were flushed with their segments below it) and refilled by the log, which replays
the batches from the newest producer snapshot at or below ``recovered_from`` (the
transaction index needs each transaction's first offset: producer state).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from pathlib import Path
from typing import NamedTuple

from odradek.log.clean_task import complete_swaps
from odradek.log.config import LogConfig
from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from odradek.log.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger("odradek.log")

_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")


class LoadedSegments(NamedTuple):
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    truncated_bytes: int
    recovered_segments: int
    # (leader epoch, start offset) where the recovered batches' epoch grew, in log order
    recovered_epochs: tuple[tuple[int, int], ...] = ()
    # the transaction indexes hold the aborted transactions below this offset, -1: all of them
    recovered_from: int = -1
    # the first offset whose batch was checked, -1 if none was
    checked_from: int = -1


def load_segments(
    dir: Path,
    config: LogConfig,
    *,
    clean: bool,
    recovery_point: int,
    log_start_offset: int,
    now_ms: int,
    name: str = "",
) -> LoadedSegments:
    name = name or dir.name
    sizes: dict[int, int] = {}
    index_files: set[str] = set()
    strays: list[str] = []
    with os.scandir(dir) as it:
        entries = list(it)
    if any(e.name.endswith(".swap") for e in entries):  # one listing of the directory when there is none
        complete_swaps(dir)
        with os.scandir(dir) as it:
            entries = list(it)
    for entry in entries:
        fname = entry.name
        if fname.endswith(_LEFTOVER_SUFFIXES):
            strays.append(fname)
            continue
        stem, dot, suffix = fname.partition(".")
        if not dot or not stem.isdigit() or len(stem) != 20:
            continue
        suffix = "." + suffix
        if suffix == LOG_SUFFIX:
            sizes[int(stem)] = entry.stat().st_size
        elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            index_files.add(fname)
    for fname in strays:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dir / fname)
    for fname in index_files:
        if int(fname.partition(".")[0]) not in sizes:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dir / fname)

    if not sizes:
        seg = LogSegment.create(dir, log_start_offset, config, now_ms, lazy=True)
        return LoadedSegments([seg], log_start_offset, log_start_offset, 0, 0)

    bases = sorted(sizes)
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        prefix = f"{base:020d}"
        present = f"{prefix}{INDEX_SUFFIX}" in index_files and f"{prefix}{TIME_INDEX_SUFFIX}" in index_files
        segments.append(
            LogSegment.open(
                dir,
                base,
                config,
                sizes[base],
                active=i == len(bases) - 1,
                time_ms=now_ms,
                indexes_present=present,
                txn_index_present=f"{prefix}{TXN_INDEX_SUFFIX}" in index_files,
            )
        )

    truncated = 0
    recovered = 0
    if clean:
        was_open = segments[-1].log.is_open
        next_offset = segments[-1].read_next_offset()
        if not was_open:
            segments[-1].log.release_fd()  # opened again when used: an idle partition holds no descriptor
        if next_offset is None:
            log.warning(
                "Partition %s: last segment %d is inconsistent despite a clean shutdown; recovering it",
                name,
                segments[-1].base_offset,
            )
            truncated += segments[-1].recover()
            recovered += 1
            next_offset = segments[-1].read_next_offset()
            assert next_offset is not None
            epochs = tuple(segments[-1].recovered_epochs)
            base = segments[-1].base_offset
            return LoadedSegments(segments, next_offset, next_offset, truncated, recovered, epochs, base, base)
        return LoadedSegments(segments, next_offset, next_offset, truncated, recovered)

    # unclean: recover from the segment holding the recovery point
    start = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    i = start
    recovered_epochs: list[tuple[int, int]] = []
    while i < len(segments):
        seg = segments[i]
        cut = seg.recover(recovery_point if i == start else -1)
        recovered += 1
        truncated += cut
        recovered_epochs.extend(seg.recovered_epochs)
        if cut > 0 and i < len(segments) - 1:
            doomed = segments[i + 1 :]
            log.warning(
                "Partition %s: deleting %d segment(s) after the truncated segment %d",
                name,
                len(doomed),
                seg.base_offset,
            )
            del segments[i + 1 :]
            for d in doomed:
                d.delete_files()
            seg.make_active()
        i += 1
    next_offset = segments[-1].read_next_offset()
    if next_offset is None:  # cannot happen after recover(); be defensive
        truncated += segments[-1].recover()
        next_offset = segments[-1].read_next_offset() or segments[-1].base_offset
    return LoadedSegments(
        segments, next_offset, min(recovery_point, next_offset), truncated, recovered, tuple(recovered_epochs),
        segments[start].recovered_from if recovered else -1, segments[start].checked_from if recovered else -1,
    )
