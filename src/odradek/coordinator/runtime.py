"""Runs the group coordinator on the broker: owns ``__consumer_offsets``, appends the
coordinator's records to it and replays them at start-up.

``__consumer_offsets`` is created on first use with offsets.topic.num.partitions and
cleanup.policy=compact. In the embedded single-node mode its replication factor is
capped at the number of live brokers (Kafka would refuse to create it with the default
of 3 and log an error; a one-broker deployment is expected to set it to 1).

A request is answered only once what the coordinator appended for it is replicated (the high
watermark passed it): Kafka's GroupMetadataManager appends with acks=-1 and answers in the
append callback, and its CoordinatorRuntime completes a write operation's response when the
high watermark passes its records and a read-only one once it passes the last pending write.
Here every request of a group waits for everything the coordinator appended to that group's
__consumer_offsets partition so far (``last_written``, Kafka's lastWrittenOffset): a
DelayedProduce in the replica manager's produce purgatory, watched under that partition
(:meth:`GroupCoordinatorRuntime.wait_for_writes`, answered through
:meth:`GroupCoordinatorRuntime.answer_after_write`), up to offsets.commit.timeout.ms; a failed
or timed-out replication is answered with the error Kafka's coordinator maps append errors to
(:func:`append_error`). The in-memory state is not
rolled back then (Kafka's runtime reverts to its last committed snapshot): the records stay in
the leader's log and count once replicated, or are lost with a failover, where the new
coordinator loads the state its replica has.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from odradek.controller.store import StoreError
from odradek.controller.topics import TopicError, TopicMeta
from odradek.coordinator import records as offsets_records
from odradek.coordinator.group.classic import ClassicGroup, OffsetAndMetadata
from odradek.coordinator.group.consumer_group import ConsumerGroupCoordinator
from odradek.coordinator.group.consumer_model import ConsumerGroupConfig
from odradek.coordinator.group.coordinator import (
    GroupConfig,
    GroupCoordinator,
    Records,
    WriteError,
    make_scheduler,
)
from odradek.coordinator.group.migration import GroupMigration, MigrationPolicy
from odradek.coordinator.group.txn_offsets import PendingTxnOffsets, validate_txn_commit
from odradek.coordinator.loader import decode_or_skip, load_batches
from odradek.coordinator.share import share_group_records as share_groups_records
from odradek.log.errors import ProducerStateError
from odradek.log.txn_marker import parse_marker
from odradek.log.verification_state import VerificationGuard
from odradek.protocol import errors
from odradek.protocol.records import InvalidRecordError, build_batch, read_inflate_limit
from odradek.purgatory import future_of
from odradek.replication.delayed_produce import DelayedProduce

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicRegistry
    from odradek.log.log import AppendInfo, Log
    from odradek.replication.partition import Partition

log = logging.getLogger("odradek.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"


class CoordinatorPartitions(Protocol):
    """What the runtime needs of the replica manager: lead, append, wait for replication."""

    def leading(self, topic: str, partition: int) -> Partition | None: ...

    def append_internal(
        self, part: Partition, plog: Log, batch: bytes | bytearray, now_ms: int, *,
        require_verification: bool = False, verification_guard: VerificationGuard | None = None,
    ) -> AppendInfo: ...

    def wait_for_replication(
        self, required: dict[tuple[str, int], int], timeout_ms: int
    ) -> dict[tuple[str, int], int] | DelayedProduce: ...


class ShareGroupRecords(Protocol):
    """The share groups' side of ``__consumer_offsets`` (KIP-932; server.share_services): their records
    (types 10-15) replayed at load, their groups forgotten when a partition moves away."""

    def replay(self, key: bytes, value: bytes | None) -> None: ...

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> list[str]: ...


class LogLookup(Protocol):
    def get_log(self, topic: str, partition: int) -> Log | None: ...


class TopicCreator(Protocol):
    """Creates __consumer_offsets (the broker's topic admin, through the controller)."""

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, assignment: Any = None,
        configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
    ) -> Any: ...


# how long a request to create an internal topic counts as in flight before it is made again
TOPIC_CREATION_RETRY_MS = 2000


