"""ListOffsets by timestamp on a tiered partition (the handler, a real ReplicaManager over a real tiered log):
the lookup goes to the remote reader and the request waits in the purgatory (Kafka's DelayedRemoteListOffsets)
for it: a found record is answered; nothing found in the remote tier, the local log from its local log start
(Kafka's RemoteLogOffsetReader); the request's TimeoutMs (v10+) or remote.list.offsets.request.timeout.ms
passing first answers REQUEST_TIMED_OUT and cancels the lookup; a store failure UNKNOWN_SERVER_ERROR, metadata
still being read REPLICA_NOT_AVAILABLE. A fake scheduler is the purgatory's clock; a fake reader's futures are
completed by the test."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.config import BrokerConfig
from odradek.log import Log, LogConfig
from odradek.protocol import errors
from odradek.protocol.codec import request_class, response_module
from odradek.protocol.records import build_batch
from odradek.replication.partition import Partition
from odradek.server.handlers import list_offsets
from odradek.server.replica_manager import ReplicaManager
from odradek.tiered.metadata_cache import RemoteMetadataNotReadyError
from odradek.tiered.plan import TimestampAndOffset
from odradek.tiered.storage import RemoteStorageError

from ..fake_scheduler import FakeScheduler

NOW = 1_700_000_000_000
TP = ("t", 0)
BATCH = build_batch([(None, b"v" * 100) for _ in range(10)], timestamp=NOW)
TIERED = LogConfig(segment_bytes=len(BATCH) * 2, retention_ms=-1, remote_storage_enable=True,
                   local_retention_bytes=len(BATCH) * 2, file_delete_delay_ms=0)


class _Reader:
    def __init__(self) -> None:
        self.asked: list[tuple[int, int, concurrent.futures.Future[TimestampAndOffset | None]]] = []

    def find_offset_by_timestamp(
        self, plog: Log, timestamp: int, starting_offset: int,
    ) -> concurrent.futures.Future[TimestampAndOffset | None]:
        fut: concurrent.futures.Future[TimestampAndOffset | None] = concurrent.futures.Future()
        self.asked.append((timestamp, starting_offset, fut))
        return fut


class _Logs:
    def __init__(self, plog: Log) -> None:
        self.plog = plog

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.plog if (topic, partition) == TP else None


def _setup(tmp_path: Path) -> tuple[Any, Log, FakeScheduler, _Reader]:
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
    rm.remote_reader = reader  # type: ignore[assignment]
    services = SimpleNamespace(topics=topics, replica_manager=rm,
                               config=BrokerConfig({"remote.list.offsets.request.timeout.ms": "30000"}))
    return services, plog, sched, reader


def _ask(services: Any, timestamp: int, version: int = 11, timeout_ms: int | None = None) -> Any:
    req_cls = request_class(2, version)
    lo = __import__(req_cls.__module__, fromlist=["ListOffsetsTopic"])
    fields: dict[str, Any] = {"replica_id": -1, "isolation_level": 0, "topics": (lo.ListOffsetsTopic(
        name="t", partitions=(lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                      timestamp=timestamp),)),)}
    if version >= 10:
        fields["timeout"] = datetime.timedelta(milliseconds=timeout_ms or 0)
    ctx = SimpleNamespace(services=services, api_version=version, response_module=response_module(2, version),
                          permits=lambda *a: True)
    return list_offsets.handle(ctx, req_cls(**fields))  # type: ignore[arg-type]


def _part(resp: Any) -> tuple[int, int, int, int]:
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.timestamp), int(p.leader_epoch)


def test_a_timestamp_lookup_waits_for_the_remote_tier(tmp_path: Path) -> None:
    services, plog, sched, reader = _setup(tmp_path)

    async def run() -> None:
        fut = _ask(services, NOW - 1)
        assert isinstance(fut, asyncio.Future) and not fut.done()
        assert [(ts, start) for ts, start, _ in reader.asked] == [(NOW - 1, 0)]  # from the log start offset
        reader.asked[0][2].set_result(TimestampAndOffset(NOW, 25, 7))  # on a reader thread in the broker
        assert sched.run_soon() and fut.done()
        assert _part(fut.result()) == (errors.NONE, 25, NOW, 7)

        # nothing in the remote tier: the local log, from its local log start offset
        fut = _ask(services, NOW)
        reader.asked[-1][2].set_result(None)
        sched.run_soon()
        epoch = plog.leader_epoch_cache.latest_epoch
        assert _part(fut.result()) == (errors.NONE, 80, NOW, epoch)
        fut = _ask(services, NOW + 1)  # past every record
        reader.asked[-1][2].set_result(None)
        sched.run_soon()
        assert _part(fut.result()) == (errors.NONE, -1, -1, -1)

        # a store failure, and metadata still being read
        fut = _ask(services, NOW)
        reader.asked[-1][2].set_exception(RemoteStorageError("the store is away"))
        sched.run_soon()
        assert _part(fut.result())[0] == errors.UNKNOWN_SERVER_ERROR
        fut = _ask(services, NOW)
        reader.asked[-1][2].set_exception(RemoteMetadataNotReadyError("replaying"))
        sched.run_soon()
        assert _part(fut.result())[0] == errors.REPLICA_NOT_AVAILABLE

        # the special specs never wait (answered from the log), nor -3 (the local segments, as Kafka)
        assert _part(_ask(services, -4)) == (errors.NONE, 80, -1, epoch)
        assert _part(_ask(services, -5)) == (errors.NONE, 79, -1, epoch)
        assert _part(_ask(services, -6)) == (errors.NONE, 80, -1, epoch)
        assert _part(_ask(services, -5, version=8))[0] == errors.UNSUPPORTED_VERSION
        assert len(reader.asked) == 5

    asyncio.run(run())


def test_the_timeout_answers_request_timed_out(tmp_path: Path) -> None:
    services, _plog, sched, reader = _setup(tmp_path)

    async def run() -> None:
        fut = _ask(services, NOW, timeout_ms=1000)  # v10+: the request's own timeout
        sched.advance(999)
        assert not fut.done()
        sched.advance(1)
        assert _part(fut.result())[0] == errors.REQUEST_TIMED_OUT
        assert reader.asked[-1][2].cancelled()  # the lookup is dropped, as Kafka's onExpiration cancels it
        fut = _ask(services, NOW, version=9)  # no timeout in the request: remote.list.offsets.request.timeout.ms
        sched.advance(29_999)
        assert not fut.done()
        sched.advance(1)
        assert _part(fut.result())[0] == errors.REQUEST_TIMED_OUT

    asyncio.run(run())


def test_a_partition_asked_twice_and_the_specs_versions(tmp_path: Path) -> None:
    """Kafka's ReplicaManager.fetchOffset: a partition asked twice answers INVALID_REQUEST, once (its response is a
    map by partition); a spec below the version that brought it, or an unknown negative timestamp,
    UNSUPPORTED_VERSION (isListOffsetsTimestampUnsupported)."""
    services, _plog, _sched, _reader = _setup(tmp_path)
    req_cls = request_class(2, 11)
    lo = __import__(req_cls.__module__, fromlist=["ListOffsetsTopic"])
    part = lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    ctx = SimpleNamespace(services=services, api_version=11, response_module=response_module(2, 11),
                          permits=lambda *a: True)
    resp = list_offsets.handle(ctx, req_cls(replica_id=-1, isolation_level=0, timeout=datetime.timedelta(0),  # type: ignore[arg-type]
                                            topics=(lo.ListOffsetsTopic(name="t", partitions=(part, part)),)))
    assert [(p.partition_index, p.error_code, p.offset) for p in resp.topics[0].partitions] == [
        (0, errors.INVALID_REQUEST, -1)]
    assert list_offsets.spec_unsupported(-7, 11) and list_offsets.spec_unsupported(-6, 10)
    assert list_offsets.spec_unsupported(-3, 6) and not list_offsets.spec_unsupported(-3, 7)
    assert not list_offsets.spec_unsupported(-2, 1) and not list_offsets.spec_unsupported(1234, 1)
    assert _part(_ask(services, -7))[0] == errors.UNSUPPORTED_VERSION
