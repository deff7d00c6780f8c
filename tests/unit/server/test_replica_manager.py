"""ReplicaManager without a socket or an event loop: real logs in tmp_path, a fake broker and a
fake scheduler (tests.unit.fake_scheduler). acks=all appends wait for the high watermark in the
produce purgatory; fetches are answered at once or parked in the fetch purgatory until
fetch.min.bytes or fetch.max.wait.ms; a follower's fetch moves the high watermark."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.log import FetchIsolation, Log, LogConfig
from odradek.protocol import errors
from odradek.protocol.records import build_batch
from odradek.replication.delayed_fetch import DelayedFetch, FetchParams, LogReadResult
from odradek.replication.delayed_produce import DelayedProduce
from odradek.replication.partition import Partition
from odradek.server.fetch_session import CachedPartition
from odradek.server.replica_manager import ReplicaManager

from ..fake_scheduler import FakeScheduler

NOW = 1_700_000_000_000
TP = ("t", 0)
LOG_END = FetchIsolation.LOG_END  # a follower's fetch (FetchIsolation.of with a replica id >= 0)


class _Topics:
    def __init__(self, partitions: int) -> None:
        self.meta = SimpleNamespace(name="t", topic_id=uuid.uuid4(), partitions=[None] * partitions)

    def get(self, name: str) -> Any:
        return self.meta if name == "t" else None


class _Broker:
    """The logs, the metadata cache and the ISR writer a ReplicaManager is given."""

    def __init__(self, tmp_path: Path, sched: FakeScheduler, config: LogConfig) -> None:
        self.node_id = 0
        self.validate_records = True
        self.sched = sched
        self.topics = _Topics(1)
        self.logs = {TP: Log.create(tmp_path, "t", 0, config, time_ms=NOW)}
        self.log_manager = self
        self.cluster = self
        self.isr_writes: list[tuple[list[int], Any]] = []

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def now_ms(self) -> int:
        return self.sched.now_ms

    def submit(self, part: Partition, new_isr: list[int], done: Any) -> None:  # the ISR writer
        self.isr_writes.append((new_isr, done))


def _setup(tmp_path: Path, replicas: list[int], isr: list[int], min_insync: int = 1) -> tuple[
    ReplicaManager, _Broker, FakeScheduler, Partition
]:
    sched = FakeScheduler(NOW)
    broker = _Broker(tmp_path, sched, LogConfig(min_insync_replicas=min_insync))
    rm = ReplicaManager(0, broker, broker.topics, broker.now_ms, scheduler=sched, isr_writer=broker)  # type: ignore[arg-type]
    part = Partition("t", 0, replicas, 0, 1, list(isr), 0, 1)
    rm.partitions[TP] = part
    rm.make_leader(part, broker.logs[TP], NOW)
    return rm, broker, sched, part


def _batch(n: int = 1) -> bytes:
    return build_batch([(None, b"v" * 20) for _ in range(n)], timestamp=NOW)


def _at(offset: int, max_bytes: int = 1 << 20) -> list[tuple[tuple[str, int], CachedPartition]]:
    return [(TP, CachedPartition(offset, max_bytes, -1))]



def _count_reads(rm: ReplicaManager) -> list[int]:
    """A list that gets an entry for every ``read_from_log`` call from now on."""
    reads: list[int] = []
    read_from_log = rm.read_from_log

    def counted(*args: Any, **kwargs: Any) -> LogReadResult:
        reads.append(1)
        return read_from_log(*args, **kwargs)

    rm.read_from_log = counted  # type: ignore[method-assign]
    return reads

def test_lone_leader_acks_all_is_answered_at_once(tmp_path: Path) -> None:
    rm, broker, _sched, _part = _setup(tmp_path, [0], [0])
    r = rm.append("t", 0, _batch(3), NOW, acks=-1)
    assert r.error_code == errors.NONE and r.base_offset == 0 and r.last_offset == 2
    assert broker.logs[TP].high_watermark == 3
    assert rm.wait_for_replication({TP: 3}, 1000) == {TP: errors.NONE}
    assert rm.produce_purgatory.delayed() == 0


def test_acks_all_waits_for_the_follower_to_move_the_high_watermark(tmp_path: Path) -> None:
    rm, broker, sched, part = _setup(tmp_path, [0, 1], [0, 1])
    plog = broker.logs[TP]
    r = rm.append("t", 0, _batch(2), NOW, acks=-1)
    assert r.error_code == errors.NONE and plog.log_end_offset == 2 and plog.high_watermark == 0
    op = rm.wait_for_replication({TP: 2}, 1000)
    assert isinstance(op, DelayedProduce) and rm.produce_purgatory.watched(TP) == 1
    # a consumer sees nothing above the high watermark yet; the follower reads to the log end
    consumer = rm.fetch(FetchParams(), _at(0))
    assert isinstance(consumer, LogReadResult) and consumer.bytes == 0
    follower = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0))
    assert isinstance(follower, LogReadResult) and follower.bytes > 0 and not op.completed
    # its next fetch, from offset 2, says it has both records: the high watermark moves
    rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(2))
    assert plog.high_watermark == 2 and part.leader_state is not None and part.leader_state.high_watermark == 2
    assert op.completed and op.response == {TP: errors.NONE}
    assert rm.produce_purgatory.delayed() == 0
    consumer = rm.fetch(FetchParams(), _at(0))
    assert isinstance(consumer, LogReadResult) and consumer.bytes == follower.bytes


def test_acks_all_times_out(tmp_path: Path) -> None:
    rm, _broker, sched, _part = _setup(tmp_path, [0, 1], [0, 1])
    rm.append("t", 0, _batch(), NOW, acks=-1)
    op = rm.wait_for_replication({TP: 1}, 500)
    assert isinstance(op, DelayedProduce)
    sched.advance(499)
    assert not op.completed
    sched.advance(1)
    assert op.response == {TP: errors.REQUEST_TIMED_OUT} and rm.produce_purgatory.delayed() == 0


def test_min_insync_and_lost_leadership(tmp_path: Path) -> None:
    rm, _broker, _sched, part = _setup(tmp_path, [0, 1], [0], min_insync=2)
    r = rm.append("t", 0, _batch(), NOW, acks=-1)
    assert r.error_code == errors.NOT_ENOUGH_REPLICAS
    part.isr = [0, 1]
    assert part.leader_state is not None
    part.leader_state.isr = [0, 1]
    assert rm.append("t", 0, _batch(), NOW, acks=-1).error_code == errors.NONE
    op = rm.wait_for_replication({TP: 1}, 1000)
    assert isinstance(op, DelayedProduce)
    rm.make_follower(part)  # the controller moved leadership away: whoever waits learns it
    assert op.response == {TP: errors.NOT_LEADER_OR_FOLLOWER}


def test_fetch_answered_at_once(tmp_path: Path) -> None:
    rm, _broker, _sched, _part = _setup(tmp_path, [0], [0])
    rm.append("t", 0, _batch(), NOW)
    # enough bytes for min_bytes
    read = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    assert isinstance(read, LogReadResult) and read.bytes > 0 and not read.has_error
    (_key, _cp, pr), = read.partitions
    assert pr.error_code == errors.NONE and pr.high_watermark == 1 and pr.records_size == read.bytes
    # no wait asked
    read = rm.fetch(FetchParams(max_wait_ms=0, min_bytes=1 << 20), _at(1))
    assert isinstance(read, LogReadResult) and read.bytes == 0
    # an error is answered at once
    read = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0) + [(("nope", 0), CachedPartition(0, 10, -1))])
    assert isinstance(read, LogReadResult) and read.has_error
    assert read.partitions[1][2].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    read = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1, topic_ids=True), [(("nope", 0), CachedPartition(0, 10, -1))])
    assert isinstance(read, LogReadResult) and read.partitions[0][2].error_code == errors.UNKNOWN_TOPIC_ID
    assert rm.fetch_purgatory.delayed() == 0


def test_fetch_waits_for_min_bytes(tmp_path: Path) -> None:
    rm, _broker, sched, _part = _setup(tmp_path, [0], [0])
    op = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    assert isinstance(op, DelayedFetch) and rm.fetch_purgatory.watched(TP) == 1
    rm.append("t", 0, _batch(), NOW)
    assert not op.completed  # checked after the current request batch, not inside the append
    assert sched.run_soon() == 1
    assert op.completed and op.response is not None and op.response.bytes > 0
    assert rm.fetch_purgatory.delayed() == 0
    # two appends in one batch wake a waiting fetch once
    big = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1 << 20), _at(1))
    assert isinstance(big, DelayedFetch)
    rm.append("t", 0, _batch(), NOW)
    rm.append("t", 0, _batch(), NOW)
    assert sched.run_soon() == 1 and not big.completed


def test_fetch_expires_with_what_there_is(tmp_path: Path) -> None:
    rm, _broker, sched, _part = _setup(tmp_path, [0], [0])
    rm.append("t", 0, _batch(), NOW)
    op = rm.fetch(FetchParams(max_wait_ms=300, min_bytes=1 << 20), _at(0))
    assert isinstance(op, DelayedFetch)
    sched.advance(299)
    assert not op.completed
    sched.advance(1)
    assert op.completed and op.response is not None and 0 < op.response.bytes < 1 << 20
    assert rm.fetch_purgatory.delayed() == 0


def test_follower_state_moves_on_the_first_read_only(tmp_path: Path) -> None:
    rm, broker, sched, part = _setup(tmp_path, [0, 1], [0, 1])
    rm.append("t", 0, _batch(), NOW)
    ls = part.leader_state
    assert ls is not None
    op = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END, max_wait_ms=500, min_bytes=1), _at(1))
    assert isinstance(op, DelayedFetch)  # caught up: nothing to read, it waits
    assert ls.followers[1].log_end_offset == 1 and ls.followers[1].last_fetch_ms == NOW
    assert broker.logs[TP].high_watermark == 1
    sched.advance(100)
    rm.append("t", 0, _batch(), NOW)
    sched.run_soon()
    assert op.completed and op.response is not None and op.response.bytes > 0
    # the completion re-read did not count as another fetch from offset 1
    assert ls.followers[1].last_fetch_ms == NOW and broker.logs[TP].high_watermark == 1


def test_leadership_change_answers_waiting_fetches(tmp_path: Path) -> None:
    rm, _broker, sched, part = _setup(tmp_path, [0], [0])
    op = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    assert isinstance(op, DelayedFetch)
    rm.make_follower(part)
    sched.run_soon()
    assert op.response is not None and op.response.partitions[0][2].error_code == errors.NOT_LEADER_OR_FOLLOWER


def test_shutdown_cancels_everything(tmp_path: Path) -> None:
    rm, _broker, sched, _part = _setup(tmp_path, [0, 1], [0, 1])
    fetch = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    rm.append("t", 0, _batch(), NOW, acks=-1)
    produce = rm.wait_for_replication({TP: 1}, 500)
    assert isinstance(fetch, DelayedFetch) and isinstance(produce, DelayedProduce)
    rm.cancel_waiters()
    assert rm.fetch_purgatory.delayed() == rm.produce_purgatory.delayed() == 0
    assert sched.pending_timers() == 0 and fetch.response is None and produce.response is None
    sched.run_soon()
    sched.advance(1000)


def test_a_consumer_fetch_waiting_on_an_acks_all_leader_is_not_read_until_the_high_watermark_moves(
    tmp_path: Path,
) -> None:
    """Kafka's DelayedFetch.tryComplete compares offsets: an append above the high watermark wakes the
    consumer's fetch, which finds its offset still at the high watermark without reading the log."""
    rm, broker, sched, _part = _setup(tmp_path, [0, 1], [0, 1])
    op = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    assert isinstance(op, DelayedFetch)
    reads = _count_reads(rm)
    rm.append("t", 0, _batch(2), NOW, acks=-1)
    sched.run_soon()
    assert not op.completed and reads == []  # woken, nothing below the high watermark: no read
    follower = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(2))  # the follower has both: the high watermark moves
    assert isinstance(follower, LogReadResult) and broker.logs[TP].high_watermark == 2
    sched.run_soon()
    assert op.completed and op.response is not None and op.response.bytes > 0


