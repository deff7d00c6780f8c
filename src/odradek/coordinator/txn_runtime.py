"""Runs the transaction coordinator on the broker (Kafka's TransactionCoordinator with its
TransactionStateManager and TransactionMarkerChannelManager): owns ``__transaction_state``,
gives the pure core (:mod:`odradek.coordinator.transaction.coordinator`) its edges, and loads
and unloads transactional ids as leadership of the topic's partitions moves.

- ``__transaction_state`` is created on first use (FindCoordinator key type 1, InitProducerId
  with a transactional id), one creation request in flight at a time, with transaction.state.log.num.partitions partitions, the
  replication factor transaction.state.log.replication.factor (capped at the live brokers,
  as for __consumer_offsets in coordinator.runtime), min.insync.replicas
  transaction.state.log.min.isr (capped at the replication factor), segment size
  transaction.state.log.segment.bytes, compacted.
- The core's ``write`` edge appends the records to the partition (a plain batch) and calls
  back once the high watermark passes them (acks=-1), or with the append / replication error.
- Its ``send_markers`` edge writes the markers through :mod:`odradek.coordinator.txn_markers` to
  the partitions this broker leads and waits for them to be replicated; in cluster mode the
  partitions other brokers lead get WriteTxnMarkers over the inter-broker listener
  (:mod:`odradek.coordinator.txn_channel`). A partition whose topic is gone from this broker's
  metadata counts as done (Kafka's TransactionMarkerChannelManager drops markers of deleted
  partitions); a leader's UNKNOWN_TOPIC_OR_PARTITION does not (it may not know the partition yet,
  or not any more: retriable, as in Kafka's TransactionMarkerRequestCompletionHandler; dropping
  it left the transaction open on that partition, for the producer's next transaction to end with
  its own marker). Any other failure makes the core retry after its
  backoff, with the leaders of that moment; INVALID_PRODUCER_EPOCH or
  TRANSACTION_COORDINATOR_FENCED from a leader stop the sending (Kafka's
  TransactionMarkerRequestCompletionHandler).
- Loading: on leadership of a partition, the coordinator epoch is the partition's leader
  epoch; its records are replayed in order, and transactions found in PrepareCommit /
  PrepareAbort are completed. On loss of leadership the partition's ids are forgotten.
- The core's sweeps (timed-out transactions aborted every
  transaction.abort.timed.out.transaction.cleanup.interval.ms, transactional ids expired
  every transaction.remove.expired.transaction.cleanup.interval.ms) run from start-up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from odradek.client.async_wire import Connect
from odradek.controller.store import StoreError
from odradek.controller.zk_data import endpoint_for
from odradek.coordinator.group.coordinator import make_scheduler
from odradek.coordinator.loader import decode_or_skip, load_batches
from odradek.coordinator.runtime import TopicCreationGate, create_internal_topic
from odradek.coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC,
    ProducerIdUnavailable,
    Records,
    TransactionConfig,
    TransactionCoordinator,
    transaction_topic_configs,
)
from odradek.coordinator.transaction.state import TopicPartition, TransactionResult
from odradek.coordinator.txn_channel import TxnChannel
from odradek.coordinator.txn_markers import write_markers
from odradek.protocol import errors
from odradek.protocol.records import build_batch, read_inflate_limit

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicRegistry
    from odradek.coordinator.runtime import CoordinatorPartitions, LogLookup, TopicCreator
    from odradek.log.log import Log

log = logging.getLogger("odradek.coordinator.transaction")

MARKER_TIMEOUT_MS = 30000  # Kafka's WriteTxnMarkers waits request.timeout.ms for replication
# a marker refused for these reasons is never retried (Kafka's TransactionMarkerRequestCompletionHandler)
_MARKER_PERMANENT = (errors.INVALID_PRODUCER_EPOCH, errors.TRANSACTION_COORDINATOR_FENCED)


class TxnPartitions(Protocol):
    """What the runtime needs of the replica manager beyond the group runtime's edges."""

    def leader_epoch(self, topic: str, partition: int) -> int: ...


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


class ClusterView(Protocol):
    """Embedded or cluster mode, and the registered brokers (their inter-broker endpoints)."""

    embedded: bool
    live_brokers: dict[int, dict[str, Any]]
    ib_connect: Connect  # opens a connection with the inter-broker listener's security


class OffsetsTxnSink(Protocol):
    """The group runtime's side of transactions: a group's __consumer_offsets partition, and the
    end of a transaction's pending offsets when its marker lands there."""

    def partition_of(self, group_id: str) -> int: ...

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None: ...


