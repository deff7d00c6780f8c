"""AlterPartitionManager without ZooKeeper: the conditional ISR write and its notification
against the embedded LocalStore (real znode versions), a lost race, a store failure, and the
two offloads on an event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from odradek.controller import zk_data as zd
from odradek.controller.store import LocalStore, StoreError
from odradek.replication.alter_partition import (
    AlterPartitionManager,
    IsrResult,
    ZkPartitionStates,
    in_worker_thread,
    inline_then_soon,
)
from odradek.replication.partition import Partition

ME = 0


def _store(tmp_path: Path, isr: list[int]) -> tuple[LocalStore, int]:
    store = LocalStore(tmp_path / "meta.json")
    zd.ensure_paths(store)
    zd.create_partition_states(store, "t", {0: zd.LeaderAndIsr(ME, 3, isr, 1)})
    st = zd.read_partition_state(store, "t", 0)
    assert st is not None
    return store, st.zk_version


def _part(isr: list[int], zk_version: int, leader_epoch: int = 3) -> Partition:
    return Partition("t", 0, [0, 1, 2], ME, leader_epoch, list(isr), zk_version, 1)


def _notifications(store: LocalStore) -> list[str]:
    return store.children(zd.ISR_CHANGE)


def test_the_new_isr_is_written_conditionally_and_announced(tmp_path: Path) -> None:
    store, v0 = _store(tmp_path, [0, 1, 2])
    mgr = AlterPartitionManager(ME, ZkPartitionStates(store), inline_then_soon)
    st = zd.LeaderAndIsr(ME, 3, [0, 2], 1, v0)
    isr, version, epoch = mgr.write("t", 0, st) or ([], -1, -1)
    assert (isr, epoch) == ([0, 2], 3) and version > v0
    fresh = zd.read_partition_state(store, "t", 0)
    assert fresh is not None and fresh.isr == [0, 2] and fresh.zk_version == version
    assert len(_notifications(store)) == 1


def test_a_lost_race_takes_the_fresh_isr_when_it_is_still_this_leaders(tmp_path: Path) -> None:
    store, v0 = _store(tmp_path, [0, 1, 2])
    mgr = AlterPartitionManager(ME, ZkPartitionStates(store), inline_then_soon)
    # someone else wrote first (the same leader's earlier write, seen late)
    v1 = zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(ME, 3, [0, 1], 1, v0))
    assert mgr.write("t", 0, zd.LeaderAndIsr(ME, 3, [0, 2], 1, v0)) == ([0, 1], v1, 3)
    # the controller moved leadership (a newer epoch): the leader gets nothing
    zd.update_partition_state(store, "t", 0, zd.LeaderAndIsr(1, 4, [1, 2], 2, v1))
    assert mgr.write("t", 0, zd.LeaderAndIsr(ME, 3, [0], 1, v1)) is None
    assert _notifications(store) == []


class _Unreachable:
    def update_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr) -> int:
        raise StoreError("ZooKeeper is not available")

    def read_partition_state(self, topic: str, partition: int) -> zd.LeaderAndIsr | None:
        raise AssertionError("not read after a failed write")

    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        raise AssertionError("not announced after a failed write")


class _NoNotice(ZkPartitionStates):
    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        raise StoreError("connection loss")


def test_an_unreachable_store_fails_the_write_and_a_lost_notice_does_not(tmp_path: Path) -> None:
    assert AlterPartitionManager(ME, _Unreachable(), inline_then_soon).write(
        "t", 0, zd.LeaderAndIsr(ME, 3, [0], 1, 0)) is None
    store, v0 = _store(tmp_path, [0, 1])
    result = AlterPartitionManager(ME, _NoNotice(store), inline_then_soon).write(
        "t", 0, zd.LeaderAndIsr(ME, 3, [0], 1, v0))
    assert result is not None and result[0] == [0]  # written; the controller learns it later


def test_submit_answers_on_the_loop_with_either_offload(tmp_path: Path) -> None:
    store, v0 = _store(tmp_path, [0, 1, 2])

    async def run() -> list[tuple[str, Any]]:
        got: list[tuple[str, Any]] = []
        done_all = asyncio.Event()

        def done(name: str) -> Any:
            def settle(result: IsrResult | None) -> None:
                got.append((name, result))
                if len(got) == 2:
                    done_all.set()
            return settle

        AlterPartitionManager(ME, ZkPartitionStates(store), inline_then_soon).submit(
            _part([0, 1, 2], v0), [0, 1], done("inline"))
        assert got == []  # answered on a later loop turn, as a store reply would be
        await asyncio.sleep(0)
        fresh = zd.read_partition_state(store, "t", 0)
        assert fresh is not None
        AlterPartitionManager(ME, ZkPartitionStates(store), in_worker_thread).submit(
            _part([0, 1], fresh.zk_version), [0], done("thread"))
        await asyncio.wait_for(done_all.wait(), 5)
        return got

    got = asyncio.run(run())
    assert [name for name, _ in got] == ["inline", "thread"]
    assert got[0][1][0] == [0, 1] and got[1][1][0] == [0]
    assert len(_notifications(store)) == 2