def test_nothing_to_read_leaves_every_other_case_to_the_read(tmp_path: Path) -> None:
    """Each case where read_from_log would read bytes or answer an error is not 'nothing'."""
    rm, broker, _sched, part = _setup(tmp_path, [0, 1], [0, 1])
    plog = broker.logs[TP]
    rm.append("t", 0, _batch(2), NOW, acks=-1)  # log end 2, high watermark 0

    def nothing(params: FetchParams, offset: int, epoch: int = -1, tp: tuple[str, int] = TP) -> bool:
        parts = [(tp, CachedPartition(offset, 1 << 20, epoch))]
        found = rm.nothing_to_read(params, parts)
        read = rm.read_from_log(params, parts, update_follower=False)
        assert not found or (read.bytes == 0 and not read.has_error)  # never wrong when it says nothing
        return found

    assert nothing(FetchParams(), 0)  # a consumer at the high watermark
    assert nothing(FetchParams(), 0, epoch=part.leader_epoch)
    assert not nothing(FetchParams(), 0, epoch=part.leader_epoch + 1)  # fenced / unknown epoch
    assert not nothing(FetchParams(), 1)  # past the high watermark: an error
    assert nothing(FetchParams(replica_id=1, isolation=LOG_END), 2)  # a follower at the log end
    assert not nothing(FetchParams(replica_id=1, isolation=LOG_END), 0)  # a follower with records to read
    assert not nothing(FetchParams(replica_id=7, isolation=LOG_END), 2)  # not one of the replicas
    assert not nothing(FetchParams(), 0, tp=("other", 0))  # unknown topic
    assert not nothing(FetchParams(), 0, tp=("t", 1))  # no such partition
    rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(2))  # the high watermark moves to 2
    assert plog.high_watermark == 2
    assert not nothing(FetchParams(), 0) and nothing(FetchParams(), 2)
    rm.make_follower(part)  # leadership moved away
    assert not nothing(FetchParams(), 2)


