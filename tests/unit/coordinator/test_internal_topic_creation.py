"""The coordinators' internal topics are created on first use with one creation request in flight at
a time (coordinator/runtime.py TopicCreationGate, Kafka's AutoTopicCreationManager): many
FindCoordinator and InitProducerId requests arriving before ``__transaction_state`` exists (or
FindCoordinator for groups before ``__consumer_offsets`` does) make one request to the topic admin,
another only once TOPIC_CREATION_RETRY_MS has passed without the topic showing up, and none once it
has. Driven through the real handlers and runtimes, with a counting topic admin that, as the
controller of cluster mode does, makes the topic known only later."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from odradek.config import BrokerConfig
from odradek.controller.topics import PartitionMeta, TopicMeta
from odradek.coordinator.runtime import (
    OFFSETS_TOPIC,
    TOPIC_CREATION_RETRY_MS,
    GroupCoordinatorRuntime,
    TopicCreationGate,
)
from odradek.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
from odradek.protocol import errors
from odradek.server.handlers import find_coordinator, init_producer_id
from odradek.server.request_context import BrokerServices, RequestContext

from ..server.test_request_context import FakeConnection, services


class FakeTopics:
    """The metadata cache: a topic is known once the test says the controller made it known."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMeta] = {}
        self.by_id: dict[uuid.UUID, TopicMeta] = {}
        self.listeners: list[Any] = []

    def get(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def live_brokers(self) -> list[int]:
        return [1, 2, 3]

    def make_known(self, name: str, partitions: int) -> None:
        meta = TopicMeta(name, uuid.uuid4(), [PartitionMeta(p, [1], 1, 0, [1]) for p in range(partitions)], {})
        self.topics[name] = self.by_id.setdefault(meta.topic_id, meta)


class CountingTopicAdmin:
    """Counts creation requests; the topic shows up only when the test makes it known."""

    def __init__(self) -> None:
        self.created: list[tuple[str, int, int]] = []

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, assignment: Any = None,
        configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
    ) -> None:
        self.created.append((name, num_partitions, replication_factor))


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


class Broker:
    """The two coordinator runtimes of one broker, over fakes of their edges."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.topics = FakeTopics()
        self.admin = CountingTopicAdmin()
        self.waits = 0
        self.cluster = SimpleNamespace(embedded=False, live_brokers={1: {"host": "b1", "port": 9092}},
                                       ib_connect=None, wait_for_metadata=self._wait_for_metadata)
        config = BrokerConfig({"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "7"})
        topics: Any = self.topics
        self.groups = GroupCoordinatorRuntime(config, topics, self.admin, None,  # type: ignore[arg-type]
                                              None, self.clock.now_ms)  # type: ignore[arg-type]
        self.txn = TransactionCoordinatorRuntime(
            config, topics, self.admin, None, None, self.clock.now_ms,  # type: ignore[arg-type]
            SimpleNamespace(next_id=lambda: 1), 1, self.cluster,  # type: ignore[arg-type]
            "INTERNAL", self.groups,
        )
        self.svc: BrokerServices = services(topics=topics, cluster=self.cluster, groups=self.groups, txn=self.txn,
                                            now_ms=self.clock.now_ms)

    def _wait_for_metadata(self, ready: Any, timeout_ms: int, then: Any) -> str:
        self.waits += 1
        return "waiting for the topic"

    def ctx(self, api_key: int, version: int) -> RequestContext:
        return RequestContext(self.svc, FakeConnection(), api_key, version, 1, "c")  # type: ignore[arg-type]

    def find_transaction_coordinator(self, transactional_id: str) -> Any:
        req = SimpleNamespace(key_type=find_coordinator.KEY_TRANSACTION, coordinator_keys=(transactional_id,))
        return find_coordinator.handle(self.ctx(10, 4), req)

    def find_group_coordinator(self, group_id: str) -> Any:
        req = SimpleNamespace(key_type=find_coordinator.KEY_GROUP, coordinator_keys=(group_id,))
        return find_coordinator.handle(self.ctx(10, 4), req)

    def init_producer_id(self, transactional_id: str) -> Any:
        req = SimpleNamespace(transactional_id=transactional_id, transaction_timeout=60000, producer_id=-1,
                              producer_epoch=-1)
        return init_producer_id.handle(self.ctx(22, 4), req)


def test_transactional_requests_before_the_topic_exists_make_one_creation_request() -> None:
    async def run() -> None:
        b = Broker()
        for i in range(200):
            assert b.find_transaction_coordinator(f"txn-{i}") == "waiting for the topic"
            r = b.init_producer_id(f"txn-{i}")
            assert (r.error_code, r.producer_id) == (errors.COORDINATOR_NOT_AVAILABLE, -1)
            b.clock.ms += 1
        assert b.waits == 200
        assert b.admin.created == [(TRANSACTION_STATE_TOPIC, 7, 3)]
        # the request is made again only once it has been in flight for TOPIC_CREATION_RETRY_MS
        b.clock.ms += TOPIC_CREATION_RETRY_MS - 200
        assert b.init_producer_id("txn-late").error_code == errors.COORDINATOR_NOT_AVAILABLE
        assert len(b.admin.created) == 2
        # once the controller has made the topic known, nobody asks again
        b.topics.make_known(TRANSACTION_STATE_TOPIC, 7)
        b.clock.ms += TOPIC_CREATION_RETRY_MS
        for i in range(50):
            assert b.txn.ensure_topic()
            b.find_transaction_coordinator(f"txn-{i}")
        assert len(b.admin.created) == 2
        assert b.waits == 200
        b.txn.shutdown()

    asyncio.run(run())


def test_each_internal_topic_has_its_own_request_in_flight() -> None:
    """__consumer_offsets' request in flight does not hold back __transaction_state's, and the
    group runtime goes through the same gate."""
    async def run() -> None:
        b = Broker()
        for i in range(100):
            b.find_group_coordinator(f"group-{i}")
            b.find_transaction_coordinator(f"txn-{i}")
        assert sorted(name for name, _, _ in b.admin.created) == [OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC]
        assert isinstance(b.groups.topic_creation, TopicCreationGate)
        assert isinstance(b.txn.topic_creation, TopicCreationGate)
        b.txn.shutdown()

    asyncio.run(run())


def test_a_failed_creation_is_asked_for_again_after_the_retry_interval() -> None:
    topics = FakeTopics()
    clock = Clock()
    gate = TopicCreationGate(topics, "__x", clock.now_ms)  # type: ignore[arg-type]
    calls: list[int] = []

    def fail() -> bool:
        calls.append(clock.ms)
        return False

    assert not gate.ensure(fail)
    clock.ms += TOPIC_CREATION_RETRY_MS - 1
    assert not gate.ensure(fail)
    clock.ms += 1
    assert not gate.ensure(fail)
    assert len(calls) == 2

    def created() -> bool:
        topics.make_known("__x", 1)
        return True

    clock.ms += TOPIC_CREATION_RETRY_MS
    assert gate.ensure(created) and gate.ensure(fail)
    assert len(calls) == 2