class TopicCreationGate:
    """One request to create the internal topic ``name`` (``__consumer_offsets``,
    ``__transaction_state``) in flight at a time, as Kafka's AutoTopicCreationManager keeps its
    inflight topics: :meth:`ensure` asks for the creation, and until the topic shows up in the
    metadata cache, or ``retry_ms`` passes, further callers are answered False without asking the
    metadata store again (10,000 JoinGroups arriving before __consumer_offsets existed each made a
    synchronous creation call, and the event loop stalled for half a minute). A failed request
    is made again after ``retry_ms`` too, not by the next caller."""

    def __init__(
        self, topics: TopicRegistry, name: str, now_ms: Callable[[], int], retry_ms: int = TOPIC_CREATION_RETRY_MS,
    ) -> None:
        self.topics = topics
        self.name = name
        self.now_ms = now_ms
        self.retry_ms = retry_ms
        self.requested_ms: int | None = None  # when this broker last asked for the creation

    def ensure(self, create: Callable[[], bool]) -> bool:
        """True when the topic exists; else ``create()`` (True when the topic exists afterwards)
        unless a request is already in flight, then False."""
        if self.topics.get(self.name) is not None:
            return True
        now = self.now_ms()
        if self.requested_ms is not None and now - self.requested_ms < self.retry_ms:
            return False
        self.requested_ms = now
        return create()


