"""The remote log manager (Kafka's RemoteLogManager) on real logs, a real ReplicaManager and a store that
records what it is asked, in an asyncio loop, with a clock the test sets: the copy task copies the closed
segments below the last stable offset, never the active one, on a worker thread (never the loop), writing
COPY_SEGMENT_STARTED then COPY_SEGMENT_FINISHED to the partition's __remote_log_metadata partition; the
highest offset copied lets local retention delete; a fresh manager replays the records (a restart); remote
retention deletes at the time the clock says; a remote read returns the copied segment's bytes."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.config import BrokerConfig
from odradek.log import FetchIsolation, Log, LogConfig
from odradek.protocol import errors
from odradek.protocol.records import build_batch, decode_records, iter_batches, validate_batches
from odradek.replication.delayed_fetch import RemoteFetchInfo
from odradek.replication.partition import Partition
from odradek.server.remote_log_manager import RemoteLogManager
from odradek.server.replica_manager import ReplicaManager
from odradek.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    deserialize,
    metadata_partition,
)
from odradek.tiered.storage import FileSystemRemoteStorage, LogSegmentData, RemoteStorageError

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=42)
TIP = TopicIdPartition(TOPIC_ID, "t", 0)
MP = metadata_partition(TIP)
BATCH = build_batch([(None, b"v" * 100) for _ in range(10)], timestamp=NOW)
TIERED = LogConfig(segment_bytes=len(BATCH) * 2, retention_ms=-1, remote_storage_enable=True,
                   local_retention_bytes=len(BATCH) * 2, file_delete_delay_ms=0)
S = RemoteLogSegmentState


class _Store(FileSystemRemoteStorage):
    """The directory store, noting the thread of each copy."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        self.copy_threads: list[str] = []

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        self.copy_threads.append(threading.current_thread().name)
        return super().copy_log_segment_data(metadata, data)


class _World:
    def __init__(self, tmp_path: Path) -> None:
        self.now = NOW
        self.plog = Log.create(tmp_path / "data", "t", 0, TIERED, TOPIC_ID, time_ms=NOW)
        self.mlog = Log.create(tmp_path / "data", REMOTE_LOG_METADATA_TOPIC, MP, LogConfig(), uuid.uuid4(), time_ms=NOW)
        self.logs = {("t", 0): self.plog, (REMOTE_LOG_METADATA_TOPIC, MP): self.mlog}
        metas = {"t": SimpleNamespace(name="t", topic_id=TOPIC_ID, partitions=[None]),
                 REMOTE_LOG_METADATA_TOPIC: SimpleNamespace(name=REMOTE_LOG_METADATA_TOPIC, partitions=[None] * 50)}
        self.topics: Any = SimpleNamespace(get=metas.get)
        self.rm = ReplicaManager(0, self, self.topics, self.now_ms)  # type: ignore[arg-type]
        for (topic, p), plog in self.logs.items():
            part = Partition(topic, p, [0], 0, 1, [0], 0, 1)
            self.rm.partitions[(topic, p)] = part
            self.rm.make_leader(part, plog, NOW)
        self.store = _Store(tmp_path / "remote")

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def delete_log(self, topic: str, partition: int) -> bool:
        return self.logs.pop((topic, partition), None) is not None

    def now_ms(self) -> int:
        return self.now

    def manager(self) -> RemoteLogManager:
        return RemoteLogManager(BrokerConfig({}), 0, self.rm, self, self.topics, None,  # type: ignore[arg-type]
                                self.store, self.now_ms)

    def records(self) -> list[Any]:
        """Every record of the metadata partition, decoded."""
        data = self.mlog.read(0, 1 << 20, self.mlog.log_end_offset, True)
        buf = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in data.regions)
        out = []
        for pos, h in iter_batches(buf):
            out += [deserialize(r.value) for r in decode_records(memoryview(buf)[pos:pos + h.size])
                    if r.value is not None]
        return out


async def _settle(rlm: RemoteLogManager) -> None:
    """Run the task, then wait for its copies and deletions and what each starts when it ends (no clock)."""
    rlm.tick()
    while rlm.in_flight:
        await asyncio.gather(*rlm.in_flight)
        await asyncio.sleep(0)  # a loop turn: the follow-ups scheduled with call_soon start their work
    assert not rlm._busy


