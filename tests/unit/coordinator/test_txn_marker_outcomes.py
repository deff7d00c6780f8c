"""What the transaction coordinator makes of the answers to its markers (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler): a partition whose
topic this broker's metadata no longer has is dropped; a leader answering UNKNOWN_TOPIC_OR_PARTITION
(a metadata cache that does not have the partition yet, or for a moment) is retried, never taken for
done: a dropped marker leaves the transaction open on the partition, and the producer's next marker
there then ends it, committing what its producer aborted."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from odradek.config import BrokerConfig
from odradek.coordinator.transaction.state import TransactionResult
from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
from odradek.protocol import errors

from .test_internal_topic_creation import Clock, CountingTopicAdmin, FakeTopics


class FakeChannel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, list[tuple[str, int]], Any]] = []

    def send(self, broker_id: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
             parts: list[tuple[str, int]], then: Any) -> None:
        self.sent.append((broker_id, parts, then))


def outcome_of(remote_answer: int | None, topic: str = "t") -> tuple[list[int], FakeChannel]:
    """The code the coordinator core gets for one partition led by broker 2 that answers
    ``remote_answer``."""
    results: list[int] = []
    channel = FakeChannel()

    async def run() -> None:
        topics = FakeTopics()
        topics.make_known("t", 1)
        topics.topics["t"].partitions[0].leader = 2
        cluster = SimpleNamespace(embedded=False, live_brokers={2: {"host": "b2", "port": 9092}}, ib_connect=None)
        replicas = SimpleNamespace(leading=lambda t, p: None, wait_for_replication=lambda required, timeout: {})
        logs = SimpleNamespace(get_log=lambda t, p: None)
        groups = SimpleNamespace(partition_of=lambda g: 0, complete_txn=lambda p, pid, commit: None)
        rt = TransactionCoordinatorRuntime(
            BrokerConfig({}), topics, CountingTopicAdmin(), replicas, logs,  # type: ignore[arg-type]
            Clock().now_ms, SimpleNamespace(next_id=lambda: 1), 1, cluster,  # type: ignore[arg-type]
            "INTERNAL", groups,  # type: ignore[arg-type]
        )
        rt.channel = channel  # type: ignore[assignment]
        rt._send_markers(7, 0, TransactionResult.COMMIT, frozenset({(topic, 0)}), results.append,
                         coordinator_epoch=0, transactional_id="tx")
        if remote_answer is not None:
            [(_broker, parts, then)] = channel.sent
            then(dict.fromkeys(parts, remote_answer))

    asyncio.run(run())
    return results, channel


def test_a_marker_the_leader_wrote_is_done() -> None:
    results, channel = outcome_of(errors.NONE)
    assert [b for b, _, _ in channel.sent] == [2] and results == [errors.NONE]


def test_a_leader_that_does_not_know_the_partition_gets_the_marker_again() -> None:
    results, _ = outcome_of(errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert results == [errors.NOT_LEADER_OR_FOLLOWER]  # retried by the core, with the leaders of that moment


def test_a_partition_this_broker_no_longer_knows_is_dropped() -> None:
    results, channel = outcome_of(None, topic="deleted")
    assert channel.sent == [] and results == [errors.NONE]
