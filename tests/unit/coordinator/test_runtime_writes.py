"""coordinator.runtime: a response waits until the coordinator's appends to the group's partition are
replicated, and failed replication maps as Kafka's coordinator maps append errors (issue 12, item 8)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime, append_error
from odradek.protocol import errors
from odradek.purgatory import DelayedOperationPurgatory
from odradek.replication.delayed_produce import DelayedProduce

from ..fake_scheduler import FakeScheduler

TP = tuple[str, int]


@dataclass
class _Log:
    high_watermark: int = 0


@dataclass
class _Broker:
    logs: dict[int, _Log] = field(default_factory=dict)
    leading: bool = True
    scheduler: FakeScheduler = field(default_factory=FakeScheduler)
    purgatory: DelayedOperationPurgatory[TP] = field(init=False)
    timeout_ms: int = 200

    def __post_init__(self) -> None:
        self.purgatory = DelayedOperationPurgatory("Produce", self.scheduler)

    # the logs, the replica manager and the config, as the runtime uses them
    @property
    def log_manager(self) -> _Broker:
        return self

    @property
    def replica_manager(self) -> _Broker:
        return self

    @property
    def config(self) -> _Broker:
        return self

    def get(self, name: str) -> int:
        assert name == "offsets.commit.timeout.ms"
        return self.timeout_ms

    def get_log(self, topic: str, partition: int) -> _Log | None:
        assert topic == OFFSETS_TOPIC
        return self.logs.get(partition)

    def check(self, tp: TP, required: int) -> int | None:
        if not self.leading:
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.NONE if self.logs[tp[1]].high_watermark >= required else None

    def wait_for_replication(self, required: dict[TP, int], timeout_ms: int) -> dict[TP, int] | DelayedProduce:
        # ReplicaManager.wait_for_replication over a fake log
        op = DelayedProduce(required, self.check, timeout_ms)
        if self.purgatory.try_complete_else_watch(op, list(required)):
            assert op.response is not None
            return op.response
        return op

    def advance(self, partition: int, hw: int) -> None:
        self.logs[partition].high_watermark = hw
        self.purgatory.check_and_complete((OFFSETS_TOPIC, partition))


class _Conn:
    def __init__(self) -> None:
        self.parked: list[Any] = []

    def park(self, fut: Any, cancel: Any) -> None:
        self.parked.append(fut)


@dataclass
class _Ctx:
    connection: _Conn = field(default_factory=_Conn)


def _runtime(broker: _Broker) -> GroupCoordinatorRuntime:
    rt = GroupCoordinatorRuntime.__new__(GroupCoordinatorRuntime)  # only the write-tracking half
    rt.config = rt.replicas = rt.logs = broker  # type: ignore[assignment]
    rt.last_written = {}
    return rt


def test_append_errors_map_as_kafkas_coordinator() -> None:
    assert append_error(errors.NONE) == errors.NONE
    for code in (errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 errors.UNKNOWN_TOPIC_OR_PARTITION):
        assert append_error(code) == errors.COORDINATOR_NOT_AVAILABLE
    for code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        assert append_error(code) == errors.NOT_COORDINATOR
    assert append_error(errors.MESSAGE_TOO_LARGE) == errors.UNKNOWN_SERVER_ERROR


def test_answered_at_once_when_nothing_is_pending() -> None:
    async def run() -> None:
        b = _Broker(logs={0: _Log(5)})
        rt = _runtime(b)
        assert rt.answer_after_write(_Ctx(), [0, 1], lambda code: ("answer", code)) == ("answer", errors.NONE)
        rt.last_written[0] = 5  # written and replicated
        assert rt.answer_after_write(_Ctx(), [0], lambda code: code) == errors.NONE

    asyncio.run(run())


def test_answer_waits_for_the_high_watermark() -> None:
    async def run() -> None:
        b = _Broker(logs={0: _Log(5), 1: _Log(0)})
        rt = _runtime(b)
        rt.last_written[0] = 9
        ctx = _Ctx()
        fut = rt.answer_after_write(ctx, [0], lambda code: ("answer", code))
        assert isinstance(fut, asyncio.Future) and len(ctx.connection.parked) == 1  # cancelled if it closes
        b.advance(0, 8)
        await asyncio.sleep(0)
        assert not fut.done()
        b.advance(0, 9)
        assert await fut == ("answer", errors.NONE)
        # another partition's pending write does not hold this group's answer
        rt.last_written[1] = 3
        assert rt.answer_after_write(_Ctx(), [0], lambda code: code) == errors.NONE
        # a read (heartbeat) behind a pending write of its partition waits too
        seen: list[int] = []
        rt.after_write(_Ctx(), [1], seen.append)
        assert seen == []
        b.advance(1, 3)
        assert seen == [errors.NONE]

    asyncio.run(run())


def test_timeout_and_lost_leadership_are_mapped() -> None:
    async def run() -> None:
        b = _Broker(logs={0: _Log(0)}, timeout_ms=50)
        rt = _runtime(b)
        rt.last_written[0] = 1
        fut = rt.answer_after_write(_Ctx(), [0], lambda code: code)
        b.scheduler.advance(49)
        await asyncio.sleep(0)
        assert not fut.done()
        b.scheduler.advance(1)  # offsets.commit.timeout.ms
        assert await asyncio.wait_for(fut, 2) == errors.COORDINATOR_NOT_AVAILABLE
        assert b.purgatory.delayed() == 0
        b.leading = False
        assert rt.answer_after_write(_Ctx(), [0], lambda code: code) == errors.NOT_COORDINATOR

    asyncio.run(run())
