"""SharePartitionManager and ShareSessionCache on a fake clock: share sessions and their epochs, acquisition and
lock expiry, acknowledgements persisted (through the share coordinator's own shard) before they are committed, a
failed write rolled back, a restart reading the persisted state, and a waiting ShareFetch woken by an append."""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from odradek.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AutoOffsetReset,
    SharePartitionConfig,
)
from odradek.coordinator.share.share_state import (
    PartitionResult,
    ShareCoordinatorShard,
    SharePartitionKey,
    WriteStateRequest,
)
from odradek.log.fetch_isolation import FetchIsolation
from odradek.log.file_records import FetchData
from odradek.protocol import errors
from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.records import build_batch
from odradek.purgatory import DelayedOperationPurgatory
from odradek.server.share_manager import FINAL_EPOCH, SharePartitionManager, ShareSessionCache, batch_bounds

TOPIC = "t"
TID = uuid.UUID(int=7)
TP = (TID, 0)
KEY = ("g", TID, 0)
LOCK_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now = 5_000_000

    def __call__(self) -> int:
        return self.now


class FakeLog:
    """A partition's batches in a file (one record each unless told), read as the replica manager reads them."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp()
        os.close(fd)
        self.file = open(self.path, "r+b")  # noqa: SIM115
        self.batches: list[tuple[int, int, int, int]] = []  # base, last, position, size
        self.log_start_offset = 0
        self.high_watermark = 0

    def append(self, n: int = 1) -> None:
        base = self.high_watermark
        data = build_batch([(None, f"v{base + i}".encode()) for i in range(n)], base_offset=base)
        self.file.seek(0, os.SEEK_END)
        pos = self.file.tell()
        self.file.write(data)
        self.file.flush()
        self.batches.append((base, base + n - 1, pos, len(data)))
        self.high_watermark = base + n

    def fetch_offset_by_timestamp(self, _ts: int) -> tuple[int, int] | None:
        return None

    def read(self, offset: int, max_bytes: int) -> FetchData:
        regions = []
        size = 0
        for _base, last, pos, n in self.batches:
            if last < offset:
                continue
            if size and size + n > max_bytes:
                break
            regions.append(FileRegion(self.file, pos, n))
            size += n
        return FetchData(regions, size, offset)


class FakeReplicas:
    def __init__(self, plog: FakeLog) -> None:
        self.plog = plog
        self.fetch_purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory("fetch")

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, isolation: FetchIsolation,
             min_one: bool) -> tuple[int, Any, Any]:
        if offset < self.plog.log_start_offset or offset > self.plog.high_watermark:
            return errors.OFFSET_OUT_OF_RANGE, self.plog, None
        return errors.NONE, self.plog, self.plog.read(offset, max_bytes)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return 0

    def get_log(self, topic: str, partition: int) -> FakeLog:
        return self.plog


class ShardPersister:
    """The persister over the share coordinator's own shard (what the runtime appends is replayed at once);
    ``fail_writes`` answers writes with an error instead."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.shard = ShareCoordinatorShard(lambda _t: 1, clock)
        self.fail_writes = 0
        self.writes = 0

    def write_state(self, g: str, t: uuid.UUID, p: int, write: Any, done: Callable[[PartitionResult], None]) -> None:
        if self.fail_writes:
            self.fail_writes -= 1
            done(PartitionResult(error_code=errors.COORDINATOR_NOT_AVAILABLE))
            return
        self.writes += 1
        req = WriteStateRequest(SharePartitionKey(g, t, p), write.state_epoch, write.leader_epoch, write.start_offset,
                                write.batches, write.delivery_complete_count)
        done(self.shard.apply(self.shard.write_state(req)))

    def read_state(self, g: str, t: uuid.UUID, p: int, leader_epoch: int, done: Callable[[PartitionResult], None]) -> None:
        done(self.shard.apply(self.shard.read_state(SharePartitionKey(g, t, p), leader_epoch)))

    def initialize_state(self, g: str, t: uuid.UUID, p: int, state_epoch: int, start_offset: int,
                         done: Callable[[PartitionResult], None]) -> None:
        done(self.shard.apply(self.shard.initialize_state(SharePartitionKey(g, t, p), state_epoch, start_offset)))


def make_manager(plog: FakeLog, persister: ShardPersister, clock: Clock, max_sessions: int = 10) -> SharePartitionManager:
    return SharePartitionManager(FakeReplicas(plog), lambda t: TOPIC if t == TID else None, persister, clock,
                                 lambda _g: SharePartitionConfig(record_lock_duration_ms=LOCK_MS),
                                 max_sessions=max_sessions)


@pytest.fixture
def env() -> tuple[FakeLog, ShardPersister, Clock]:
    clock = Clock()
    return FakeLog(), ShardPersister(clock), clock