def test_copy_local_retention_replay_and_remote_retention(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)
    assert [s.base_offset for s in w.plog.segments] == [0, 20, 40, 60, 80]

    async def run() -> None:
        rlm = w.manager()
        await _settle(rlm)
        # every closed segment, not the active one at 80, each STARTED then FINISHED, on a worker thread
        assert w.plog.highest_offset_in_remote_storage == 79
        assert w.store.copy_threads and all(t.startswith("remote-log-copy") for t in w.store.copy_threads)
        assert threading.current_thread().name not in w.store.copy_threads
        recs = w.records()
        assert [(type(r).__name__, r.state) for r in recs] == [
            (kind, state) for _ in range(4) for kind, state in
            (("RemoteLogSegmentMetadata", S.COPY_SEGMENT_STARTED),
             ("RemoteLogSegmentMetadataUpdate", S.COPY_SEGMENT_FINISHED))]
        starts = [(r.start_offset, r.end_offset) for r in recs if isinstance(r, RemoteLogSegmentMetadata)]
        assert starts == [(0, 19), (20, 39), (40, 59), (60, 79)]
        # local retention may now delete what is copied; reads below the local start come from the store
        w.plog.delete_old_segments(w.now)
        assert (w.plog.log_start_offset, w.plog.local_log_start_offset) == (0, 80)
        info = RemoteFetchInfo("t", 0, 25, 1 << 20, True, FetchIsolation.HIGH_WATERMARK)
        got = await asyncio.wrap_future(rlm.read_async(info, w.plog))
        assert len(got.records) == 2 * len(BATCH)  # the segment 20-39 from the batch holding 25
        assert [h.base_offset for _, h in iter_batches(got.records)] == [20, 30]
        rlm.shutdown()

        # a restarted broker: the records are replayed, the copies are not made again
        again = RemoteLogManager(BrokerConfig({}), 0, w.rm, w, w.topics, None,  # type: ignore[arg-type]
                                 _Store(tmp_path / "remote"), w.now_ms)
        w.plog.highest_offset_in_remote_storage = -1
        await _settle(again)
        assert w.plog.highest_offset_in_remote_storage == 79 and len(w.records()) == 8
        # remote retention by time, at the time the clock says: records of the batches are at NOW
        w.plog.update_config(TIERED.replace(retention_ms=60_000))
        w.now = NOW + 59_999
        await _settle(again)
        assert len(w.records()) == 8
        w.now = NOW + 60_000  # the newest record is retention.ms old: Kafka's maxTimestampMs <= now - retention.ms
        await _settle(again)
        tail = w.records()[8:]
        assert [r.state for r in tail] == [S.DELETE_SEGMENT_STARTED] * 4 + [S.DELETE_SEGMENT_FINISHED] * 4
        assert all(isinstance(r, RemoteLogSegmentMetadataUpdate) for r in tail)
        assert w.plog.log_start_offset == 80 and not list((tmp_path / "remote").rglob("*.log"))
        again.shutdown()

    asyncio.run(run())


class _FollowerSide:
    """Broker 1: a follower of ``t-0`` (an empty log) and of the metadata partition (the leader's log itself,
    read up to its high watermark as a follower's replica would be)."""

    def __init__(self, w: _World, tmp_path: Path) -> None:
        self.w = w
        self.plog = Log.create(tmp_path / "follower", "t", 0, TIERED, TOPIC_ID, time_ms=NOW)
        self.logs = {("t", 0): self.plog, (REMOTE_LOG_METADATA_TOPIC, MP): w.mlog}
        self.rm = ReplicaManager(1, self, w.topics, w.now_ms)  # type: ignore[arg-type]
        for topic, p in self.logs:
            part = Partition(topic, p, [0, 1], 0, 1, [0, 1], 0, 1)
            self.rm.partitions[(topic, p)] = part
            self.rm.make_follower(part)
        self.rlm = RemoteLogManager(BrokerConfig({}), 1, self.rm, self, w.topics, None,  # type: ignore[arg-type]
                                    w.store, w.now_ms)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))


def _idempotent(i: int) -> bytes:
    return build_batch([(None, b"v" * 100) for _ in range(10)], timestamp=NOW, producer_id=7, producer_epoch=3,
                       base_sequence=10 * i)