def test_a_fetch_with_nothing_to_read_is_parked_without_reading(tmp_path: Path) -> None:
    """A consumer at the high watermark and a follower at the log end wait without a read of their
    partitions; the follower's fetch offset still counts (its state, the high watermark)."""
    rm, broker, sched, part = _setup(tmp_path, [0, 1], [0, 1])
    rm.append("t", 0, _batch(2), NOW, acks=-1)
    reads = _count_reads(rm)
    consumer = rm.fetch(FetchParams(max_wait_ms=500, min_bytes=1), _at(0))
    follower = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END, max_wait_ms=500, min_bytes=1), _at(2))
    assert isinstance(consumer, DelayedFetch) and isinstance(follower, DelayedFetch) and reads == []
    ls = part.leader_state
    assert ls is not None and ls.followers[1].log_end_offset == 2 and broker.logs[TP].high_watermark == 2
    sched.run_soon()  # the high watermark moved: the consumer's fetch has its records now
    assert consumer.completed and consumer.response is not None and consumer.response.bytes > 0
    assert not follower.completed and len(reads) == 1
    # min_bytes 0 or no wait: answered at once, read
    assert isinstance(rm.fetch(FetchParams(max_wait_ms=500, min_bytes=0), _at(2)), LogReadResult)
    assert isinstance(rm.fetch(FetchParams(max_wait_ms=0, min_bytes=1), _at(2)), LogReadResult)