def fetch(m: SharePartitionManager, member: str, epoch: int, acks: dict[Any, list[AcknowledgementBatch]] | None = None,
          add: tuple[Any, ...] = (TP,), wait_ms: int = 0, max_records: int = 100) -> Any:
    return asyncio.run(_fetch(m, member, epoch, acks, add, wait_ms, max_records))


async def _fetch(m: SharePartitionManager, member: str, epoch: int, acks: Any, add: Any, wait_ms: int,
                 max_records: int) -> Any:
    return await m.fetch("g", member, epoch, add, (), acks or {}, wait_ms, 1 << 20, max_records, 0)


def acquired(answer: Any) -> list[tuple[int, int, int]]:
    pa = answer.partitions.get(TP)
    return [] if pa is None else [(a.first_offset, a.last_offset, a.delivery_count) for a in pa.acquired]


def test_session_cache_epochs_and_limit() -> None:
    cache = ShareSessionCache(max_sessions=1)
    assert cache.check("g", "m", 1) == (errors.SHARE_SESSION_NOT_FOUND, None)
    s = cache.open("g", "m")
    assert s is not None and s.epoch == 1
    assert cache.check("g", "m", 2)[0] == errors.INVALID_SHARE_SESSION_EPOCH
    assert cache.check("g", "m", 1) == (errors.NONE, s) and cache.check("g", "m", FINAL_EPOCH) == (errors.NONE, s)
    assert cache.open("g", "other") is None  # group.share.max.share.sessions
    assert cache.open("g", "m") is not None  # the member's own session is replaced


def test_batch_bounds_reads_whole_batches_only() -> None:
    a = build_batch([(None, b"x"), (None, b"y")], base_offset=5)
    b = build_batch([(None, b"z")], base_offset=7)
    assert batch_bounds(a + b) == [(5, 6), (7, 7)]
    assert batch_bounds(a + b[:-1]) == [(5, 6)]


def test_fetch_sessions_and_locks(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock, max_sessions=2)
    assert acquired(fetch(m, "a", 0)) == []  # initializes the share-partition at the log end (latest)
    plog.append(3)
    plog.append(2)
    assert fetch(m, "a", 3).error_code == errors.INVALID_SHARE_SESSION_EPOCH
    assert fetch(m, "nobody", 1).error_code == errors.SHARE_SESSION_NOT_FOUND
    first = fetch(m, "a", 1, max_records=3)
    assert acquired(first) == [(0, 2, 1)] and first.lock_timeout_ms == LOCK_MS
    assert first.partitions[TP].records  # the batches themselves
    assert acquired(fetch(m, "b", 0)) == [(3, 4, 1)]
    assert acquired(fetch(m, "b", 1)) == []  # everything is locked
    assert fetch(m, "c", 0).error_code == errors.SHARE_SESSION_LIMIT_REACHED
    bad = fetch(m, "b", 0, acks={TP: [AcknowledgementBatch(0, 0, (1,))]})
    assert bad.error_code == errors.INVALID_REQUEST  # acknowledgements in an initial fetch
    clock.now += LOCK_MS
    m.expire_locks(KEY)
    assert acquired(fetch(m, "b", 2)) == [(0, 4, 2)]
    # acknowledging records b does not hold: INVALID_RECORD_STATE, nothing changes
    wrong = fetch(m, "a", 2, acks={TP: [AcknowledgementBatch(0, 4, (1,))]})
    assert wrong.partitions[TP].acknowledge_error_code == errors.INVALID_RECORD_STATE


def test_acknowledgements_are_persisted_before_they_count(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    fetch(m, "a", 0)
    for _ in range(4):
        plog.append(1)
    assert acquired(fetch(m, "a", 1)) == [(0, 3, 1)]
    persister.fail_writes = 1
    failed = fetch(m, "a", 2, acks={TP: [AcknowledgementBatch(0, 1, (1,))]}, add=())
    assert failed.partitions[TP].acknowledge_error_code == errors.COORDINATOR_NOT_AVAILABLE
    sp = m.partitions[KEY]
    assert sp.offset_state(0) is not None and sp.offset_state(0)[2] == "a"  # rolled back: still a's
    ok = fetch(m, "a", 3, acks={TP: [AcknowledgementBatch(0, 1, (1,)), AcknowledgementBatch(2, 2, (2,))]}, add=())
    assert ok.partitions[TP].acknowledge_error_code == errors.NONE
    assert sp.start_offset == 2
    # what the coordinator holds: the write carried the start offset of before the commit (the next one carries
    # the new one, as in Kafka) and the acknowledged and released offsets
    state = persister.shard.states[SharePartitionKey("g", TID, 0)]
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] \
        == [(0, 1, 2, 1), (2, 2, 0, 1)]
    # a broker restart: a new manager reads the persisted state; 2 is delivered again (released), 3 too (it
    # was acquired, never persisted), 0 and 1 never
    m2 = make_manager(plog, persister, clock)
    assert acquired(fetch(m2, "b", 0)) == [(2, 2, 2), (3, 3, 1)]