def test_a_follower_reads_the_metadata_and_applies_local_retention(tmp_path: Path) -> None:
    """Kafka's TopicBasedRemoteLogMetadataManager on a follower: it consumes the metadata partition of the
    user partitions it follows, learns the highest offset copied, and local retention deletes what is copied."""
    w = _World(tmp_path)
    f = _FollowerSide(w, tmp_path)
    for i in range(10):
        w.rm.append("t", 0, _idempotent(i), NOW, acks=1)
        data = w.plog.read(10 * i, 1 << 20, w.plog.log_end_offset, True)
        raw = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in data.regions)
        f.plog.append_as_follower(raw, validate_batches(raw, check_records=False), NOW)
    f.plog.update_high_watermark(100)  # the leader's, as its fetch responses carry it

    async def run() -> None:
        leader = w.manager()
        await _settle(leader)
        assert w.plog.highest_offset_in_remote_storage == 79
        f.plog.delete_old_segments(w.now)
        assert f.plog.local_log_start_offset == 0  # nothing known copied yet: the follower keeps everything
        f.rlm.tick()  # the follower reads the records (it leads nothing: it copies nothing)
        assert f.plog.highest_offset_in_remote_storage == 79
        assert not f.rlm.in_flight and len(w.records()) == 8
        f.plog.delete_old_segments(w.now)
        assert (f.plog.log_start_offset, f.plog.local_log_start_offset) == (0, 80)
        leader.shutdown()
        f.rlm.shutdown()

    asyncio.run(run())


def test_a_wiped_follower_builds_its_state_from_the_remote_tier(tmp_path: Path) -> None:
    """Kafka's TierStateMachine: a follower fetching below the leader's local log start gets
    OFFSET_MOVED_TO_TIERED_STORAGE; it takes the leader epochs and producer state from the remote segment ending
    just before the leader's local log start and fetches only from there."""
    w = _World(tmp_path)
    for i in range(10):
        w.rm.append("t", 0, _idempotent(i), NOW, acks=1)
    f = _FollowerSide(w, tmp_path)

    async def run() -> None:
        leader = w.manager()
        await _settle(leader)
        w.plog.delete_old_segments(w.now)
        assert w.plog.local_log_start_offset == 80
        code, _, _ = w.rm.read("t", 0, 0, 1 << 20, FetchIsolation.LOG_END, True)
        assert code == errors.OFFSET_MOVED_TO_TIERED_STORAGE
        # not known remotely yet on the follower: retried later
        assert f.rlm.metadata.partitions() == []
        w.now += 1_000
        assert await f.rlm.build_remote_log_aux_state(f.plog, 80, 1, 0)
        assert (f.plog.log_start_offset, f.plog.local_log_start_offset, f.plog.log_end_offset) == (0, 80, 80)
        assert [(e.epoch, e.start_offset) for e in f.plog.leader_epoch_cache.entries] == [
            (e.epoch, e.start_offset) for e in w.plog.leader_epoch_cache.entries]
        assert f.plog.highest_offset_in_remote_storage == 79 and f.rlm.follower_rebuilds == 1
        # the producer state at 80 came from the remote segment's snapshot: the next batch of producer 7 is in
        # sequence on the follower, the one before it a duplicate
        entry = f.plog.producer_state.producers[7]
        assert (entry.epoch, entry.last_seq) == (3, 79)
        code, _, data = w.rm.read("t", 0, 80, 1 << 20, FetchIsolation.LOG_END, True)
        assert code == errors.NONE and data.size == 2 * len(BATCH)  # only the local tail
        raw = b"".join(os.pread(r.file.fileno(), r.length, r.position) for r in data.regions)
        f.plog.append_as_follower(raw, validate_batches(raw, check_records=False), w.now)
        assert f.plog.log_end_offset == 100 and f.plog.producer_state.producers[7].last_seq == 99
        leader.shutdown()
        f.rlm.shutdown()

    asyncio.run(run())


