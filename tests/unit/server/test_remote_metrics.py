"""Tiered storage's metrics (Kafka's RemoteStorageMetrics, KIP-405 and KIP-963) as the remote log manager keeps
them, on real logs, a real ReplicaManager and the directory store, with the test's clock: the copies
(RemoteCopyRequests, RemoteCopyBytes: the bytes of the segment files in the store, RemoteCopyErrors), the
copy lag of the closed segments not copied yet, the remote size and segment count, the reads from the remote
tier (RemoteFetchRequests on the loop, RemoteFetchBytes and RemoteFetchErrors on the reader thread, in its
own counters), the deletions of remote retention (RemoteDeleteRequests, the delete lag back to 0), and the
gauges of a partition no longer led here gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.protocol import errors
from odradek.replication.delayed_fetch import RemoteFetchInfo
from odradek.tiered.metadata import RemoteLogSegmentMetadata
from odradek.tiered.storage import LogSegmentData, RemoteStorageError, RemoteStream

from .test_remote_log_manager import BATCH, NOW, TIERED, _settle, _Store, _World


class _FailingStore(_Store):
    """A store whose next ``fail_copies`` copies and every read fail."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.fail_copies = 0
        self.fail_reads = False

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        if self.fail_copies:
            self.fail_copies -= 1
            raise RemoteStorageError("the store is down")
        return super().copy_log_segment_data(metadata, data)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> RemoteStream:
        if self.fail_reads:
            raise RemoteStorageError("the store is down")
        return super().fetch_log_segment(metadata, start_position, end_position)


def _store_log_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.log"))


def test_copies_lag_size_reads_and_deletions_are_counted(tmp_path: Path) -> None:
    w = _World(tmp_path)
    store = w.store = _FailingStore(tmp_path / "remote")
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)
    stats = w.rm.topic_stats  # the broker's BrokerTopicStats, which /metrics reads

    async def run() -> None:
        rlm = w.manager()
        store.fail_copies = 1
        rlm.tick()  # the first copy fails on the worker thread
        while rlm.in_flight:
            await asyncio.gather(*rlm.in_flight, return_exceptions=True)
            await asyncio.sleep(0)
        t = stats.topic("t")
        assert (t.remote_copy_requests, t.remote_copy_errors, t.remote_copy_bytes) == (1, 1, 0)
        lag = stats.remote_topic("t")
        # four closed segments (the active one at 80 is never counted) of two batches each, none copied
        assert (lag.copy_lag_segments, lag.copy_lag_bytes) == (4, 4 * 2 * len(BATCH))
        assert lag.metadata_count == 1 and lag.log_size_bytes == 2 * len(BATCH)  # the failed copy's STARTED record

        await _settle(rlm)  # the dangling STARTED deleted, then the four copies
        t = stats.topic("t")
        assert w.plog.highest_offset_in_remote_storage == 79
        assert (t.remote_copy_requests, t.remote_copy_errors) == (5, 1)
        assert t.remote_copy_bytes == 4 * 2 * len(BATCH) == _store_log_bytes(tmp_path / "remote")
        assert (t.remote_delete_requests, t.remote_delete_errors) == (1, 0)  # the failed copy's segment
        g = stats.remote_topic("t")
        assert (g.copy_lag_segments, g.copy_lag_bytes) == (0, 0)
        assert (g.metadata_count, g.log_size_bytes) == (4, t.remote_copy_bytes)
        assert (g.delete_lag_segments, g.delete_lag_bytes) == (0, 0)
        assert rlm.copy_pool.busy() == 0 and rlm.copy_pool.idle_ratio() == 1.0

        # reads from the remote tier: the request on the loop, the bytes on the reader thread
        w.plog.delete_old_segments(w.now)
        got = await asyncio.wrap_future(rlm.read_async(RemoteFetchInfo("t", 0, 25, 1 << 20, True, False), w.plog))
        assert len(got.records) == 2 * len(BATCH)
        assert stats.topic("t").remote_fetch_requests == 1
        assert "t" not in stats.topics or stats.topics["t"].remote_fetch_bytes == 0  # not the loop's counters
        merged = stats.merged_topics()["t"]
        assert (merged.remote_fetch_requests, merged.remote_fetch_bytes, merged.remote_fetch_errors) == (
            1, 2 * len(BATCH), 0)
        # past the remote segments: OFFSET_OUT_OF_RANGE, not a failed read (Kafka's RemoteLogReader)
        gone = await asyncio.wrap_future(rlm.read_async(RemoteFetchInfo("t", 0, 500, 1 << 20, True, False), w.plog))
        assert gone.error_code == errors.OFFSET_OUT_OF_RANGE
        store.fail_reads = True
        failed = rlm.read_async(RemoteFetchInfo("t", 0, 45, 1 << 20, True, False), w.plog)
        with pytest.raises(RemoteStorageError):
            await asyncio.wrap_future(failed)
        merged = stats.merged_topics()["t"]
        assert (merged.remote_fetch_requests, merged.remote_fetch_bytes, merged.remote_fetch_errors) == (
            3, 2 * len(BATCH), 1)
        assert stats.all_topics().remote_fetch_bytes == 2 * len(BATCH)
        assert rlm.reader_pool.queue_size() == 0 and rlm.reader_pool.busy() == 0

        # remote retention deletes every remote segment: four delete requests, the size and count back to 0
        w.plog.update_config(TIERED.replace(retention_ms=60_000))
        w.now = NOW + 60_000
        await _settle(rlm)
        t = stats.topic("t")
        assert (t.remote_delete_requests, t.remote_delete_errors) == (5, 0)
        g = stats.remote_topic("t")
        assert (g.metadata_count, g.log_size_bytes, g.delete_lag_segments, g.delete_lag_bytes) == (0, 0, 0, 0)
        assert stats.all_topics().remote_copy_bytes == 4 * 2 * len(BATCH)  # a meter: it only grows
        rlm.shutdown()

    asyncio.run(run())


def test_copy_lag_counts_the_closed_segments_not_copied_and_goes_with_leadership(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)
    stats = w.rm.topic_stats

    async def run() -> None:
        rlm = w.manager()
        await _settle(rlm)
        assert stats.remote_topic("t").copy_lag_segments == 0
        for _ in range(4):  # two more closed segments (80-99, 100-119) and an active one at 120
            w.rm.append("t", 0, BATCH, w.now, acks=1)
        assert [s.base_offset for s in w.plog.segments][-3:] == [80, 100, 120]
        w.plog.update_config(TIERED.replace(remote_log_copy_disable=True))  # KIP-950: no copies, no lag
        rlm.tick()
        assert stats.remote_topic("t").copy_lag_segments == 0
        w.plog.update_config(TIERED)
        rlm.tick()  # the copy of 80-99 starts; the lag recorded at the tick still counts it
        assert ("t", 0) in rlm._busy
        g = stats.remote_partition("t", 0)
        assert (g.copy_lag_segments, g.copy_lag_bytes) == (2, 2 * 2 * len(BATCH))
        await _settle(rlm)
        assert (g.copy_lag_segments, g.copy_lag_bytes) == (0, 0)
        # no longer the leader: the partition's gauges go (Kafka resets the lag when leadership moves)
        w.rm.make_follower(w.rm.partitions[("t", 0)])
        rlm.tick()
        assert "t" not in stats.remote or 0 not in stats.remote["t"]
        rlm.shutdown()

    asyncio.run(run())
