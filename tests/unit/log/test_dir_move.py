"""Moving a partition's log between log dirs (KIP-113, odradek.log.dir_move through the LogManager)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from odradek.log import LogConfig, LogManager

from .log_helpers import append, make_batch, read_batches


def _manager(dirs: list[Path]) -> LogManager:
    config = LogConfig(segment_bytes=200_000)
    return LogManager(dirs, lambda topic: config)


def _fill(mgr: LogManager, batches: int) -> None:
    lg = mgr.get_log("t", 0)
    assert lg is not None
    for _ in range(batches):
        append(lg, make_batch(10, value_size=1000))
    lg.update_high_watermark(lg.log_end_offset)


def test_move_copies_everything_appended_meanwhile_then_swaps(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = _manager([d1, d2])
    mgr.startup()
    mgr.get_or_create_log("t", 0)
    assert mgr.log_dir_of("t", 0) == d1
    _fill(mgr, 400)  # ~4 MB in ~20 segments: several copy rounds

    async def run() -> list[str]:
        assert mgr.start_move("t", 0, d2)
        assert not mgr.start_move("t", 0, d2)  # already moving there
        fut = mgr.future_of("t", 0)
        assert fut is not None
        names = [p.name for p in d2.iterdir()]
        for _ in range(2000):
            if mgr.future_of("t", 0) is None:
                break
            _fill(mgr, 2)  # writes go on while it copies
            await asyncio.sleep(0.001)
        return names

    names = asyncio.run(run())
    assert len(names) == 1 and re.fullmatch(r"t-0\.[0-9a-f]{32}-future", names[0]), names
    assert mgr.future_of("t", 0) is None
    lg = mgr.get_log("t", 0)
    assert lg is not None and lg.dir == d2 / "t-0" and mgr.log_dir_of("t", 0) == d2
    end = lg.log_end_offset
    assert end > 4000
    assert [p.name for p in d1.iterdir() if p.name.startswith("t-0")][0].endswith("-delete")
    batches = read_batches(lg, 0)
    assert sum(n for _b, n in batches) == end and batches[0][0] == 0
    _fill(mgr, 3)  # the moved log takes writes
    mgr.shutdown()
    assert not [p for p in d1.iterdir() if p.name.startswith("t-0")]  # the old directory is gone
    again = _manager([d1, d2])
    again.startup()
    lg = again.get_log("t", 0)
    assert lg is not None and again.log_dir_of("t", 0) == d2 and lg.log_end_offset == end + 30
    again.shutdown()


def test_no_move_to_the_current_dir_and_a_deleted_log_drops_its_future(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = _manager([d1, d2])
    mgr.startup()
    mgr.get_or_create_log("t", 0)
    _fill(mgr, 300)

    async def run() -> None:
        assert not mgr.start_move("t", 0, d1)
        assert mgr.start_move("t", 0, d2)
        assert any(p.name.endswith("-future") for p in d2.iterdir())
        mgr.delete_log("t", 0)
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert mgr.future_of("t", 0) is None
    assert list(d2.iterdir()) == []
    mgr.shutdown()


def test_shutdown_mid_move_resumes_on_start(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = _manager([d1, d2])
    mgr.startup()
    mgr.get_or_create_log("t", 0)
    _fill(mgr, 300)

    async def stop_mid_move() -> None:
        assert mgr.start_move("t", 0, d2)
        mgr.shutdown()  # before the copy task ran

    asyncio.run(stop_mid_move())
    assert any(p.name.endswith("-future") for p in d2.iterdir())

    async def resume() -> LogManager:
        again = _manager([d1, d2])
        again.startup()
        assert again.future_of("t", 0) is not None
        for _ in range(2000):
            if again.future_of("t", 0) is None:
                break
            await asyncio.sleep(0.005)
        return again

    again = asyncio.run(resume())
    lg = again.get_log("t", 0)
    assert lg is not None and again.log_dir_of("t", 0) == d2 and lg.log_end_offset == 3000
    again.shutdown()


def test_describe_log_dirs_shows_the_future_replica_and_alter_errors(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from odradek.protocol import codec, errors
    from odradek.server.handlers import alter_replica_log_dirs, describe_log_dirs

    d1, d2, d3 = tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"
    mgr = _manager([d1, d2, d3])
    mgr.startup()
    mgr.get_or_create_log("t", 0)
    _fill(mgr, 300)
    topics = {"t": SimpleNamespace(partitions=[0, 1]), "u": SimpleNamespace(partitions=[0])}
    # the handlers reach only these edges of the broker's services
    services = SimpleNamespace(log_manager=mgr, config=SimpleNamespace(log_dirs=[d1, d2, d3]), topics=topics)
    ctx = SimpleNamespace(services=services, response_module=codec.response_module(35, 4),
                          permits=lambda *_: True)  # no authorizer

    def described() -> set[tuple[str, int, bool]]:
        resp = describe_log_dirs.handle(ctx, SimpleNamespace(topics=None))
        return {(Path(r.log_dir).name, p.partition_index, p.is_future_key)
                for r in resp.results for t in r.topics for p in t.partitions}

    async def run() -> None:
        assert alter_replica_log_dirs.alter(services, "t", 0, str(d2.absolute())) == errors.NONE
        assert described() == {("d1", 0, False), ("d2", 0, True)}  # moving: the future replica in d2
        for _ in range(2000):
            if mgr.future_of("t", 0) is None:
                break
            await asyncio.sleep(0.001)
        assert described() == {("d2", 0, False)}
        mgr.mark_dir_offline(d3)
        assert alter_replica_log_dirs.alter(services, "t", 0, str(d3.absolute())) == errors.KAFKA_STORAGE_ERROR
        assert alter_replica_log_dirs.alter(services, "t", 0, str(tmp_path / "d4")) == errors.LOG_DIR_NOT_FOUND
        assert alter_replica_log_dirs.alter(services, "t", 0, "d1") == errors.LOG_DIR_NOT_FOUND  # not absolute
        assert alter_replica_log_dirs.alter(services, "t", 1, str(d1.absolute())) == errors.REPLICA_NOT_AVAILABLE
        assert alter_replica_log_dirs.alter(services, "t", 2, str(d1.absolute())) == errors.UNKNOWN_TOPIC_OR_PARTITION
        assert alter_replica_log_dirs.alter(services, "x", 0, str(d1.absolute())) == errors.UNKNOWN_TOPIC_OR_PARTITION
        long_topic = "y" * 240
        assert alter_replica_log_dirs.alter(services, long_topic, 0, str(d1.absolute())) == \
            errors.INVALID_TOPIC_EXCEPTION

    asyncio.run(run())
    mgr.shutdown()