def test_isr_expiry_runs_on_its_own_clock_not_the_wall_clock(tmp_path: Path) -> None:
    # the broker gives ISR expiry the monotonic clock: with the wall clock (as Kafka stamps it), a
    # follower's caught-up time taken while the wall clock was 2 minutes ahead, which only ever grows,
    # kept that follower in the ISR 2 minutes after it stopped fetching, once the clock was set back
    sched = FakeScheduler(NOW)  # the monotonic clock
    wall = [NOW]
    broker = _Broker(tmp_path, sched, LogConfig(min_insync_replicas=1))
    rm = ReplicaManager(0, broker, broker.topics, lambda: wall[0], scheduler=sched, isr_writer=broker,  # type: ignore[arg-type]
                        lag_clock_ms=lambda: sched.now_ms)
    part = Partition("t", 0, [0, 1], 0, 1, [0, 1], 0, 1)
    rm.partitions[TP] = part
    rm.make_leader(part, broker.logs[TP], wall[0])
    wall[0] += 120_000  # the wall clock jumps 2 minutes ahead
    rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0))  # the follower is caught up
    rm.check_isr(rm.lag_clock_ms(), 3000)
    assert broker.isr_writes == []  # a jump of the wall clock is no lag
    wall[0] -= 120_000  # ... and back; the follower stops fetching
    sched.advance(3001)
    wall[0] += 3001
    rm.check_isr(rm.lag_clock_ms(), 3000)
    assert [isr for isr, _ in broker.isr_writes] == [[0]]  # out after replica.lag.time.max.ms, not 2 minutes


