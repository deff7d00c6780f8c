"""The console reads a tiered partition's local replica (KIP-405): from its local log start offset, not from
the log start offset in the remote tier, which Log.read refuses as out of its local range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odradek.console.records import LogRecordSource
from odradek.log import Log, LogConfig
from odradek.protocol.records import build_batch, validate_batches

NOW = 1_700_000_000_000
BATCH = build_batch([(None, b"v" * 100) for _ in range(10)], timestamp=NOW)


class _Logs:
    def __init__(self, plog: Log) -> None:
        self.plog = plog

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.plog


def test_a_tiered_partition_is_browsed_from_its_local_start(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=len(BATCH) * 2, retention_ms=-1, remote_storage_enable=True,
                    local_retention_bytes=len(BATCH) * 2, file_delete_delay_ms=0)
    plog = Log.create(tmp_path, "t", 0, cfg, time_ms=NOW)
    for _ in range(10):
        data = bytearray(BATCH)
        plog.append_as_leader(data, validate_batches(data), 0, NOW)
    plog.update_high_watermark(plog.log_end_offset)
    plog.highest_offset_in_remote_storage = 79
    plog.delete_old_segments(NOW)
    assert (plog.log_start_offset, plog.local_log_start_offset) == (0, 80)
    allow: Any = lambda *_: True  # noqa: E731
    source = LogRecordSource(_Logs(plog), allow)  # type: ignore[arg-type]
    assert source.bounds("User:a", "h", "t", 0) == (80, 100)
    records = source.read("User:a", "h", "t", 0, 0, 5)
    assert [r.offset for r in records] == [80, 81, 82, 83, 84]
    plog.close_handlers()