def test_closing_the_session_or_timing_out_releases(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    fetch(m, "a", 0)
    plog.append(2)
    assert acquired(fetch(m, "a", 1)) == [(0, 1, 1)]
    closed = fetch(m, "a", FINAL_EPOCH, acks={TP: [AcknowledgementBatch(0, 0, (1,))]}, add=())
    assert closed.partitions[TP].acknowledge_error_code == errors.NONE and acquired(closed) == []
    assert m.sessions.get("g", "a") is None
    # 1 was fetched, never delivered (Kafka 4.4 lowers the count again on a session's release)
    assert acquired(fetch(m, "b", 0)) == [(1, 1, 1)]

    async def expire() -> None:
        m.member_removed("g", "b", True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(expire())
    assert m.sessions.get("g", "b") is None
    assert acquired(fetch(m, "c", 0)) == [(1, 1, 1)]
    clock.now += 60_000  # a lock timeout counts the delivery
    m.expire_locks(KEY)
    assert acquired(fetch(m, "d", 0)) == [(1, 1, 2)]


def test_a_waiting_fetch_is_woken_by_an_append(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    fetch(m, "a", 0)

    async def run() -> Any:
        task = asyncio.get_running_loop().create_task(_fetch(m, "a", 1, None, (), 30_000, 100))
        await asyncio.sleep(0.01)
        assert not task.done()
        plog.append(1)
        m.replicas.fetch_purgatory.check_and_complete((TOPIC, 0))  # what ReplicaManager.notify does
        return await asyncio.wait_for(task, 5)

    assert acquired(asyncio.run(run())) == [(0, 0, 1)]


def test_a_new_leader_epoch_drops_the_share_partition(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    fetch(m, "a", 0)
    plog.append(1)
    assert acquired(fetch(m, "a", 1)) == [(0, 0, 1)]
    m.on_leadership(TOPIC, 0, True)  # same epoch (an ISR change): the locks stay
    assert KEY in m.partitions and acquired(fetch(m, "b", 0)) == []
    m.on_leadership(TOPIC, 0, False)  # no longer the leader: fenced and dropped
    assert KEY not in m.partitions


def test_records_are_file_regions_of_the_acquired_batches_only(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    fetch(m, "a", 0)
    for _ in range(3):
        plog.append(2)
    r = fetch(m, "a", 1, max_records=1)  # soft limit: the whole first batch
    pa = r.partitions[TP]
    assert acquired(r) == [(0, 1, 1)]
    first_batch = plog.batches[0]
    assert pa.records_size == first_batch[3]
    assert [(reg.position, reg.length) for reg in pa.records] == [(first_batch[2], first_batch[3])]
    assert all(reg.file is plog.file for reg in pa.records)  # the log's file: sent with sendfile, not copied
    r2 = fetch(m, "a", 2, max_records=10)
    assert acquired(r2) == [(2, 5, 1)]
    assert r2.partitions[TP].records_size == plog.batches[1][3] + plog.batches[2][3]
    assert len(r2.partitions[TP].records) == 1  # adjacent batches as one region


def test_read_committed_archives_aborted_batches(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    from odradek.log.txn_index import AbortedTxn
    from odradek.server.share_manager import BatchSpan, aborted_ranges

    spans = [BatchSpan(0, 1, None, 0, 0, 7, True, False), BatchSpan(2, 2, None, 0, 0, 8, False, False),
             BatchSpan(3, 3, None, 0, 0, 7, True, True),  # 7's abort marker
             BatchSpan(4, 5, None, 0, 0, 7, True, False)]  # 7's next transaction, committed
    assert aborted_ranges(spans, [AbortedTxn(7, 0, 3, 4)]) == [(0, 1)]

    plog, persister, clock = env
    aborted_log = [AbortedTxn(7, 0, 1, 2)]
    plog.collect_aborted_transactions = lambda start, upper: aborted_log  # type: ignore[attr-defined]
    m = SharePartitionManager(FakeReplicas(plog), lambda t: TOPIC if t == TID else None, persister, clock,
                              lambda _g: SharePartitionConfig(record_lock_duration_ms=LOCK_MS),
                              reset=lambda _g: AutoOffsetReset("earliest"),
                              isolation=lambda _g: FetchIsolation.TXN_COMMITTED)
    data = build_batch([(None, b"a"), (None, b"b")], base_offset=0, producer_id=7, producer_epoch=0,
                       base_sequence=0, transactional=True)
    plog.file.write(data)
    plog.file.flush()
    plog.batches.append((0, 1, 0, len(data)))
    plog.high_watermark = 2
    plog.append(1)  # offset 2: not transactional
    assert acquired(fetch(m, "a", 0)) == [(2, 2, 1)]  # earliest, without the aborted transaction's records
    sp = m.partitions[KEY]
    assert [sp.offset_state(o) for o in (0, 1)] == [None, None] and sp.start_offset == 2  # archived, passed


def test_a_closed_connection_ends_its_session_and_releases(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)

    async def run() -> tuple[Any, Any]:
        await _fetch(m, "a", 0, None, (TP,), 0, 100)
        plog.append(2)
        first = await _fetch(m, "a", 1, None, (), 0, 100)
        watch = m.watch_session("g", "a")
        assert watch is not None
        ended, closed = watch
        closed()  # the connection closed
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert ended.done() and m.sessions.get("g", "a") is None
        return first, await _fetch(m, "b", 0, None, (TP,), 0, 100)

    first, other = asyncio.run(run())
    # released at once, not after the lock, and not counted as a delivery
    assert acquired(first) == [(0, 1, 1)] and acquired(other) == [(0, 1, 1)]

    async def replaced() -> bool:
        await _fetch(m, "c", 0, None, (TP,), 0, 100)
        watch = m.watch_session("g", "c")
        assert watch is not None
        await _fetch(m, "c", 0, None, (TP,), 0, 100)  # a new session: the old connection's watch ends
        return watch[0].done() and m.sessions.get("g", "c") is not None

    assert asyncio.run(replaced())


def test_concurrent_first_fetches_initialize_once(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    plog, persister, clock = env
    plog.append(1)
    inits: list[int] = []
    real = persister.initialize_state

    def counting(*args: Any) -> None:
        inits.append(1)
        real(*args)

    persister.initialize_state = counting  # type: ignore[method-assign]
    m = SharePartitionManager(FakeReplicas(plog), lambda t: TOPIC if t == TID else None, persister, clock,
                              lambda _g: SharePartitionConfig(record_lock_duration_ms=LOCK_MS),
                              reset=lambda _g: AutoOffsetReset("earliest"))

    async def run() -> list[Any]:
        return list(await asyncio.gather(*(_fetch(m, member, 0, None, (TP,), 0, 100) for member in ("a", "b", "c"))))

    answers = asyncio.run(run())
    assert inits == [1]
    assert sorted(r for a in answers for r in acquired(a)) == [(0, 0, 1)]  # one member got it, once


def test_the_manager_counts_kafkas_share_metrics(env: tuple[FakeLog, ShardPersister, Clock]) -> None:
    """ShareGroupMetrics and the share meters of BrokerTopicMetrics as Kafka's SharePartitionManager marks them:
    records counted once their acknowledgement is applied (a failed write counts none and fails the topic's
    acknowledgement), acknowledgements once per topic whether carried by a ShareFetch or a ShareAcknowledge, a
    share-partition's load once, with the time it took on the manager's clock."""
    plog, persister, clock = env
    m = make_manager(plog, persister, clock)
    real_read = persister.read_state

    def slow_read(*args: Any) -> None:  # each read of the persisted state takes 7 ms
        clock.now += 7
        real_read(*args)

    persister.read_state = slow_read  # type: ignore[method-assign]
    fetch(m, "a", 0)
    s = m.stats
    # read, initialized (never was), read again: one load of 14 ms
    assert (s.partition_load.count, s.partition_load.max_ms) == (1, 14.0)
    for _ in range(6):
        plog.append(1)
    assert acquired(fetch(m, "a", 1)) == [(0, 5, 1)]
    persister.fail_writes = 1
    fetch(m, "a", 2, acks={TP: [AcknowledgementBatch(0, 1, (1,))]}, add=())
    assert s.record_acks == {"Accept": 0, "Release": 0, "Reject": 0, "Renew": 0}
    assert (s.ack_requests, s.failed_ack_requests) == ({TOPIC: 1}, {TOPIC: 1})
    fetch(m, "a", 3, acks={TP: [AcknowledgementBatch(0, 2, (1,)), AcknowledgementBatch(3, 4, (2, 3))]}, add=())
    answer = asyncio.run(m.acknowledge("g", "a", 4, {TP: [AcknowledgementBatch(5, 5, (3,))]}))
    assert answer.partitions[TP].acknowledge_error_code == errors.NONE
    assert s.record_acks == {"Accept": 3, "Release": 1, "Reject": 2, "Renew": 0}
    assert (s.ack_requests, s.failed_ack_requests) == ({TOPIC: 3}, {TOPIC: 1})
    assert s.fetch_requests == {TOPIC: 4} and s.failed_fetch_requests == {}  # epochs 0 to 3
    assert s.partition_load.count == 1
