"""Helpers shared by the storage tests (imported as a plain module)."""

from __future__ import annotations

import os
from pathlib import Path

from odradek.log import AppendInfo, FetchData, Log, LogConfig
from odradek.protocol.records import build_batch, iter_batches, validate_batches

NOW = 1_700_000_000_000


def make_batch(
    n: int = 1,
    *,
    value_size: int = 10,
    ts: int = NOW,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    key: bytes | None = None,
    transactional: bool = False,
) -> bytes:
    recs = [(key, bytes([65 + i % 26]) * value_size) for i in range(n)]
    return build_batch(
        recs, timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional
    )


def append(log: Log, *batches: bytes, now: int = NOW, leader_epoch: int = 0) -> AppendInfo:
    data = bytearray(b"".join(batches))
    headers = validate_batches(data)
    info = log.append_as_leader(data, headers, leader_epoch, now)
    log.update_high_watermark(log.log_end_offset)
    return info


def region_bytes(data: FetchData) -> bytes:
    out = bytearray()
    for r in data.regions:
        chunk = os.pread(r.file.fileno(), r.length, r.position)
        assert len(chunk) == r.length
        out += chunk
    return bytes(out)


def read_batches(log: Log, offset: int, max_bytes: int = 1 << 30) -> list[tuple[int, int]]:
    """(base offset, record count) of every whole batch returned by a read loop from ``offset``."""
    out: list[tuple[int, int]] = []
    while offset < log.high_watermark:
        data = log.read(offset, max_bytes, log.high_watermark, True)
        if data.size == 0:
            break
        buf = region_bytes(data)
        got = [(h.base_offset, h.record_count) for _p, h in iter_batches(buf)]
        assert got, "read made no progress"
        out.extend(got)
        last = list(iter_batches(buf))[-1][1]
        offset = last.next_offset
    return out


def new_log(tmp_path: Path, config: LogConfig | None = None, topic: str = "t", partition: int = 0) -> Log:
    return Log.create(tmp_path, topic, partition, config or LogConfig(), time_ms=NOW)


def reopen(log: Log, *, clean: bool, config: LogConfig | None = None) -> Log:
    if clean:
        log.close()
        return Log.open(
            log.dir, config or log.config, clean=True, recovery_point=log.log_end_offset,
            log_start_offset=log.log_start_offset, high_watermark=log.high_watermark, time_ms=NOW,
        )
    # "crash": nothing closed, nothing trimmed, no snapshot written at the end
    return Log.open(
        log.dir, config or log.config, clean=False, recovery_point=log.recovery_point,
        log_start_offset=log.log_start_offset, high_watermark=log.high_watermark, time_ms=NOW,
    )