class TransactionCoordinatorRuntime:
    """The transaction coordinator on this broker. Subscribes to leadership of
    ``__transaction_state`` partitions through :meth:`on_leadership` (a ReplicaManager leadership
    listener)."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicRegistry,
        admin: TopicCreator,
        replicas: Any,  # CoordinatorPartitions and TxnPartitions: the ReplicaManager
        logs: LogLookup,
        now_ms: Callable[[], int],
        producer_ids: ProducerIds,
        node_id: int,
        cluster: ClusterView,
        inter_broker_listener: str,
        groups: OffsetsTxnSink,
    ) -> None:
        self.config = cfg = config
        self.topics = topics
        self.admin = admin
        self.replicas: CoordinatorPartitions = replicas
        self._epochs: TxnPartitions = replicas
        self.logs = logs
        self.now_ms = now_ms
        self.producer_ids = producer_ids
        self.node_id = node_id
        self.cluster = cluster
        self.inter_broker_listener = inter_broker_listener
        num = int(cfg.get("transaction.state.log.num.partitions"))
        meta = topics.get(TRANSACTION_STATE_TOPIC)
        if meta is not None:
            num = len(meta.partitions)
        self._on_consumer_offsets_marker = groups.complete_txn
        self.coordinator = TransactionCoordinator(
            TransactionConfig(
                num_partitions=num,
                transaction_max_timeout_ms=int(cfg.get("transaction.max.timeout.ms")),
                transactional_id_expiration_ms=int(cfg.get("transactional.id.expiration.ms")),
                abort_timed_out_transaction_cleanup_interval_ms=int(
                    cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
                remove_expired_transaction_cleanup_interval_ms=int(
                    cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms")),
                offsets_num_partitions=int(cfg.get("offsets.topic.num.partitions")),
            ),
            make_scheduler(asyncio.get_running_loop(), now_ms),
            self._write,
            self._send_markers,
            self._next_producer_id,
            group_partition_for=groups.partition_of,
        )
        # __transaction_state is created on first use, one request in flight at a time
        self.topic_creation = TopicCreationGate(topics, TRANSACTION_STATE_TOPIC, now_ms)
        self.verification_enabled = bool(cfg.get("transaction.partition.verification.enable"))
        # requests to other brokers: markers, verification (cluster mode only)
        self.channel = None if cluster.embedded else TxnChannel(node_id, self._endpoint_of, cluster.ib_connect)

    def set_transaction_version(self, level: int) -> None:
        """The finalized ``transaction.version`` (KIP-584): TV_1 and up write the flexible
        TransactionLogValue version 1, TV_0 version 0; at TV_2 the coordinator's own aborts
        (timeout, InitProducerId's fence) bump the epoch as KIP-890 part 2 ends do."""
        self.coordinator.config.log_value_version = 1 if level >= 1 else 0
        self.coordinator.config.transaction_version = level

    def start(self) -> None:
        self.coordinator.start()

    def shutdown(self) -> None:
        self.coordinator.shutdown()
        if self.channel is not None:
            self.channel.close()

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    # -- topic
    def ensure_topic(self) -> bool:
        """Create __transaction_state if missing; True when it exists afterwards (in cluster
        mode: once the controller has made it known). One request is in flight at a time
        (:class:`~odradek.coordinator.runtime.TopicCreationGate`, as for __consumer_offsets):
        every FindCoordinator and InitProducerId of a transactional id asks, and 200 producers
        starting together must not make 200 creation calls."""
        return self.topic_creation.ensure(self._create_topic)

    def _create_topic(self) -> bool:
        cfg = self.config
        return create_internal_topic(
            self.topics, self.admin, TRANSACTION_STATE_TOPIC, self.coordinator.config.num_partitions,
            "transaction.state.log.replication.factor", int(cfg.get("transaction.state.log.replication.factor")),
            lambda rf: transaction_topic_configs(min(int(cfg.get("transaction.state.log.min.isr")), rf),
                                                 int(cfg.get("transaction.state.log.segment.bytes"))),
        )

    # -- the core's edges
    def _next_producer_id(self) -> int:
        try:
            return self.producer_ids.next_id()
        except StoreError as e:
            log.warning("cannot allocate a producer id: %s", e)
            raise ProducerIdUnavailable(errors.COORDINATOR_NOT_AVAILABLE) from e

    def _write(self, partition: int, records: Records, on_done: Callable[[int], None]) -> None:
        rm = self.replicas
        part = rm.leading(TRANSACTION_STATE_TOPIC, partition)
        plog = self.logs.get_log(TRANSACTION_STATE_TOPIC, partition)
        if part is None or plog is None:
            on_done(errors.NOT_LEADER_OR_FOLLOWER)
            return
        batch = build_batch(list(records), timestamp=self.now_ms())
        try:
            info = rm.append_internal(part, plog, bytearray(batch), self.now_ms())
        except OSError as e:
            log.error("failed to append to %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, e)
            on_done(errors.KAFKA_STORAGE_ERROR)
            return
        self._after_replication({(TRANSACTION_STATE_TOPIC, partition): info.last_offset + 1}, MARKER_TIMEOUT_MS,
                                lambda codes: on_done(_worst(codes)))

    def _after_replication(self, required: dict[TopicPartition, int], timeout_ms: int,
                           then: Callable[[dict[TopicPartition, int]], None]) -> None:
        if not required:
            then({})
            return
        outcome = self.replicas.wait_for_replication(required, timeout_ms)
        if isinstance(outcome, dict):
            then(outcome)
            return

        def done(response: dict[TopicPartition, int] | None, error: BaseException | None) -> None:
            then(response if response is not None and error is None
                 else dict.fromkeys(required, errors.REQUEST_TIMED_OUT))

        outcome.then(done)

    def _send_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        result: TransactionResult,
        partitions: frozenset[TopicPartition],
        on_done: Callable[[int], None],
        *,
        coordinator_epoch: int,
        transactional_id: str,
    ) -> None:
        commit = result == TransactionResult.COMMIT
        codes, required = write_markers(
            self.replicas, self.logs, self.topics, producer_id, producer_epoch, coordinator_epoch, commit,
            partitions, self.now_ms(), self._on_consumer_offsets_marker,
        )
        # partitions other brokers lead (cluster mode): WriteTxnMarkers to each leader
        remote: dict[int, list[TopicPartition]] = {}
        if self.channel is not None:
            for tp, c in codes.items():
                if c == errors.NOT_LEADER_OR_FOLLOWER:
                    leader = self._leader_of(tp)
                    if leader is not None and leader != self.node_id:
                        remote.setdefault(leader, []).append(tp)
        outcomes: dict[TopicPartition, int] = dict(codes)
        waiting = [len(remote) + 1]

        def part_done(partial: dict[TopicPartition, int]) -> None:
            outcomes.update(partial)
            waiting[0] -= 1
            if waiting[0]:
                return
            permanent = {tp: c for tp, c in outcomes.items() if c in _MARKER_PERMANENT}
            if permanent:
                log.warning("the %s markers of %s were refused permanently (%s); not sending them again",
                            result.name, transactional_id, permanent)
                return
            on_done(_worst({tp: c for tp, c in outcomes.items() if c != errors.UNKNOWN_TOPIC_OR_PARTITION}))

        def remote_done(partial: dict[TopicPartition, int]) -> None:
            part_done({tp: errors.NOT_LEADER_OR_FOLLOWER if c == errors.UNKNOWN_TOPIC_OR_PARTITION else c
                       for tp, c in partial.items()})

        for leader, parts in remote.items():
            assert self.channel is not None
            self.channel.send(leader, producer_id, producer_epoch, coordinator_epoch, commit, parts, remote_done)
        self._after_replication(required, MARKER_TIMEOUT_MS, part_done)

    def coordinator_broker(self, transactional_id: str) -> int | None:
        """The broker coordinating ``transactional_id`` (the leader of its __transaction_state
        partition), when another broker than this one."""
        leader = self._leader_of((TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)))
        return leader if leader != self.node_id else None

    def _leader_of(self, tp: TopicPartition) -> int | None:
        meta = self.topics.get(tp[0])
        if meta is None or not 0 <= tp[1] < len(meta.partitions):
            return None
        leader = meta.partitions[tp[1]].leader
        return leader if leader >= 0 else None

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        node = self.cluster.live_brokers.get(broker_id)
        return endpoint_for(node, self.inter_broker_listener) if node is not None else None

    # -- loading
    def on_leadership(self, topic: str, partition: int, leader: bool) -> None:
        """Leadership of a __transaction_state partition moved; its transactional ids follow."""
        if topic != TRANSACTION_STATE_TOPIC:
            return
        coord = self.coordinator
        if leader:
            epoch = self._epochs.leader_epoch(topic, partition)
            if coord.coordinator_epoch(partition) == epoch:
                return
            plog = self.logs.get_log(topic, partition)
            t0 = time.monotonic()
            coord.begin_loading(partition, epoch)
            count = self._replay(partition, plog) if plog is not None else 0
            coord.finish_loading(partition, epoch)
            log.info("loaded %s-%d (%d records) at coordinator epoch %d in %.0f ms",
                     topic, partition, count, epoch, (time.monotonic() - t0) * 1000)
        elif partition in coord.owned_partitions():
            n = coord.unload_partition(partition)
            log.info("no longer coordinating the %d transactional id(s) of %s-%d", n, topic, partition)

    def _replay(self, partition: int, plog: Log) -> int:
        """Apply every record of one __transaction_state partition; returns how many."""
        count = 0
        limit = read_inflate_limit(plog.config.max_message_bytes)
        for h, batch, first in load_batches(plog):
            if h.is_control:
                continue
            for r in decode_or_skip(batch, h, limit, plog, "transactional ids"):
                if r.offset >= first:
                    self.coordinator.replay(partition, r.key, r.value)
                    count += 1
        return count


def _worst(codes: dict[TopicPartition, int]) -> int:
    return next((c for c in codes.values() if c != errors.NONE), errors.NONE)
