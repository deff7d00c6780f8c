"""KIP-73 replication quotas: Kafka's ReplicationQuotaManager and the leader side of the
ReplicaManager (a throttled follower outside the ISR gets no records over the quota)."""

from __future__ import annotations

from pathlib import Path

from odradek.log import LogConfig
from odradek.replication.delayed_fetch import FetchParams, LogReadResult
from odradek.replication.partition import Partition
from odradek.server.quota.replication import ALL, ReplicationQuotaManager, parse_throttled
from odradek.server.replica_manager import ReplicaManager

from ..fake_scheduler import FakeScheduler
from .test_replica_manager import LOG_END, NOW, TP, _at, _batch, _Broker


def test_parse_throttled_takes_this_brokers_partitions() -> None:
    assert parse_throttled("*", 3) == ALL
    assert parse_throttled("0:1,1:3,2:3,4:2", 3) == frozenset({1, 2})
    assert parse_throttled(["0:1", "5:3"], 3) == frozenset({5})
    assert parse_throttled("", 3) == frozenset()


def test_rate_over_the_bound_is_exceeded() -> None:
    clock = [NOW]
    configs = {"t": "0:0", "u": "*"}
    q = ReplicationQuotaManager(0, lambda: 1000, lambda t: configs.get(t, ""), lambda: clock[0], samples=2)
    assert q.is_throttled(("t", 0)) and not q.is_throttled(("t", 1)) and q.is_throttled(("u", 7))
    assert not q.is_throttled(("v", 0))
    q.record(900)  # 900 B over a 1 s window
    assert not q.is_quota_exceeded()
    q.record(200)
    assert q.is_quota_exceeded()
    clock[0] += 2500  # the samples age out
    assert not q.is_quota_exceeded()
    configs["t"] = "1:0"  # a changed config is parsed again
    assert not q.is_throttled(("t", 0)) and q.is_throttled(("t", 1))


def _setup(tmp_path: Path, isr: list[int], bound: int) -> tuple[ReplicaManager, ReplicationQuotaManager]:
    sched = FakeScheduler(NOW)
    broker = _Broker(tmp_path, sched, LogConfig())
    quota = ReplicationQuotaManager(0, lambda: bound, lambda t: "*", broker.now_ms, samples=2)
    rm = ReplicaManager(0, broker, broker.topics, broker.now_ms, scheduler=sched,  # type: ignore[arg-type]
                        isr_writer=broker, leader_quota=quota)  # type: ignore[arg-type]
    part = Partition("t", 0, [0, 1], 0, 1, list(isr), 0, 1)
    rm.partitions[TP] = part
    rm.make_leader(part, broker.logs[TP], NOW)
    for _ in range(20):
        rm.append("t", 0, _batch(10), NOW, acks=1)
    return rm, quota


def test_a_follower_outside_the_isr_is_held_back_over_the_quota(tmp_path: Path) -> None:
    rm, quota = _setup(tmp_path, [0], bound=1000)
    first = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0, 1 << 20))
    assert isinstance(first, LogReadResult) and first.bytes > 1000
    rm.record_leader_replication(first)
    assert quota.is_quota_exceeded()
    held = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0, 1 << 20))
    assert isinstance(held, LogReadResult) and held.bytes == 0 and not held.has_error
    # a consumer is not a follower: never held by a replication quota
    consumer = rm.fetch(FetchParams(), _at(0, 1 << 20))
    assert isinstance(consumer, LogReadResult) and consumer.bytes == first.bytes


def test_a_follower_in_the_isr_is_never_held_back(tmp_path: Path) -> None:
    rm, quota = _setup(tmp_path, [0, 1], bound=1000)
    first = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0, 1 << 20))
    assert isinstance(first, LogReadResult)
    rm.record_leader_replication(first)  # its bytes count against the quota all the same
    assert quota.is_quota_exceeded()
    again = rm.fetch(FetchParams(replica_id=1, isolation=LOG_END), _at(0, 1 << 20))
    assert isinstance(again, LogReadResult) and again.bytes == first.bytes