class GroupCoordinatorRuntime:
    """The group coordinator on this broker. Subscribes to leadership of ``__consumer_offsets``
    partitions through :meth:`on_leadership` (a ReplicaManager leadership listener)."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicRegistry,
        admin: TopicCreator,
        replicas: CoordinatorPartitions,
        logs: LogLookup,
        now_ms: Callable[[], int],
    ) -> None:
        self.config = cfg = config
        self.topics = topics
        self.admin = admin
        self.replicas = replicas
        self.logs = logs
        self.now_ms = now_ms
        self.num_partitions = int(cfg.get("offsets.topic.num.partitions"))
        meta = topics.get(OFFSETS_TOPIC)
        if meta is not None:
            self.num_partitions = len(meta.partitions)
        self.coordinator = GroupCoordinator(
            GroupConfig(
                num_partitions=self.num_partitions,
                min_session_timeout_ms=int(cfg.get("group.min.session.timeout.ms")),
                max_session_timeout_ms=int(cfg.get("group.max.session.timeout.ms")),
                initial_rebalance_delay_ms=int(cfg.get("group.initial.rebalance.delay.ms")),
                max_size=int(cfg.get("group.max.size")),
                offset_metadata_max_bytes=int(cfg.get("offset.metadata.max.bytes")),
                offsets_retention_ms=int(cfg.get("offsets.retention.minutes")) * 60_000,
            ),
            make_scheduler(asyncio.get_running_loop(), now_ms),
            self._write,
            self.partition_exists,
        )
        # consumer-protocol (KIP-848) groups: membership in memory, offsets through the above
        classic = self.coordinator
        self.consumer = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                heartbeat_interval_ms=int(cfg.get("group.consumer.heartbeat.interval.ms")),
                session_timeout_ms=int(cfg.get("group.consumer.session.timeout.ms")),
                assignors=tuple(cfg.get("group.consumer.assignors")),
                max_size=int(cfg.get("group.consumer.max.size")),
            ),
            classic.scheduler,
            _TopicView(topics),
            classic_group_active=lambda gid: gid in classic.groups and not classic.groups[gid].is_empty,
            on_empty=self._consumer_group_emptied,
        )
        classic.modern = self.consumer
        # KIP-848's online upgrade and downgrade between the two kinds of group
        self.consumer.migration = GroupMigration(
            MigrationPolicy.parse(str(cfg.get("group.consumer.migration.policy"))),
            classic,
            self.consumer,
            classic_max_size=int(cfg.get("group.max.size")),
            consumer_max_size=int(cfg.get("group.consumer.max.size")),
            now_ms=now_ms,
        )
        topics.listeners.append(self._on_topic_event)
        # the __consumer_offsets partitions this broker leads, and so coordinates
        self.owned: set[int] = set()
        # per partition: the end offset of the coordinator's last append (what a response waits for)
        self.last_written: dict[int, int] = {}
        # offsets committed by transactions that have not ended (TxnOffsetCommit)
        self.txn_offsets = PendingTxnOffsets()
        # __consumer_offsets is created on first use, one request in flight at a time
        self.topic_creation = TopicCreationGate(topics, OFFSETS_TOPIC, now_ms)
        # share groups (KIP-932): their records are replayed there (attach_share_groups)
        self.share_groups: ShareGroupRecords | None = None

    def _consumer_group_emptied(self, group_id: str, now_ms: int) -> None:
        holder = self.coordinator.groups.get(group_id)  # the offsets of the group; expiry counts from now
        if holder is not None:
            holder.state_timestamp = now_ms

    def _on_topic_event(self, event: str, meta: TopicMeta) -> None:
        if meta.name == OFFSETS_TOPIC and event in ("created", "partitions"):
            self.num_partitions = self.coordinator.config.num_partitions = len(meta.partitions)
        if event in ("created", "partitions", "deleted"):
            self.consumer.on_topic_changed(meta.name)

    def coordinator_error(self, group_id: str) -> int:
        """COORDINATOR_NOT_AVAILABLE while __consumer_offsets is missing (its creation is
        started), NOT_COORDINATOR when this broker does not lead the group's partition. A partition this
        broker owns answers for itself (Kafka's isCoordinatorForGroup): the controller's LeaderAndIsr comes
        before the UpdateMetadata that shows the topic in this broker's metadata cache."""
        if not group_id:
            return errors.NONE
        if self.coordinator.partition_for(group_id) in self.owned:
            return errors.NONE
        if self.topics.get(OFFSETS_TOPIC) is None:
            self.ensure_topic()
            return errors.COORDINATOR_NOT_AVAILABLE
        if self.coordinator.partition_for(group_id) not in self.owned:
            return errors.NOT_COORDINATOR
        return errors.NONE

    # -- topic
    def ensure_topic(self) -> bool:
        """Create __consumer_offsets if missing; True when it exists afterwards (in cluster
        mode: once the controller has made it known). One request is in flight at a time
        (:class:`TopicCreationGate`)."""
        return self.topic_creation.ensure(self._create_topic)

    def _create_topic(self) -> bool:
        cfg = self.config
        return create_internal_topic(
            self.topics, self.admin, OFFSETS_TOPIC, self.num_partitions, "offsets.topic.replication.factor",
            int(cfg.get("offsets.topic.replication.factor")),
            lambda _rf: {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(cfg.get("offsets.topic.segment.bytes")),
            },
        )

    def partition_exists(self, topic: str, partition: int) -> bool:
        meta = self.topics.get(topic)
        return meta is not None and 0 <= partition < len(meta.partitions)

    def attach_share_groups(self, share_groups: ShareGroupRecords) -> None:
        """Route the share groups' records to ``share_groups``; the partitions loaded already are read again
        for them."""
        self.share_groups = share_groups
        for p in sorted(self.owned):
            plog = self.logs.get_log(OFFSETS_TOPIC, p)
            if plog is not None:
                share_groups.unload(self._in_partition(p))
                self._replay(plog, share_only=True)

    def _in_partition(self, partition: int) -> Callable[[str], bool]:
        return lambda group_id: self.coordinator.partition_for(group_id) == partition

    # -- writes
    def write_records(self, group_id: str, records: Records) -> int:
        """Append ``records`` to the group's partition (share groups' records); the partition, for
        :meth:`after_write`. Raises WriteError when this broker cannot."""
        partition = self.coordinator.partition_for(group_id)
        self._write(partition, records)
        return partition

    def _write(self, partition: int, records: Records, producer_id: int = -1, producer_epoch: int = -1,
               require_verification: bool = False, verification_guard: VerificationGuard | None = None) -> None:
        """Append ``records`` to a partition this broker coordinates; with a producer id, as a
        transactional batch of that producer (TxnOffsetCommit, Kafka's storeOffsets with a
        producer id: no sequence)."""
        rm = self.replicas
        plog = self.logs.get_log(OFFSETS_TOPIC, partition)
        part = rm.leading(OFFSETS_TOPIC, partition)
        if part is None and not self.ensure_topic():  # led here: the topic exists, whatever the cache says yet
            raise WriteError(errors.COORDINATOR_NOT_AVAILABLE)
        if plog is None or part is None or partition not in self.owned:
            raise WriteError(errors.NOT_COORDINATOR)
        batch = build_batch([(k, v) for k, v in records], timestamp=self.now_ms(), producer_id=producer_id,
                            producer_epoch=producer_epoch, transactional=producer_id >= 0)
        try:
            info = rm.append_internal(part, plog, batch, self.now_ms(), require_verification=require_verification,
                                      verification_guard=verification_guard)
        except OSError as e:
            log.error("failed to append to %s-%d: %s", OFFSETS_TOPIC, partition, e)
            raise WriteError(errors.NOT_COORDINATOR) from e
        except ProducerStateError as e:  # a transactional commit from a fenced producer epoch
            code = errors.PRODUCER_FENCED if e.error_code == errors.INVALID_PRODUCER_EPOCH else e.error_code
            raise WriteError(code) from e
        except InvalidRecordError as e:
            # a record over the partition's max.message.bytes (a group record naming thousands of
            # members): Kafka's CoordinatorRuntime throws RecordTooLargeException, which the
            # coordinator answers as it answers any failed append (UNKNOWN_SERVER_ERROR)
            log.error("failed to append to %s-%d: %s", OFFSETS_TOPIC, partition, e)
            raise WriteError(append_error(e.error_code)) from e
        self.last_written[partition] = max(self.last_written.get(partition, 0), info.last_offset + 1)

    def unreplicated(self, partitions: Iterable[int]) -> dict[tuple[str, int], int]:
        """The end offsets of the coordinator's appends to ``partitions`` that the high
        watermark has not passed yet."""
        out: dict[tuple[str, int], int] = {}
        for p in set(partitions):
            end = self.last_written.get(p)
            if end is None:
                continue
            plog = self.logs.get_log(OFFSETS_TOPIC, p)
            if plog is not None and plog.high_watermark >= end:
                continue
            out[(OFFSETS_TOPIC, p)] = end
        return out

    def wait_for_writes(self, partitions: Iterable[int]) -> int | DelayedProduce:
        """The outcome of the coordinator's appends to ``partitions`` so far: NONE when they are
        replicated, the error Kafka's coordinator maps a failed append to, or a DelayedProduce
        in the replica manager's produce purgatory (up to offsets.commit.timeout.ms) whose
        response :func:`write_outcome` maps the same way."""
        required = self.unreplicated(partitions)
        if not required:
            return errors.NONE
        timeout_ms = int(self.config.get("offsets.commit.timeout.ms"))
        outcome = self.replicas.wait_for_replication(required, timeout_ms)
        return write_outcome(outcome) if isinstance(outcome, dict) else outcome

    def after_write(self, ctx: Any, partitions: Iterable[int], then: Callable[[int], None]) -> None:
        """``then(NONE)`` once the coordinator's appends to ``partitions`` so far are replicated
        (at once when they are), ``then(error)`` when replication fails or times out
        (offsets.commit.timeout.ms); a wait is parked on the request's connection."""
        outcome = self.wait_for_writes(partitions)
        if isinstance(outcome, int):
            then(outcome)
            return
        ctx.connection.park(future_of(outcome, lambda codes: then(write_outcome(codes))), outcome.cancel)

    def answer_after_write(self, ctx: Any, partitions: Iterable[int], build: Callable[[int], Any]) -> Any:
        """``build(code)`` as the response now, or a future of it once :meth:`wait_for_writes`
        decides."""
        outcome = self.wait_for_writes(partitions)
        if isinstance(outcome, int):
            return build(outcome)
        fut = future_of(outcome, lambda codes: build(write_outcome(codes)))
        ctx.connection.park(fut, outcome.cancel)
        return fut

    # -- transactional offsets (TxnOffsetCommit)
    def partition_of(self, group_id: str) -> int:
        """The group's __consumer_offsets partition (what AddOffsetsToTxn adds to a transaction)."""
        return self.coordinator.partition_for(group_id)

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str]],
        require_verification: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """TxnOffsetCommit: (error for every partition, per-partition errors). The offsets are
        written in a transactional batch of the producer and stay pending until its marker
        (KIP-98); a member that is no longer in the group's generation is fenced (KIP-447).
        ``require_verification``/``verification_guard``: as for a produce (KIP-890,
        :mod:`odradek.log.verification_state`)."""
        coord = self.coordinator
        if self.consumer.owns(group_id):
            code = self.consumer.validate_offset_commit(group_id, member_id, generation_id)
        else:
            code = validate_txn_commit(coord.groups.get(group_id), member_id, generation_id, group_instance_id)
        if code:
            return code, {}
        now = self.now_ms()
        results: dict[tuple[str, int], int] = {}
        records: Records = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for (topic, partition), (offset, epoch, metadata) in offsets.items():
            if not self.partition_exists(topic, partition):
                results[(topic, partition)] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if len((metadata or "").encode()) > coord.config.offset_metadata_max_bytes:
                results[(topic, partition)] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[(topic, partition)] = OffsetAndMetadata(offset, epoch, metadata or "", now)
            records.append((
                offsets_records.encode_offset_key(group_id, topic, partition),
                offsets_records.encode_offset_value(offsets_records.OffsetValue(offset, epoch, metadata or "", now)),
            ))
        if records:
            try:
                self._write(coord.partition_for(group_id), records, producer_id, producer_epoch,
                            require_verification, verification_guard)
            except WriteError as e:
                return e.error_code, {}
            self.txn_offsets.add(producer_id, group_id, accepted)
            for tp in accepted:
                results[tp] = errors.NONE
        return errors.NONE, results

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction landed in __consumer_offsets-``partition``:
        its pending offsets there become the groups' committed offsets (COMMIT) or are dropped
        (Kafka's GroupMetadataManager.handleTxnCompletion)."""
        coord = self.coordinator
        done = self.txn_offsets.complete(producer_id, commit, lambda g: coord.partition_for(g) == partition)
        for group_id, offs in done.items():
            g = coord.groups.get(group_id)
            if g is None:
                g = coord.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.now_ms())
            g.offsets.update(offs)

    def _replay_txn_offset(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:
            return
        try:
            k = offsets_records.decode_key(key)
            if not isinstance(k, offsets_records.OffsetKey):
                return
            v = offsets_records.decode_offset_value(value)
        except offsets_records.RecordFormatError as e:
            log.warning("skipping an unreadable transactional offset commit: %s", e)
            return
        self.txn_offsets.add(producer_id, k.group, {
            (k.topic, k.partition): OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                                      v.expire_timestamp)})

    # -- loading
    def on_leadership(self, topic: str, partition: int, leader: bool) -> None:
        """Leadership of a __consumer_offsets partition moved; its groups follow."""
        if topic != OFFSETS_TOPIC:
            return
        if leader and partition not in self.owned:
            plog = self.logs.get_log(OFFSETS_TOPIC, partition)
            if self.share_groups is not None:
                self.share_groups.unload(self._in_partition(partition))
            t0 = time.monotonic()
            count = self._replay(plog) if plog is not None else 0
            self.coordinator.finish_loading(partition)
            self.owned.add(partition)
            log.info("loaded the groups of %s-%d (%d records) in %.0f ms; coordinating them now",
                     OFFSETS_TOPIC, partition, count, (time.monotonic() - t0) * 1000)
        elif not leader and partition in self.owned:
            self.owned.discard(partition)
            self.last_written.pop(partition, None)
            self.txn_offsets.drop(lambda g: self.coordinator.partition_for(g) == partition)
            gone = self.coordinator.unload_partition(partition)
            self.consumer.unload_partition(partition, self.coordinator.partition_for)
            if self.share_groups is not None:
                gone += self.share_groups.unload(self._in_partition(partition))
            log.info("no longer coordinating the %d group(s) of %s-%d", len(gone), OFFSETS_TOPIC, partition)

    def _replay(self, plog: Log, share_only: bool = False) -> int:
        """Apply every record of one __consumer_offsets partition (``share_only``: only the share groups'
        records); returns how many."""
        count = 0
        limit = read_inflate_limit(plog.config.max_message_bytes)
        for h, batch, first in load_batches(plog):
            if h.is_control and share_only:
                continue
            if h.is_control:
                try:
                    marker = parse_marker(batch, h)
                except Exception as e:  # a marker that does not parse is skipped, as any bad record
                    log.error("skipping the control batch at offset %d of %s-%d: %s",
                              h.base_offset, plog.topic, plog.partition, e)
                    marker = None
                if marker is not None and h.base_offset >= first:
                    self.complete_txn(plog.partition, h.producer_id, not marker.is_abort)
                continue
            for r in decode_or_skip(batch, h, limit, plog, "groups"):
                if r.offset >= first:
                    if share_groups_records.is_share_group_key(r.key):
                        self._replay_share_group(r.key, r.value)
                    elif share_only:
                        continue
                    elif h.is_transactional:
                        self._replay_txn_offset(h.producer_id, r.key, r.value)
                    else:
                        self.coordinator.replay(r.key, r.value)
                    count += 1
        return count

    def _replay_share_group(self, key: bytes | None, value: bytes | None) -> None:
        if self.share_groups is None or key is None:
            return
        try:
            self.share_groups.replay(key, value)
        except share_groups_records.ShareGroupRecordError as e:
            log.warning("skipping an unreadable share group record: %s", e)

    def shutdown(self) -> None:
        self.coordinator.unload()
        self.consumer.unload()