def test_a_new_leader_deletes_a_copy_the_old_one_left_unfinished_and_continues(tmp_path: Path) -> None:
    """A leadership move mid-copy: the COPY_SEGMENT_STARTED without FINISHED of the old leader is a dangling
    segment the new leader deletes (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED, as Kafka's
    RLMExpirationTask), and it copies from the highest offset copied, with no gap and no duplicate."""
    w = _World(tmp_path)
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        old = w.manager()
        old.tick()  # the first copy: COPY_SEGMENT_STARTED written, the copy in flight
        assert len(w.records()) == 1
        old.closed = True  # the old leader dies before COPY_SEGMENT_FINISHED
        await asyncio.gather(*old.in_flight)
        old.shutdown()
        dangling = w.records()[0]
        assert dangling.state is S.COPY_SEGMENT_STARTED and (dangling.start_offset, dangling.end_offset) == (0, 19)
        new = RemoteLogManager(BrokerConfig({}), 0, w.rm, w, w.topics, None,  # type: ignore[arg-type]
                               _Store(tmp_path / "remote"), w.now_ms)
        await _settle(new)
        recs = w.records()
        deletes = [r for r in recs if isinstance(r, RemoteLogSegmentMetadataUpdate)
                   and r.segment_id == dangling.segment_id]
        assert [r.state for r in deletes] == [S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED]
        finished = {r.segment_id for r in recs if isinstance(r, RemoteLogSegmentMetadataUpdate)
                    and r.state is S.COPY_SEGMENT_FINISHED}
        ranges = sorted((r.start_offset, r.end_offset) for r in recs
                        if isinstance(r, RemoteLogSegmentMetadata) and r.segment_id in finished)
        assert ranges == [(0, 19), (20, 39), (40, 59), (60, 79)]
        assert len(list((tmp_path / "remote").rglob("*.log"))) == 4  # the dangling copy's files are gone
        new.shutdown()

    asyncio.run(run())


def test_a_deleted_topic_loses_its_remote_segments(tmp_path: Path) -> None:
    """Kafka's RemoteLogManager.stopPartitions with deleteRemoteLog (the topic deleted, this broker its leader):
    a StopReplica with delete and Kafka's EpochDuringDelete lists the partition's remote segments; the next task
    writes DELETE_SEGMENT_STARTED for each, deletes them from the store, then writes DELETE_SEGMENT_FINISHED.
    A StopReplica with delete for another reason (a reassignment) keeps them."""
    w = _World(tmp_path)
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        rlm = w.manager()
        w.rm.remote_reader = rlm
        w.rm.fetchers = SimpleNamespace(remove=lambda tp: None)  # type: ignore[assignment]
        await _settle(rlm)
        assert len(list((tmp_path / "remote").rglob("*.log"))) == 4
        w.rm.stop_replicas({"partitions": [{"topic": "t", "partition": 0, "leader_epoch": 1, "delete": True}]})
        assert not rlm._partition_deletes  # a replica moved away, not the topic deleted: the remote tier stays
        assert w.get_log("t", 0) is None
        w.logs[("t", 0)] = w.plog
        part = Partition("t", 0, [0], 0, 1, [0], 0, 1)
        w.rm.partitions[("t", 0)] = part
        w.rm.make_leader(part, w.plog, NOW)
        w.rm.stop_replicas({"partitions": [{"topic": "t", "partition": 0, "leader_epoch": -2, "delete": True}]})
        await _settle(rlm)
        tail = w.records()[8:]
        assert [r.state for r in tail] == [S.DELETE_SEGMENT_STARTED] * 4 + [S.DELETE_SEGMENT_FINISHED] * 4
        assert not list((tmp_path / "remote").rglob("*.log")) and rlm.deleted_segments == 4
        rlm.shutdown()

    asyncio.run(run())


def test_remote_log_copy_disable_stops_the_copies(tmp_path: Path) -> None:
    """KIP-950: with remote.log.copy.disable the leader copies nothing more (Kafka creates no copy task)."""
    w = _World(tmp_path)
    w.plog.update_config(TIERED.replace(remote_log_copy_disable=True))
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        rlm = w.manager()
        await _settle(rlm)
        assert w.records() == [] and w.plog.highest_offset_in_remote_storage == -1
        rlm.shutdown()

    asyncio.run(run())


