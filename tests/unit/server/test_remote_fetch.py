"""Fetches below a tiered partition's local log start (KIP-405): the ReplicaManager hands them to the
remote reader and parks a DelayedRemoteFetch (Kafka's) in the fetch purgatory until the read completes,
answering its bytes as an in-memory buffer, its error, or nothing once remote.fetch.max.wait.ms passed.
Real logs in tmp_path, a fake scheduler (its clock), a fake reader whose futures the test completes."""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path
from types import SimpleNamespace

from odradek.log import FetchIsolation, Log, LogConfig
from odradek.protocol import errors
from odradek.protocol.records import build_batch
from odradek.replication.delayed_fetch import FetchParams, LogReadResult, RemoteFetchInfo, RemoteReadResult
from odradek.replication.delayed_remote_fetch import DelayedRemoteFetch
from odradek.replication.partition import Partition
from odradek.server.fetch_session import CachedPartition
from odradek.server.replica_manager import ReplicaManager

from ..fake_scheduler import FakeScheduler

NOW = 1_700_000_000_000
TP = ("t", 0)
BATCH = build_batch([(None, b"v" * 100) for _ in range(10)], timestamp=NOW)
TIERED = LogConfig(segment_bytes=len(BATCH) * 2, retention_ms=-1, remote_storage_enable=True,
                   local_retention_bytes=len(BATCH) * 2, file_delete_delay_ms=0)


class _Reader:
    def __init__(self) -> None:
        self.asked: list[tuple[RemoteFetchInfo, concurrent.futures.Future[RemoteReadResult]]] = []
        self.throttle_ms = 0  # the remote fetch quota's throttle time (KIP-956)

    def read_async(self, info: RemoteFetchInfo, plog: Log) -> concurrent.futures.Future[RemoteReadResult]:
        fut: concurrent.futures.Future[RemoteReadResult] = concurrent.futures.Future()
        self.asked.append((info, fut))
        return fut

    def fetch_max_wait_ms(self) -> int:
        return 500

    def fetch_throttle_time_ms(self) -> int:
        return self.throttle_ms


class _Logs:
    def __init__(self, plog: Log) -> None:
        self.plog = plog

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.plog if (topic, partition) == TP else None


def _setup(tmp_path: Path) -> tuple[ReplicaManager, Log, FakeScheduler, _Reader]:
    sched = FakeScheduler(NOW)
    plog = Log.create(tmp_path, "t", 0, TIERED, time_ms=NOW)
    topics = SimpleNamespace(get=lambda n: SimpleNamespace(name="t", topic_id=uuid.uuid4(), partitions=[None])
                             if n == "t" else None)
    rm = ReplicaManager(0, _Logs(plog), topics, lambda: sched.now_ms, scheduler=sched)  # type: ignore[arg-type]
    part = Partition("t", 0, [0], 0, 1, [0], 0, 1)
    rm.partitions[TP] = part
    rm.make_leader(part, plog, NOW)
    for _ in range(10):
        rm.append("t", 0, BATCH, NOW, acks=1)
    plog.highest_offset_in_remote_storage = 79  # the closed segments are in the remote tier
    plog.delete_old_segments(NOW)
    assert (plog.log_start_offset, plog.local_log_start_offset) == (0, 80)
    reader = _Reader()
    rm.remote_reader = reader
    return rm, plog, sched, reader


def _at(offset: int) -> list[tuple[tuple[str, int], CachedPartition]]:
    return [(TP, CachedPartition(offset, 1 << 20, -1))]


def _answer(op: DelayedRemoteFetch) -> LogReadResult:
    got: list[LogReadResult] = []
    op.then(lambda r, e: got.append(r))
    return got[0] if got else op.response  # type: ignore[return-value]


def test_a_fetch_below_the_local_start_waits_for_the_remote_read(tmp_path: Path) -> None:
    rm, _plog, sched, reader = _setup(tmp_path)
    op = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(op, DelayedRemoteFetch) and not op.completed
    (info, fut), = reader.asked
    assert (info.fetch_offset, info.min_one_message) == (10, True)
    assert info.isolation is FetchIsolation.HIGH_WATERMARK
    fut.set_result(RemoteReadResult(b"remote-bytes"))
    sched.run_soon()  # the reader's completion wakes the loop, which completes the fetch
    assert op.completed
    read = _answer(op)
    (_, _, pr), = read.partitions
    assert pr.error_code == errors.NONE and list(pr.records) == [b"remote-bytes"] and pr.records_size == 12
    assert read.bytes == 12 and pr.log_start_offset == 0


def test_the_local_tail_is_read_locally(tmp_path: Path) -> None:
    rm, _plog, _sched, reader = _setup(tmp_path)
    read = rm.fetch(FetchParams(max_bytes=1 << 20), _at(80))
    assert isinstance(read, LogReadResult) and read.bytes > 0 and not reader.asked


def test_a_slow_remote_read_is_answered_without_its_records(tmp_path: Path) -> None:
    rm, _plog, sched, reader = _setup(tmp_path)
    op = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(op, DelayedRemoteFetch)
    sched.advance(499)
    assert not op.completed
    sched.advance(1)  # remote.fetch.max.wait.ms
    assert op.completed
    (_, fut), = reader.asked
    assert fut.cancelled()
    (_, _, pr), = _answer(op).partitions
    assert pr.error_code == errors.NONE and pr.records_size == 0


def test_a_failed_remote_read_answers_an_error(tmp_path: Path) -> None:
    rm, _plog, sched, reader = _setup(tmp_path)
    op = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(op, DelayedRemoteFetch)
    reader.asked[0][1].set_exception(OSError("the store is gone"))
    sched.run_soon()
    read = _answer(op)
    assert read.has_error and read.partitions[0][2].error_code == errors.UNKNOWN_SERVER_ERROR


def test_followers_and_offsets_below_the_log_start_are_not_read_remotely(tmp_path: Path) -> None:
    rm, plog, _sched, reader = _setup(tmp_path)
    # a follower below the local log start builds its state from the remote tier (Kafka's
    # OffsetMovedToTieredStorageException): it is never served remote records
    follower = rm.read("t", 0, 10, 1 << 20, FetchIsolation.LOG_END, True)
    assert follower[0] == errors.OFFSET_MOVED_TO_TIERED_STORAGE
    plog.advance_log_start_offset(20)
    consumer = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(consumer, LogReadResult) and consumer.partitions[0][2].error_code == errors.OFFSET_OUT_OF_RANGE
    assert not reader.asked


