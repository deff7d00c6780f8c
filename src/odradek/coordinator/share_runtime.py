"""Runs the share coordinator on the broker (Kafka's ShareCoordinatorService over the coordinator runtime) and
the broker's state persister (Kafka's DefaultStatePersister).

- ``__share_group_state`` is created on first use, one creation request in flight at a time, with
  ``share.coordinator.state.topic.num.partitions`` partitions (50), replication factor
  ``share.coordinator.state.topic.replication.factor`` (capped at the live brokers, as for the other internal
  topics), ``min.insync.replicas`` ``share.coordinator.state.topic.min.isr`` (capped at the replication factor),
  segment size ``share.coordinator.state.topic.segment.bytes``, compacted, uncompressed (Kafka's
  ShareCoordinatorService.shareGroupStateTopicConfigs).
- A share-partition (group, topic id, partition) lives on the ``__share_group_state`` partition
  ``abs(javaHash("group:topicId:partition")) % partitions`` (Kafka's SharePartitionKey.asCoordinatorKey and
  ShareCoordinatorService.partitionFor; the topic id in Kafka's base64 form).
- Each partition led here has a :class:`~odradek.coordinator.share.share_state.ShareCoordinatorShard`. On
  leadership its records are replayed (snapshots, updates, tombstones); on loss it is dropped.
- A request (Write/Read/Initialize/Delete/ReadSummary ShareGroupState, one share-partition at a time) is checked
  by the shard; its records are appended through the replica manager's internal append, replayed, and the answer
  is given once the high watermark passes them (acks=-1), or the append / replication error
  (Kafka's runtime answers a write after it is committed).

:class:`ShareStatePersister` is what the share-partition manager calls (Kafka's Persister interface). In the
embedded broker, and whenever this broker leads the state partition, it calls the local coordinator directly; a
share-partition whose state another broker coordinates is answered NOT_COORDINATOR (the inter-broker sending of
Kafka's PersisterStateManager is not built).
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from odradek.coordinator.loader import decode_or_skip, load_batches
from odradek.coordinator.runtime import TopicCreationGate, create_internal_topic
from odradek.coordinator.share.share_partition import StateWrite
from odradek.coordinator.share.share_state import (
    CoordinatorResult,
    PartitionResult,
    ShareCoordinatorShard,
    SharePartitionKey,
    ShareStateFormatError,
    WriteStateRequest,
)
from odradek.protocol import errors
from odradek.protocol.records import build_batch, read_inflate_limit

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicRegistry
    from odradek.coordinator.runtime import CoordinatorPartitions, LogLookup, TopicCreator
    from odradek.log.log import Log

log = logging.getLogger("odradek.coordinator.share")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
WRITE_TIMEOUT_MS = 5000  # share.coordinator.write.timeout.ms

Done = Callable[[PartitionResult], None]


def share_state_topic_configs(min_insync_replicas: int, segment_bytes: int) -> dict[str, str]:
    """The configs ``__share_group_state`` is created with (Kafka's ShareCoordinatorService)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(min_insync_replicas),
        "segment.bytes": str(segment_bytes),
        "unclean.leader.election.enable": "false",
    }


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_uuid_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor(SharePartitionKey)."""
    h = java_string_hash(f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _error(code: int, message: str | None = None) -> PartitionResult:
    return PartitionResult(error_code=code, error_message=message)


class LoadTimeSink(Protocol):
    """Where the coordinator reports how long loading a partition took (metrics.share_stats.LoadTimes: Kafka's
    share-coordinator-metrics partition-load-time-avg and -max)."""

    def record(self, ms: float) -> None: ...


class ShareCoordinatorRuntime:
    """The share coordinator on this broker; :meth:`on_leadership` is a ReplicaManager leadership listener."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicRegistry,
        admin: TopicCreator,
        replicas: CoordinatorPartitions,
        logs: LogLookup,
        now_ms: Callable[[], int],
        leader_epoch: Callable[[str, int], int],
        load_times: LoadTimeSink | None = None,
    ) -> None:
        self.config = cfg = config
        self.load_times = load_times
        self.topics = topics
        self.admin = admin
        self.replicas = replicas
        self.logs = logs
        self.now_ms = now_ms
        self._leader_epoch = leader_epoch
        self.num_partitions = int(cfg.get("share.coordinator.state.topic.num.partitions"))
        meta = topics.get(SHARE_GROUP_STATE_TOPIC)
        if meta is not None:
            self.num_partitions = len(meta.partitions)
        self.per_snapshot = int(cfg.get("share.coordinator.snapshot.update.records.per.snapshot"))
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self._epochs: dict[int, int] = {}
        self.topic_creation = TopicCreationGate(topics, SHARE_GROUP_STATE_TOPIC, now_ms)

    # -- topic
    def ensure_topic(self) -> bool:
        return self.topic_creation.ensure(self._create_topic)

    def _create_topic(self) -> bool:
        cfg = self.config
        ok = create_internal_topic(
            self.topics, self.admin, SHARE_GROUP_STATE_TOPIC, self.num_partitions,
            "share.coordinator.state.topic.replication.factor",
            int(cfg.get("share.coordinator.state.topic.replication.factor")),
            lambda rf: share_state_topic_configs(min(int(cfg.get("share.coordinator.state.topic.min.isr")), rf),
                                                 int(cfg.get("share.coordinator.state.topic.segment.bytes"))),
        )
        meta = self.topics.get(SHARE_GROUP_STATE_TOPIC)
        if meta is not None:
            self.num_partitions = len(meta.partitions)
        return ok

    def partition_of(self, key: SharePartitionKey) -> int:
        return partition_for(key.group_id, key.topic_id, key.partition, self.num_partitions)

    def _partition_count(self, topic_id: uuid.UUID) -> int | None:
        meta = self.topics.by_id.get(topic_id)
        return None if meta is None else len(meta.partitions)

    # -- loading
    def on_leadership(self, topic: str, partition: int, leader: bool) -> None:
        if topic != SHARE_GROUP_STATE_TOPIC:
            return
        if not leader:
            if self.shards.pop(partition, None) is not None:
                log.info("no longer coordinating the share-partitions of %s-%d", topic, partition)
            self._epochs.pop(partition, None)
            return
        epoch = self._leader_epoch(topic, partition)
        if self._epochs.get(partition) == epoch and partition in self.shards:
            return
        shard = ShareCoordinatorShard(self._partition_count, self.now_ms, self.per_snapshot)
        plog = self.logs.get_log(topic, partition)
        t0 = time.monotonic()
        count = self._replay(shard, plog) if plog is not None else 0
        self.shards[partition] = shard
        self._epochs[partition] = epoch
        took_ms = (time.monotonic() - t0) * 1000
        if self.load_times is not None:
            self.load_times.record(took_ms)
        log.info("loaded %s-%d (%d records, %d share-partitions) at epoch %d in %.0f ms",
                 topic, partition, count, len(shard.states), epoch, took_ms)

    @staticmethod
    def _replay(shard: ShareCoordinatorShard, plog: Log) -> int:
        count = 0
        limit = read_inflate_limit(plog.config.max_message_bytes)
        for h, batch, first in load_batches(plog):
            if h.is_control:
                continue
            for r in decode_or_skip(batch, h, limit, plog, "share-partition states"):
                if r.offset < first or r.key is None:
                    continue
                try:
                    shard.replay_bytes(r.key, r.value)
                except ShareStateFormatError as e:
                    log.warning("skipping an unreadable record at %s-%d offset %d: %s",
                                plog.topic, plog.partition, r.offset, e)
                    continue
                count += 1
        return count

    # -- requests
    def _shard(self, key: SharePartitionKey) -> tuple[int, ShareCoordinatorShard | None, int]:
        """(state partition, its shard, error). A shard loaded here answers for itself: the controller's
        LeaderAndIsr comes before the UpdateMetadata that shows the topic in this broker's cache."""
        p = self.partition_of(key)
        shard = self.shards.get(p)
        if shard is not None:
            return p, shard, errors.NONE
        if self.topics.get(SHARE_GROUP_STATE_TOPIC) is None and not self.ensure_topic():
            return -1, None, errors.COORDINATOR_NOT_AVAILABLE
        return p, None, errors.NOT_COORDINATOR

    def _run(self, key: SharePartitionKey, op: Callable[[ShareCoordinatorShard], CoordinatorResult],
             done: Done) -> None:
        p, shard, err = self._shard(key)
        if shard is None:
            done(_error(err))
            return
        result = op(shard)
        if not result.records:
            done(result.response)
            return
        rm = self.replicas
        part = rm.leading(SHARE_GROUP_STATE_TOPIC, p)
        plog = self.logs.get_log(SHARE_GROUP_STATE_TOPIC, p)
        if part is None or plog is None:
            done(_error(errors.NOT_COORDINATOR))
            return
        now = self.now_ms()
        batch = build_batch([(r.key_bytes(), r.value_bytes()) for r in result.records], timestamp=now)
        try:
            info = rm.append_internal(part, plog, bytearray(batch), now)
        except OSError as e:
            log.error("failed to append to %s-%d: %s", SHARE_GROUP_STATE_TOPIC, p, e)
            done(_error(errors.KAFKA_STORAGE_ERROR))
            return
        response = shard.apply(result)
        tp = (SHARE_GROUP_STATE_TOPIC, p)
        outcome = rm.wait_for_replication({tp: info.last_offset + 1}, WRITE_TIMEOUT_MS)

        def finish(codes: dict[tuple[str, int], int] | None) -> None:
            code = errors.REQUEST_TIMED_OUT if codes is None else codes.get(tp, errors.NONE)
            done(response if code == errors.NONE else _error(code))

        if isinstance(outcome, dict):
            finish(outcome)
        else:
            outcome.then(lambda r, e: finish(r if e is None else None))

    def write_state(self, req: WriteStateRequest, done: Done) -> None:
        self._run(req.key, lambda s: s.write_state(req), done)

    def read_state(self, key: SharePartitionKey, leader_epoch: int, done: Done) -> None:
        self._run(key, lambda s: s.read_state(key, leader_epoch), done)

    def read_state_summary(self, key: SharePartitionKey, done: Done) -> None:
        self._run(key, lambda s: s.read_state_summary(key), done)

    def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int, done: Done) -> None:
        self._run(key, lambda s: s.initialize_state(key, state_epoch, start_offset), done)

    def delete_state(self, key: SharePartitionKey, done: Done) -> None:
        self._run(key, lambda s: s.delete_state(key), done)


class ShareStatePersister:
    """Kafka's Persister as the share-partition manager uses it, over the local share coordinator (Kafka's
    DefaultStatePersister sends the same requests to the coordinator's broker)."""

    def __init__(self, coordinator: ShareCoordinatorRuntime) -> None:
        self.coordinator = coordinator

    def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, write: StateWrite, done: Done) -> None:
        req = WriteStateRequest(SharePartitionKey(group_id, topic_id, partition), write.state_epoch,
                                write.leader_epoch, write.start_offset, write.batches,
                                write.delivery_complete_count)
        self.coordinator.write_state(req, done)

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int, done: Done) -> None:
        self.coordinator.read_state(SharePartitionKey(group_id, topic_id, partition), leader_epoch, done)

    def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int, done: Done) -> None:
        self.coordinator.initialize_state(SharePartitionKey(group_id, topic_id, partition), state_epoch,
                                          start_offset, done)

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int, done: Done) -> None:
        self.coordinator.delete_state(SharePartitionKey(group_id, topic_id, partition), done)

    def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int, done: Done) -> None:
        self.coordinator.read_state_summary(SharePartitionKey(group_id, topic_id, partition), done)
