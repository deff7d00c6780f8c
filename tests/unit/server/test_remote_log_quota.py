"""KIP-956's copy and fetch quotas (server.quota.remote_log, Kafka's RLMQuotaManager over a SimpleRate) on a clock
the test sets, and the remote log manager and replica manager gated by them: a copy waits while the copy quota is
exceeded and starts once it is not; a fetch below the local log start starts no remote read while the fetch
quota is exceeded (the partition answered with no records and no error) and does once it is not."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from odradek.config import BrokerConfig
from odradek.replication.delayed_fetch import FetchParams, LogReadResult
from odradek.replication.delayed_remote_fetch import DelayedRemoteFetch
from odradek.server.quota.rate import SampledAvgMax, SimpleRate
from odradek.server.quota.remote_log import RLMQuotaManager, ThrottleTimeSensor
from odradek.server.remote_log_manager import RemoteLogManager
from odradek.tiered.metadata import RemoteLogSegmentMetadata

from .test_remote_fetch import _at, _setup
from .test_remote_log_manager import BATCH, NOW, _World


class _Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_simple_rate_counts_the_first_window_in_full() -> None:
    # Kafka's SimpleRate: over the time since the oldest sample, at least one window (Rate would stretch to 10)
    r = SimpleRate(11, 1000)
    r.record(1000.0, NOW)
    assert r.measure(NOW) == 1000.0
    assert r.measure(NOW + 4000) == 250.0
    assert r.measure(NOW + 11_000) == 0.0  # every sample expired


def test_avg_and_max_are_nan_until_a_value_and_after_it_expires() -> None:
    s = SampledAvgMax(2, 30_000)
    assert math.isnan(s.avg(NOW)) and math.isnan(s.max(NOW))
    s.record(100.0, NOW)
    s.record(300.0, NOW + 10)
    assert (s.avg(NOW + 10), s.max(NOW + 10)) == (200.0, 300.0)
    s.record(50.0, NOW + 30_000)  # the second sample
    assert (s.avg(NOW + 30_000), s.max(NOW + 30_000)) == (150.0, 300.0)
    assert (s.avg(NOW + 60_000), s.max(NOW + 60_000)) == (50.0, 50.0)  # the first expired
    assert math.isnan(s.avg(NOW + 90_000))


def test_throttle_time_is_kafkas_and_the_bound_is_read_at_each_check() -> None:
    clock = _Clock()
    bound = [100]
    q = RLMQuotaManager(lambda: bound[0], clock, samples=11, window_s=1)
    assert q.throttle_time_ms() == 0  # nothing recorded
    q.record(300)  # 300 B over one window: 300 B/s against 100
    assert q.throttle_time_ms() == 2000  # (300 - 100) / 100 * 1000 ms
    clock.now += 1000
    assert q.throttle_time_ms() == 2000  # 300 B over 1 s still
    clock.now += 1000
    assert q.throttle_time_ms() == 1000  # 150 B/s over 2 s: (150 - 100) / 100 * 2000
    clock.now += 1000
    assert q.throttle_time_ms() == 0  # 100 B/s
    clock.now -= 2000
    bound[0] = 1 << 62  # a dynamic update lifts it at once
    assert q.throttle_time_ms() == 0


def test_throttle_time_sensor() -> None:
    clock = _Clock()
    s = ThrottleTimeSensor(clock)
    s.record(1000)
    s.record(500)
    assert (s.avg(), s.max(), s.count) == (750.0, 1000.0, 2)


def _rlm(w: _World, copy_rate: int) -> RemoteLogManager:
    cfg = BrokerConfig({"remote.log.manager.copy.max.bytes.per.second": str(copy_rate)})
    return RemoteLogManager(cfg, 0, w.rm, w, w.topics, None, w.store, w.now_ms)  # type: ignore[arg-type]


async def _drain(rlm: RemoteLogManager) -> None:
    """The copies in flight done, and what each started when it ended (a few loop turns, no clock)."""
    for _ in range(3):
        while rlm.in_flight:
            await asyncio.gather(*rlm.in_flight)
            await asyncio.sleep(0)
        await asyncio.sleep(0)


def _started(w: _World) -> list[int]:
    return [r.start_offset for r in w.records() if isinstance(r, RemoteLogSegmentMetadata)]


def test_a_copy_waits_while_the_copy_quota_is_exceeded_and_resumes(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(6):
        w.rm.append("t", 0, BATCH, NOW, acks=1)
    seg = w.plog.segments[0].size
    assert [s.base_offset for s in w.plog.segments] == [0, 20, 40]

    async def run() -> None:
        rlm = _rlm(w, seg // 2)  # half a segment per second
        rlm.tick()  # the first copy passes (nothing measured yet), its bytes count as it starts
        await _drain(rlm)
        assert _started(w) == [0] and w.plog.highest_offset_in_remote_storage == 19
        # the finished copy started the next at once: the quota held it back, a recheck is due
        # (a segment over one window against half of it: (2b - b) / b * 1000 ms, give or take seg // 2's rounding)
        assert rlm.copy_throttle_time.count == 1 and abs(rlm.copy_throttle_time.max() - 1000) <= 2
        assert set(rlm._quota_rechecks) == {("t", 0)}
        rlm.tick()  # the task finds it still held (the clock has not moved)
        await _drain(rlm)
        assert _started(w) == [0] and rlm.copy_throttle_time.count >= 2  # (the recheck may have run too)
        w.now += 999
        rlm.tick()
        await _drain(rlm)
        assert _started(w) == [0]  # a segment over one window (SimpleRate): twice the bound still
        w.now += 1101  # 2.1 s on: a segment over 2.1 s, within the bound
        rlm.tick()
        await _drain(rlm)
        assert _started(w) == [0, 20] and w.plog.highest_offset_in_remote_storage == 39
        assert abs(rlm.copy_quota.measured() - 2 * seg / 2.1) < 1  # both segments' bytes counted
        rlm.shutdown()
        assert not rlm._quota_rechecks

    asyncio.run(run())


def test_the_recheck_resumes_the_copy_without_a_task(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(6):
        w.rm.append("t", 0, BATCH, NOW, acks=1)
    seg = w.plog.segments[0].size

    async def run() -> None:
        rlm = _rlm(w, seg * 3 // 4)  # the first segment over one window: a third over the bound (~333 ms)
        rlm.tick()
        await _drain(rlm)
        handle = rlm._quota_rechecks[("t", 0)]
        assert 0 < handle.when() - asyncio.get_running_loop().time() <= 1.0  # at most Kafka's quotaTimeout
        assert _started(w) == [0]
        w.now += 1500  # the quota is met again by the time the recheck runs
        await asyncio.sleep(handle.when() - asyncio.get_running_loop().time() + 0.01)
        await _drain(rlm)
        assert _started(w) == [0, 20]
        rlm.shutdown()

    asyncio.run(run())


def test_no_copy_quota_no_wait(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(6):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        rlm = w.manager()  # the default: Long.MAX_VALUE
        rlm.tick()
        await _drain(rlm)
        assert _started(w) == [0, 20] and rlm.copy_throttle_time.count == 0
        assert math.isnan(rlm.copy_throttle_time.avg())
        rlm.shutdown()

    asyncio.run(run())


def test_a_remote_fetch_is_not_started_while_the_fetch_quota_is_exceeded(tmp_path: Path) -> None:
    rm, _plog, _sched, reader = _setup(tmp_path)
    reader.throttle_ms = 800
    read = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(read, LogReadResult) and not reader.asked  # no remote read started
    (_, _, pr), = read.partitions
    assert pr.error_code == 0 and pr.records_size == 0 and not read.has_error
    assert pr.log_start_offset == 0 and pr.high_watermark == 100
    reader.throttle_ms = 0  # the quota met again: the client's next fetch reads the remote tier
    op = rm.fetch(FetchParams(max_bytes=1 << 20), _at(10))
    assert isinstance(op, DelayedRemoteFetch) and len(reader.asked) == 1


def test_the_fetch_quota_counts_remote_reads_and_records_throttles(tmp_path: Path) -> None:
    w = _World(tmp_path)
    for _ in range(6):
        w.rm.append("t", 0, BATCH, NOW, acks=1)

    async def run() -> None:
        cfg = BrokerConfig({"remote.log.manager.fetch.max.bytes.per.second": str(len(BATCH))})
        rlm = RemoteLogManager(cfg, 0, w.rm, w, w.topics, None, w.store, w.now_ms)  # type: ignore[arg-type]
        w.rm.remote_reader = rlm
        rlm.tick()
        await _drain(rlm)
        w.plog.delete_old_segments(w.now)
        assert w.plog.local_log_start_offset == 40
        assert rlm.fetch_throttle_time_ms() == 0
        op = w.rm.fetch(FetchParams(max_bytes=1 << 20), _at(0))
        assert isinstance(op, DelayedRemoteFetch)
        (info,) = op.remote
        assert info.future is not None
        got = await asyncio.wrap_future(info.future)
        assert len(got.records) == 2 * len(BATCH)
        # two batches read in one window against a bound of one batch a second: over the quota
        assert rlm.fetch_quota.measured() == 2 * len(BATCH)
        read = w.rm.fetch(FetchParams(max_bytes=1 << 20), _at(0))
        assert isinstance(read, LogReadResult) and read.bytes == 0
        assert rlm.fetch_throttle_time.count == 1 and rlm.fetch_throttle_time.max() == 1000.0
        w.now += 2000
        assert rlm.fetch_throttle_time_ms() == 0
        rlm.shutdown()

    asyncio.run(run())


def test_the_configs_are_kafkas_and_implemented() -> None:
    from odradek.config import BROKER_CONFIGS, CLUSTER_WIDE, READ_ONLY

    cfg = BrokerConfig({})
    for kind in ("copy", "fetch"):
        rate = BROKER_CONFIGS[f"remote.log.manager.{kind}.max.bytes.per.second"]
        assert rate.implemented and rate.dynamic == CLUSTER_WIDE  # Kafka's DynamicRemoteLogConfig
        assert cfg.get(rate.name) == 2**63 - 1  # Long.MAX_VALUE: no bound
        for name, default in ((f"remote.log.manager.{kind}.quota.window.num", 11),
                              (f"remote.log.manager.{kind}.quota.window.size.seconds", 1)):
            assert BROKER_CONFIGS[name].implemented and BROKER_CONFIGS[name].dynamic == READ_ONLY
            assert cfg.get(name) == default