def create_internal_topic(
    topics: TopicRegistry, admin: TopicCreator, name: str, num_partitions: int, rf_config: str, rf: int,
    configs: Callable[[int], Mapping[str, str | None]],
) -> bool:
    """Create the internal topic ``name`` if missing; True when it exists afterwards (callers go through
    a :class:`TopicCreationGate`, which keeps one such request in flight). Its replication factor
    (the setting ``rf_config``) is capped at the live brokers, with a warning (Kafka would refuse; a
    one-broker deployment is expected to set it to 1); ``configs(rf)`` gives its topic configs."""
    if topics.get(name) is not None:
        return True
    try:
        live = len(topics.live_brokers())
    except StoreError as e:
        log.warning("cannot create %s now: %s", name, e)
        return False
    if rf > live:
        log.warning("%s=%d exceeds the %d live broker(s); creating %s with replication factor %d",
                    rf_config, rf, live, name, live)
        rf = live
    log.info("asking for the creation of %s (%d partitions, replication factor %d)", name, num_partitions, rf)
    try:
        admin.create_topic(name, num_partitions, rf, configs=configs(rf))
    except TopicError as e:
        if e.error_code != errors.TOPIC_ALREADY_EXISTS:
            log.error("could not create %s: %s", name, e.message)
            return False
    except StoreError as e:
        log.error("could not create %s: %s", name, e)
        return False
    return topics.get(name) is not None


def write_outcome(codes: dict[tuple[str, int], int]) -> int:
    """One error for a request from its writes' replication outcomes (NONE when all replicated)."""
    worst = next((c for c in codes.values() if c != errors.NONE), errors.NONE)
    if worst != errors.NONE:
        log.warning("coordinator write to %s not replicated: error %d; answering %d",
                    sorted(p for _, p in codes), worst, append_error(worst))
    return append_error(worst)


def append_error(code: int) -> int:
    """The error a coordinator request gets for a failed __consumer_offsets append (Kafka's
    GroupMetadataManager.storeGroup/storeOffsets, GroupCoordinatorService's mapping)."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_FETCH_SIZE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


class _TopicView:
    """What consumer groups need of the topic registry."""

    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        meta = self.registry.get(name)
        return (meta.topic_id, len(meta.partitions)) if meta is not None else None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        meta = self.registry.by_id.get(topic_id)
        return meta.name if meta is not None else None

    def names(self) -> Iterable[str]:
        return [n for n, m in self.registry.topics.items() if not m.is_internal]