def test_list_offsets_by_timestamp_reads_the_remote_segments(tmp_path: Path) -> None:
    """Kafka's RemoteLogManager.findOffsetByTimestamp: a timestamp whose first record is in a segment now only
    in the remote tier is found there, on a reader thread (the segment's time index, offset index, then its
    batches), with the batch's leader epoch; a segment still local too is searched locally, on the loop; past
    every remote segment's max timestamp the lookup answers nothing (the caller searches the local log)."""
    w = _World(tmp_path)
    for i in range(10):  # records at NOW + offset
        w.rm.append("t", 0, build_batch([(None, b"v" * 100) for _ in range(10)],
                                        timestamps=[NOW + 10 * i + j for j in range(10)]), NOW, acks=1)

    async def run() -> None:
        rlm = w.manager()
        await _settle(rlm)
        assert w.plog.highest_offset_in_remote_storage == 79
        epoch = w.plog.leader_epoch_cache.latest_epoch
        # copied but still local: the local segments answer, at once, without a remote read
        fut = rlm.find_offset_by_timestamp(w.plog, NOW + 25, 0)
        assert fut.done() and fut.result() == (NOW + 25, 25, epoch) and rlm.remote_offset_lookups == 0
        w.plog.delete_old_segments(w.now)
        assert (w.plog.log_start_offset, w.plog.local_log_start_offset) == (0, 80)
        threads: list[str] = []
        real = rlm._lookup_timestamp

        def noting(*a: Any) -> Any:
            threads.append(threading.current_thread().name)
            return real(*a)

        rlm._lookup_timestamp = noting  # type: ignore[method-assign]
        for target, offset in ((NOW - 5, 0), (NOW + 25, 25), (NOW + 40, 40), (NOW + 79, 79)):
            got = await asyncio.wrap_future(rlm.find_offset_by_timestamp(w.plog, target, 0))
            assert got == (max(target, NOW), offset, epoch), target
        assert threads and all(t.startswith("remote-log-reader") for t in threads)
        assert rlm.remote_offset_lookups == 4
        # the starting offset (the log start, after remote retention) bounds the answer
        assert (await asyncio.wrap_future(rlm.find_offset_by_timestamp(w.plog, NOW, 33))).offset == 33
        # past the remote segments' max timestamps: nothing there, the local log answers (the handler's part)
        assert await asyncio.wrap_future(rlm.find_offset_by_timestamp(w.plog, NOW + 85, 0)) is None
        assert w.plog.offset_for_timestamp(NOW + 85, w.plog.local_log_start_offset) == (85, NOW + 85, epoch)
        # a store that lost the segment's files: the lookup fails (Kafka's RemoteStorageException)
        lost = [m for m in rlm.metadata.list_remote_log_segments(TIP) if m.start_offset == 20]
        w.store.delete_log_segment_data(lost[0])
        rlm._indexes.clear()
        try:
            await asyncio.wrap_future(rlm.find_offset_by_timestamp(w.plog, NOW + 25, 0))
        except RemoteStorageError:
            pass
        else:
            raise AssertionError("a lookup in a lost segment succeeded")
        rlm.shutdown()

    asyncio.run(run())


class _SlowStore(_Store):
    """A store whose copies wait for the test's go."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.go = threading.Event()

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        assert self.go.wait(10)
        return super().copy_log_segment_data(metadata, data)


def test_a_partition_deletion_waits_for_the_copy_in_flight(tmp_path: Path) -> None:
    """The remote tier of a partition deleted (its topic deleted, or remote.storage.enable turned off with
    remote.log.delete.on.disable) while a copy of it runs: the deletion waits for the copy, then deletes its
    segment too, so nothing is left in the store; a log no longer tiered gets no copy and no retention."""
    w = _World(tmp_path)
    w.store = _SlowStore(tmp_path / "remote")
    for _ in range(10):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        rlm = w.manager()
        w.rm.remote_reader = rlm
        w.rm.fetchers = SimpleNamespace(remove=lambda tp: None)  # type: ignore[assignment]
        rlm.tick()  # the first copy: COPY_SEGMENT_STARTED written, the store's copy waiting
        assert [r.state for r in w.records()] == [S.COPY_SEGMENT_STARTED]
        w.plog.update_config(TIERED.replace(remote_storage_enable=False, remote_log_delete_on_disable=True))
        rlm.delete_remote_log_partition(w.plog)
        rlm.tick()
        assert [r.state for r in w.records()] == [S.COPY_SEGMENT_STARTED]  # waiting for the copy
        w.store.go.set()
        while rlm.in_flight:
            await asyncio.gather(*rlm.in_flight)
            await asyncio.sleep(0)
        await _settle(rlm)
        states = [r.state for r in w.records()]
        # the copy finished (still led), then its segment deleted; no other copy (the log is not tiered now)
        assert states == [S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED,
                          S.DELETE_SEGMENT_FINISHED], states
        assert not list((tmp_path / "remote").rglob("*.log")) and rlm.deleted_segments == 1
        rlm.shutdown()

    asyncio.run(run())