def test_each_isolation_bounds_the_read_and_the_wait(tmp_path: Path) -> None:
    """A consumer at read_committed (TXN_COMMITTED) reads to the last stable offset, gets the aborted
    transactions its data overlaps and waits there; one at read_uncommitted (HIGH_WATERMARK) reads to the high
    watermark; a follower (LOG_END) to the log end (Kafka's FetchIsolation in ReplicaManager.readFromLog and
    DelayedFetch.tryComplete)."""
    rm, broker, _sched, part = _setup(tmp_path, [0, 1], [0, 1])
    plog = broker.logs[TP]
    plain = _batch()
    txn = build_batch([(None, b"t" * 20)] * 2, timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0,
                      transactional=True)
    follower = FetchParams(replica_id=1, isolation=LOG_END)
    committed = FetchParams(isolation=FetchIsolation.TXN_COMMITTED)

    def read(params: FetchParams, offset: int) -> tuple[int, Any]:
        got = rm.fetch(params, _at(offset))
        assert isinstance(got, LogReadResult)
        (_, _, pr), = got.partitions
        return got.bytes, pr

    assert rm.append("t", 0, plain, NOW, acks=-1).error_code == errors.NONE  # 0
    assert rm.append("t", 0, txn, NOW, acks=-1, transactional=True).error_code == errors.NONE  # 1..2, open
    read(follower, 3)  # the follower has both: the high watermark moves to 3
    assert (plog.last_stable_offset, plog.high_watermark, plog.log_end_offset) == (1, 3, 3)
    size, pr = read(committed, 0)
    assert size == len(plain) and pr.last_stable_offset == 1 and list(pr.aborted_transactions) == []
    assert read(FetchParams(), 0)[0] == len(plain) + len(txn)
    assert rm.nothing_to_read(committed, _at(1)) and not rm.nothing_to_read(FetchParams(), _at(1))
    rm.append("t", 0, _batch(), NOW, acks=-1)  # 3, above the high watermark
    assert rm.nothing_to_read(FetchParams(), _at(3)) and not rm.nothing_to_read(follower, _at(3))
    assert read(FetchParams(), 3)[0] == 0 and read(follower, 3)[0] == len(_batch())
    plog.append_txn_marker(7, 0, 0, False, part.leader_epoch, NOW)  # 4: aborted
    read(follower, 5)  # the high watermark moves to 5, and the last stable offset with it
    assert (plog.last_stable_offset, plog.high_watermark) == (5, 5)
    size, pr = read(committed, 0)
    assert size == plog.active_segment.size and list(pr.aborted_transactions) == [(7, 1)]
