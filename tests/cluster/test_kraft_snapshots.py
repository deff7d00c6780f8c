"""KIP-630 between ``odradek controller`` processes: with small snapshot and retention settings the controllers
write ``.checkpoint`` snapshots of their committed image and delete the log segments a newer snapshot covers; a voter that
was down meanwhile is answered with the leader's snapshot id, fetches the snapshot (FetchSnapshot), installs it,
reloads its state machine from it and fetches the log after it; every controller restarts from its latest
snapshot and the log after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from waiting import wait_until

from odradek.metadata.log_store import BOOTSTRAP_SNAPSHOT, PARTITION_DIR, MetadataLog, snapshot_id_of

from .kraft import Quorum
from .test_kraft_quorum import ends, leader_view

# NoOpRecords every 100 ms are about 0.7 KB/s: a snapshot every 2 KB, and every snapshot but the latest deleted
SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "2048", "metadata.max.retention.bytes": "0",
             "metadata.log.segment.bytes": "4096"}


def checkpoints(data: Path) -> list[Any]:
    d = data / PARTITION_DIR
    return sorted(sid for p in d.iterdir() if (sid := snapshot_id_of(p.name)) is not None) if d.exists() else []


def test_a_voter_that_was_down_catches_up_through_the_leaders_snapshot(tmp_path: Path) -> None:
    q = Quorum(tmp_path, extra=SNAPSHOTS).start()
    try:
        first = wait_until(lambda: leader_view(q), 30, "a leader")
        leader = int(first.leader_id)
        down = next(n for n in q.controllers if n != leader)
        wait_until(lambda: (p := leader_view(q)) is not None and ends(p)[down] > 0 and p, 30, "the voter to fetch")
        q.controllers[down].kill()
        stopped = MetadataLog.open(q.controllers[down].data, now_ms=0)
        down_end = stopped.log_end_offset
        stopped.close()
        # every survivor snapshots and deletes its log up to a snapshot past the down voter's end
        survivors = [n for n in q.controllers if n != down]

        def segments(n: int) -> list[int]:
            return sorted(int(p.name[:20]) for p in (q.controllers[n].data / PARTITION_DIR).glob("*.log"))

        def truncated() -> bool:
            for n in survivors:
                ids = checkpoints(q.controllers[n].data)
                if not ids or BOOTSTRAP_SNAPSHOT in ids or ids[0].end_offset <= down_end or segments(n)[0] == 0:
                    return False
            return True

        wait_until(truncated, 60, "the survivors to snapshot and truncate their logs past the down voter's end",
                   detail=lambda: {n: checkpoints(q.controllers[n].data) for n in survivors})
        q.controllers[down].start()
        wait_until(lambda: (p := leader_view(q)) is not None and ends(p)[down] >= p.high_watermark > down_end and p,
                   60, "the restarted voter to catch up", detail=lambda: q.controllers[down].log_tail(2000))
        log = q.controllers[down].log_path.read_text()
        assert "Installed metadata snapshot" in log and "loading the snapshot fetched from the leader" in log, log[-3000:]
        assert "Wrote metadata snapshot" in q.controllers[leader].log_tail(100_000)
    finally:
        q.stop()
    for n, c in q.controllers.items():
        assert c.proc is not None and c.proc.returncode == 0, (n, c.log_tail())
        mlog = MetadataLog.open(c.data, now_ms=0)
        try:
            latest = mlog.latest_snapshot()
            assert latest is not None and latest != BOOTSTRAP_SNAPSHOT, n
            # the first segment is gone, and nothing is lost: the log from its first segment on and the
            # oldest snapshot kept leave no gap (never is what no snapshot covers deleted)
            assert mlog.log_start_offset > 0 and mlog.snapshots()[0].end_offset >= mlog.log_start_offset, n
            assert 0 < mlog.log.segments[0].base_offset <= mlog.snapshots()[0].end_offset, n
            # the latest snapshot, then the log after it, rebuild the image: the bootstrap's metadata.version
            image = mlog.load()
            assert image.metadata_version is not None and image.offset >= latest.end_offset - 1, n
        finally:
            mlog.close()
