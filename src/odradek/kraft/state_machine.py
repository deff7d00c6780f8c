"""The controller's metadata state machine, Kafka's QuorumController narrowed to brokers and topics: pure,
with time given by the caller.

- ``committed`` is the :class:`~odradek.metadata.image.MetadataImage` of the log up to the high watermark
  (the bootstrap snapshot first, then every committed batch, KIP-868 transactions honoured), on every voter.
- The active controller also keeps ``pending``: records it has appended but that are not committed yet
  (Kafka's timeline data structures, narrowed): a request is checked against ``committed`` plus
  ``pending`` (so two registrations in flight see each other) and answered only once its records commit.
- Brokers (Kafka's ClusterControlManager and BrokerHeartbeatManager): BrokerRegistration gives a
  RegisterBrokerRecord (fenced, the broker epoch is the record's offset), the broker's feature ranges checked
  against the finalized levels; BrokerHeartbeat unfences a broker whose metadata offset has reached its
  registration record (BrokerRegistrationChangeRecord fenced=-1, Kafka 4.4's handleBrokerUnfenced), a broker
  without heartbeat for ``broker.session.timeout.ms`` is fenced (fenced=1), want_shut_down starts a controlled
  shutdown (in_controlled_shutdown=1; the broker's leaderships move away) and ends it once it leads nothing.
- Topics (Kafka's ReplicationControlManager.createTopics): TopicRecord, ConfigRecords, PartitionRecords
  with replicas striped over the unfenced brokers (Kafka's StripedReplicaPlacer without racks: a rotating
  start, consecutive brokers), the first replica the leader, every replica in the ISR.
- Topic deletion (Kafka's ControllerApis.deleteTopics with ReplicationControlManager.findTopicIds /
  findTopicNames / deleteTopic): names and ids resolved, duplicates refused, one RemoveTopicRecord per topic
  (the brokers drop its partitions, and the image its configs, when they apply it); TOPIC_DELETION_DISABLED
  (INVALID_REQUEST before v3) for the whole request when ``delete.topic.enable`` is false.
- New partitions (Kafka's ControllerApis.createPartitions and ReplicationControlManager.createPartitions):
  a PartitionRecord per partition added, at the topic's replication factor, placed like a new topic's or as
  the request assigns them (validateManualPartitionAssignment's INVALID_REPLICA_ASSIGNMENT errors), the ISR
  the replicas that are unfenced and not shutting down, its first the leader; INVALID_PARTITIONS when the
  count does not grow.
- Topic configs (Kafka's ConfigurationControlManager.incrementalAlterConfigs): SET / DELETE / APPEND /
  SUBTRACT give a ConfigRecord per config whose value changes, the result validated as Kafka's
  ControllerConfigurationValidator does (odradek.config's topic config table), then the topic's existence
  checked.

Not here: racks in placement (and so fenced brokers as replicas of last resort: a replication factor above
the unfenced brokers is refused), partition reassignment, ELR elections, configs of other resources than
topics, the controller mutation quota and authorization (the controller listener is PLAINTEXT with no
authorizer).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.config import T_LIST, TOPIC_CONFIGS, ConfigError, validate_topic_configs
from odradek.metadata.batches import MetadataBatch
from odradek.metadata.delta import MetadataDelta, apply_batches
from odradek.metadata.features import METADATA_VERSION
from odradek.metadata.image import EMPTY_IMAGE, MetadataImage
from odradek.metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from odradek.protocol import errors

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
FENCE, UNFENCE = 1, -1  # BrokerRegistrationFencingChange
IN_CONTROLLED_SHUTDOWN = 1  # BrokerRegistrationInControlledShutdownChange
NO_LEADER_CHANGE = -2
DEFAULT_SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms
DEFAULT_HEARTBEAT_INTERVAL_MS = 2000  # broker.heartbeat.interval.ms
PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
ZERO_UUID = uuid.UUID(int=0)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
# Errors.X.message(): what ApiError(X) carries when no other message is given
UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."


_MARKERS = (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)


class ControllerError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Registration:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]
    rack: str | None
    log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class Heartbeat:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool


@dataclass(frozen=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicResult:
    name: str
    error_code: int = errors.NONE
    error_message: str | None = None
    topic_id: uuid.UUID = uuid.UUID(int=0)
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True)
class DeleteResult:
    """DeleteTopicsResponse's DeletableTopicResult."""
    name: str | None
    topic_id: uuid.UUID = ZERO_UUID
    error_code: int = errors.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class NewPartitions:
    """CreatePartitionsRequest's CreatePartitionsTopic: the new count, and the replicas of each partition
    added when the request assigns them (None: placed by the controller)."""
    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class PartitionsResult:
    name: str
    error_code: int = errors.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class AlterConfig:
    """IncrementalAlterConfigsRequest's AlterableConfig: a config name, its operation (OP_*) and value."""
    name: str
    operation: int
    value: str | None


@dataclass(frozen=True)
class AlterResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterConfig, ...]


@dataclass(frozen=True)
class AlterResult:
    resource_type: int
    resource_name: str
    error_code: int = errors.NONE
    error_message: str | None = None


class ControllerState:
    """The image and the records in flight; every method returns the records a request writes."""

    def __init__(self, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS, default_partitions: int = 1,
                 default_replication_factor: int = 1) -> None:
        self.committed: MetadataImage = EMPTY_IMAGE
        self.pending: list[tuple[int, list[RecordAndVersion]]] = []  # (last offset, records), in log order
        self.session_timeout_ms = session_timeout_ms
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.last_heartbeat_ms: dict[int, int] = {}  # the active controller's view (BrokerHeartbeatManager)
        self.registration_offset: dict[int, int] = {}  # broker id -> offset of its RegisterBrokerRecord
        self._placement_start = 0

    # --- the log -------------------------------------------------------------------------------------

    def load_snapshot(self, image: MetadataImage) -> None:
        """The committed image from a snapshot; a broker's registration record is at its broker epoch (the
        epoch is the record's offset)."""
        self.committed = image
        self.pending = []
        self.registration_offset = {bid: b.epoch for bid, b in image.brokers.items()}

    def apply_committed(self, batches: Iterable[MetadataBatch]) -> None:
        """Batches below the high watermark, in log order; pending writes they cover are dropped."""
        batches = list(batches)
        if not batches:
            return
        for b in batches:
            for e in b.entries:
                if e.record is not None and isinstance(e.record.record, RegisterBrokerRecord):
                    self.registration_offset[e.record.record.broker_id] = e.offset
        self.committed = apply_batches(self.committed, batches)
        last = batches[-1].last_offset
        self.pending = [(o, rs) for o, rs in self.pending if o > last]

    def written(self, last_offset: int, records: Sequence[RecordAndVersion], first_offset: int) -> None:
        """The active controller appended ``records`` at ``first_offset``..``last_offset``."""
        self.pending.append((last_offset, list(records)))
        for i, r in enumerate(records):
            if isinstance(r.record, RegisterBrokerRecord):
                self.registration_offset[r.record.broker_id] = first_offset + i

    def reset_pending(self) -> None:
        """Leadership lost: what was not committed may never be."""
        self.pending = []

    def image(self) -> MetadataImage:
        """The committed image with the records in flight (the active controller's view)."""
        if not self.pending:
            return self.committed
        delta = MetadataDelta(self.committed)
        for _, records in self.pending:
            for r in records:
                # a write is one batch: its transaction markers (the bootstrap's) enclose all of it
                if not isinstance(r.record, _MARKERS):
                    delta.replay(r.record)
        return delta.apply()

    # --- brokers -------------------------------------------------------------------------------------

    def register_broker(self, req: Registration, cluster_id: str, next_offset: int,
                        now_ms: int) -> list[RecordAndVersion]:
        """Kafka's ClusterControlManager.registerBroker: the broker epoch is the record's offset."""
        if req.cluster_id != cluster_id:
            raise ControllerError(errors.INCONSISTENT_CLUSTER_ID,
                                  f"Expected cluster ID {cluster_id}, but got cluster ID {req.cluster_id}")
        image = self.image()
        existing = image.brokers.get(req.broker_id)
        if existing is not None and existing.incarnation_id != req.incarnation_id:
            last = self.last_heartbeat_ms.get(req.broker_id)
            if last is not None and now_ms - last < self.session_timeout_ms:
                raise ControllerError(errors.DUPLICATE_BROKER_REGISTRATION,
                                      f"Another broker is registered with that broker id. The broker's session "
                                      f"expires in {self.session_timeout_ms - (now_ms - last)} ms")
        supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
        for name, level in sorted(image.finalized_features().items()):
            lo, hi = supported.get(name, (0, 0))
            if level > 0 and not lo <= level <= hi:
                raise ControllerError(errors.UNSUPPORTED_VERSION,
                                      f"Unable to register because the broker does not support finalized version "
                                      f"{level} of {name}. The broker wants a version between {lo} and {hi}, "
                                      "inclusive.")
        if METADATA_VERSION not in supported:
            raise ControllerError(errors.UNSUPPORTED_VERSION,
                                  "Unable to register because the broker does not advertise metadata.version")
        record = RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=next_offset,
            end_points=req.listeners, features=req.features, rack=req.rack, fenced=True,
            in_controlled_shutdown=False, log_dirs=req.log_dirs)
        self.last_heartbeat_ms[req.broker_id] = now_ms
        return [RecordAndVersion(record, 3)]

    def heartbeat(self, hb: Heartbeat, now_ms: int) -> tuple[list[RecordAndVersion], HeartbeatResult]:
        """Kafka's ReplicationControlManager.processBrokerHeartbeat with BrokerHeartbeatManager's next state."""
        image = self.image()
        reg = image.brokers.get(hb.broker_id)
        if reg is None:
            raise ControllerError(errors.BROKER_ID_NOT_REGISTERED,
                                  f"Broker {hb.broker_id} is not registered.")
        if reg.epoch != hb.broker_epoch:
            raise ControllerError(errors.STALE_BROKER_EPOCH,
                                  f"Expected broker epoch {reg.epoch}, but got broker epoch {hb.broker_epoch}")
        self.last_heartbeat_ms[hb.broker_id] = now_ms
        caught_up = hb.current_metadata_offset >= self.registration_offset.get(hb.broker_id, reg.epoch)
        records: list[RecordAndVersion] = []
        fenced, shut_down = reg.fenced, False
        if hb.want_shut_down:
            if reg.fenced:
                shut_down = True  # a fenced broker leads nothing: SHUTDOWN_NOW
            else:
                if not reg.in_controlled_shutdown:
                    records.append(self._change(hb.broker_id, reg.epoch, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN))
                    records += self._move_leaders_away(image, hb.broker_id)
                shut_down = not self._leads_any(image, hb.broker_id) or bool(records)
        elif reg.fenced and caught_up and not hb.want_fence:
            records.append(self._change(hb.broker_id, reg.epoch, fenced=UNFENCE))
            records += self._elect_leaderless(image, hb.broker_id)
            fenced = False
        elif not reg.fenced and hb.want_fence:
            records.append(self._change(hb.broker_id, reg.epoch, fenced=FENCE))
            records += self._move_leaders_away(image, hb.broker_id)
            fenced = True
        return records, HeartbeatResult(is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[list[RecordAndVersion], int]:
        """Kafka's ProducerIdControlManager.generateNextProducerId: a block of 1000 ids from the next one;
        the records and the block's first id."""
        image = self.image()
        reg = image.brokers.get(broker_id)
        if reg is None:
            raise ControllerError(errors.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
        if reg.epoch != broker_epoch:
            raise ControllerError(errors.STALE_BROKER_EPOCH,
                                  f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}")
        start = max(image.producer_ids, 0)
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                   next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return [RecordAndVersion(record, 0)], start

    def expire_sessions(self, now_ms: int) -> list[RecordAndVersion]:
        """Unfenced brokers whose last heartbeat is ``broker.session.timeout.ms`` old are fenced."""
        image = self.image()
        records: list[RecordAndVersion] = []
        for broker_id, reg in sorted(image.brokers.items()):
            last = self.last_heartbeat_ms.setdefault(broker_id, now_ms)  # a new active controller starts the clock
            if not reg.fenced and now_ms - last >= self.session_timeout_ms:
                records.append(self._change(broker_id, reg.epoch, fenced=FENCE))
                records += self._move_leaders_away(image, broker_id)
        return records

    def next_expiry_ms(self) -> int | None:
        image = self.image()
        times = [self.last_heartbeat_ms.get(b, 0) + self.session_timeout_ms
                 for b, r in image.brokers.items() if not r.fenced]
        return min(times) if times else None

    @staticmethod
    def _change(broker_id: int, epoch: int, *, fenced: int = 0, in_controlled_shutdown: int = 0) -> RecordAndVersion:
        version = 1 if in_controlled_shutdown else 0
        return RecordAndVersion(BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown),
            version)

    @staticmethod
    def _usable(image: MetadataImage, broker_id: int) -> bool:
        reg = image.brokers.get(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    @staticmethod
    def _leads_any(image: MetadataImage, broker_id: int) -> bool:
        return any(p.leader == broker_id for t in image.topics.values() for p in t.partitions.values())

    def _move_leaders_away(self, image: MetadataImage, broker_id: int) -> list[RecordAndVersion]:
        """The broker leaves every ISR it is in (but the last), and partitions it leads get another leader
        from the ISR, or none (Kafka's generateLeaderAndIsrUpdates)."""
        out: list[RecordAndVersion] = []
        for tid, topic in sorted(image.topics.items(), key=lambda kv: kv[1].name):
            for pid, p in sorted(topic.partitions.items()):
                if broker_id not in p.isr:
                    continue
                isr = tuple(r for r in p.isr if r != broker_id) or p.isr
                leader = p.leader
                if p.leader == broker_id:
                    leader = next((r for r in isr if r != broker_id and self._usable(image, r)), -1)
                if isr == p.isr and leader == p.leader:
                    continue
                out.append(RecordAndVersion(PartitionChangeRecord(
                    partition_id=pid, topic_id=tid, isr=isr if isr != p.isr else None,
                    leader=leader if leader != p.leader else NO_LEADER_CHANGE), 0))
        return out

    def _elect_leaderless(self, image: MetadataImage, broker_id: int) -> list[RecordAndVersion]:
        out: list[RecordAndVersion] = []
        for tid, topic in sorted(image.topics.items(), key=lambda kv: kv[1].name):
            for pid, p in sorted(topic.partitions.items()):
                if p.leader == -1 and broker_id in p.isr:
                    out.append(RecordAndVersion(PartitionChangeRecord(
                        partition_id=pid, topic_id=tid, leader=broker_id), 0))
        return out

    # --- topics --------------------------------------------------------------------------------------

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                      topic_ids: Iterable[uuid.UUID] | None = None) -> tuple[list[RecordAndVersion], list[TopicResult]]:
        image = self.image()
        ids = iter(topic_ids) if topic_ids is not None else None
        records: list[RecordAndVersion] = []
        results: list[TopicResult] = []
        seen: set[str] = set()
        usable = sorted(b for b in image.brokers if self._usable(image, b))
        for t in topics:
            if t.name in seen:
                results.append(TopicResult(t.name, errors.INVALID_REQUEST, "Duplicate topic name."))
                continue
            seen.add(t.name)
            if image.topic(t.name) is not None:
                results.append(TopicResult(t.name, errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."))
                continue
            try:
                assignment = self._assignment(t, usable)
            except ControllerError as e:
                results.append(TopicResult(t.name, e.code, e.message))
                continue
            tid = next(ids) if ids is not None else uuid.uuid4()
            rf = len(assignment[0])
            results.append(TopicResult(t.name, topic_id=tid, num_partitions=len(assignment), replication_factor=rf))
            if validate_only:
                continue
            records.append(RecordAndVersion(TopicRecord(name=t.name, topic_id=tid), 0))
            for k, v in sorted(t.configs.items()):
                records.append(RecordAndVersion(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name,
                                                             name=k, value=v), 0))
            for pid, replicas in sorted(assignment.items()):
                dirs = tuple(self._default_dir(image, r) for r in replicas)
                records.append(RecordAndVersion(PartitionRecord(
                    partition_id=pid, topic_id=tid, replicas=replicas, isr=replicas, leader=replicas[0],
                    leader_epoch=0, partition_epoch=0, directories=dirs), 1))
        return records, results

    @staticmethod
    def _default_dir(image: MetadataImage, broker_id: int) -> uuid.UUID:
        """ClusterControlManager.defaultDir: the broker's only log dir, else UNASSIGNED (zero)."""
        reg = image.brokers.get(broker_id)
        if reg is not None and len(reg.directories) == 1:
            return reg.directories[0]
        return uuid.UUID(int=0)

    def _assignment(self, t: NewTopic, usable: list[int]) -> dict[int, tuple[int, ...]]:
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise ControllerError(errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                      "numPartitions or replicationFactor was not set to -1.")
            return {p: tuple(r) for p, r in t.assignments.items()}
        partitions = self.default_partitions if t.num_partitions == -1 else t.num_partitions
        rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if partitions <= 0:
            raise ControllerError(errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if rf <= 0:
            raise ControllerError(errors.INVALID_REPLICATION_FACTOR,
                                  "Replication factor must be larger than 0, or -1 to use the default value.")
        if rf > len(usable):
            raise ControllerError(errors.INVALID_REPLICATION_FACTOR,
                                  f"Unable to replicate the partition {rf} time(s): The target replication factor "
                                  f"of {rf} cannot be reached because only {len(usable)} broker(s) are registered.")
        return dict(enumerate(self._place(partitions, rf, usable)))

    def _place(self, partitions: int, rf: int, usable: list[int]) -> list[tuple[int, ...]]:
        """The striped placement: each new placement starts one broker further."""
        start = self._placement_start
        self._placement_start += 1
        return [tuple(usable[(start + p + i) % len(usable)] for i in range(rf)) for p in range(partitions)]

    # --- topic deletion ------------------------------------------------------------------------------

    def delete_topics(self, names: Sequence[str | None], states: Sequence[tuple[str | None, uuid.UUID | None]] = (),
                      *, enabled: bool = True,
                      api_version: int = 6) -> tuple[list[RecordAndVersion], list[DeleteResult]]:
        """Kafka's ControllerApis.deleteTopics: ``names`` are DeleteTopics' topic_names (before v6), ``states``
        its (name, topic id) states (v6, one of the two given; the zero id, which kio reads as None, for no
        id). The records (a RemoveTopicRecord per topic deleted, one atomic batch) and a result per topic
        named, the refused first."""
        topics = [(n, t or ZERO_UUID) for n, t in states]
        if not enabled:
            # ControllerApis fails the whole request; DeleteTopicsRequest.getErrorResponse names every topic
            code = errors.INVALID_REQUEST if api_version < 3 else errors.TOPIC_DELETION_DISABLED
            states = [(n, ZERO_UUID) for n in names] + [(n, t) for n, t in topics]
            return [], [DeleteResult(n, t, code) for n, t in states]
        image = self.image()
        results: list[DeleteResult] = []
        provided_names: dict[str | None, None] = {}  # insertion-ordered sets
        duplicate_names: dict[str | None, None] = {}
        provided_ids: dict[uuid.UUID, None] = {}
        duplicate_ids: dict[uuid.UUID, None] = {}

        def add_name(name: str | None) -> None:
            if name in duplicate_names or name in provided_names:
                duplicate_names[name] = None
                provided_names.pop(name, None)
            else:
                provided_names[name] = None

        for name in names:
            add_name(name)
        for name, tid in topics:
            if name is None:
                if tid == ZERO_UUID:
                    results.append(DeleteResult(None, ZERO_UUID, errors.INVALID_REQUEST,
                                                "Neither topic name nor id were specified."))
                elif tid in duplicate_ids or tid in provided_ids:
                    duplicate_ids[tid] = None
                    provided_ids.pop(tid, None)
                else:
                    provided_ids[tid] = None
            elif tid == ZERO_UUID:
                add_name(name)
            else:
                results.append(DeleteResult(name, tid, errors.INVALID_REQUEST,
                                            "You may not specify both topic name and topic id."))
        results += [DeleteResult(n, ZERO_UUID, errors.INVALID_REQUEST, "Duplicate topic name.") for n in duplicate_names]
        results += [DeleteResult(None, t, errors.INVALID_REQUEST, "Duplicate topic id.") for t in duplicate_ids]
        id_to_name: dict[uuid.UUID, str] = {}
        for tid in provided_ids:  # ReplicationControlManager.findTopicNames
            topic = image.topics.get(tid)
            if topic is None:
                results.append(DeleteResult(None, tid, errors.UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID_MESSAGE))
            else:
                id_to_name[tid] = topic.name
        for name in provided_names:  # ReplicationControlManager.findTopicIds
            if name is None:
                results.append(DeleteResult(None, ZERO_UUID, errors.INVALID_REQUEST, "Invalid null topic name."))
                continue
            found = image.topic_ids.get(name)
            if found is None:
                results.append(DeleteResult(name, ZERO_UUID, errors.UNKNOWN_TOPIC_OR_PARTITION,
                                            UNKNOWN_TOPIC_OR_PARTITION_MESSAGE))
            elif found in duplicate_ids or found in id_to_name:
                duplicate_ids[found] = None
                id_to_name.pop(found, None)
                results.append(DeleteResult(name, found, errors.INVALID_REQUEST,
                                            "The provided topic name maps to an ID that was already supplied."))
            else:
                id_to_name[found] = name
        records: list[RecordAndVersion] = []
        for tid, name in id_to_name.items():  # ReplicationControlManager.deleteTopic
            records.append(RecordAndVersion(RemoveTopicRecord(topic_id=tid), 0))
            results.append(DeleteResult(name, tid))
        return records, results

    # --- new partitions ------------------------------------------------------------------------------

    def create_partitions(self, topics: Sequence[NewPartitions], *,
                          validate_only: bool = False) -> tuple[list[RecordAndVersion], list[PartitionsResult]]:
        """Kafka's ControllerApis.createPartitions (duplicate names refused first) and
        ReplicationControlManager.createPartitions for each topic; the records are one atomic batch, none
        when ``validate_only``."""
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        results = [PartitionsResult(n, errors.INVALID_REQUEST, "Duplicate topic name.") for n, c in counts.items()
                   if c > 1]
        records: list[RecordAndVersion] = []
        image = self.image()
        for t in topics:
            if counts[t.name] > 1:
                continue
            try:
                added = self._new_partitions(image, t)
            except ControllerError as e:
                results.append(PartitionsResult(t.name, e.code, e.message))
                continue
            results.append(PartitionsResult(t.name))
            if not validate_only:
                records += added
                delta = MetadataDelta(image)  # the next topic sees these partitions' placements taken
                for r in added:
                    delta.replay(r.record)
                image = delta.apply()
        return records, results

    def _new_partitions(self, image: MetadataImage, t: NewPartitions) -> list[RecordAndVersion]:
        topic = image.topic(t.name)
        if topic is None:
            raise ControllerError(errors.UNKNOWN_TOPIC_OR_PARTITION, None)  # UnknownTopicOrPartitionException()
        current = len(topic.partitions)
        if t.count == current:
            raise ControllerError(errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise ControllerError(errors.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                                  f"partition(s); {t.count} would not be an increase.")
        additional = t.count - current
        if t.assignments is not None and len(t.assignments) != additional:
            raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {additional} additional "
                                  f"partition(s), but only {len(t.assignments)} assignment(s) were specified.")
        if not topic.partitions:
            raise ControllerError(errors.UNKNOWN_SERVER_ERROR,
                                  f"Invalid state: topic {t.name} appears to have no partitions.")
        rf = len(next(iter(topic.partitions.values())).replicas)
        placements: list[tuple[int, ...]] = []
        if t.assignments is not None:
            for i, replicas in enumerate(t.assignments):
                self._validate_manual_assignment(image, replicas, rf)
                if not any(self._usable(image, r) for r in replicas):
                    raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual "
                                          f"partition assignment for partition {current + i} are fenced or in "
                                          "controlled shutdown.")
                placements.append(tuple(replicas))
        else:
            usable = sorted(b for b in image.brokers if self._usable(image, b))
            if rf <= 0:
                raise ControllerError(errors.INVALID_REPLICATION_FACTOR,
                                      f"Invalid replication factor {rf}: the replication factor must be positive.")
            if not usable:
                raise ControllerError(errors.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")
            if rf > len(usable):
                raise ControllerError(errors.INVALID_REPLICATION_FACTOR, f"The target replication factor of {rf} "
                                      f"cannot be reached because only {len(usable)} broker(s) are registered.")
            placements = self._place(additional, rf, usable)
        out: list[RecordAndVersion] = []
        for i, replicas in enumerate(placements):
            isr = tuple(r for r in replicas if self._usable(image, r))
            if not isr:
                raise ControllerError(errors.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} "
                                      "time(s): All brokers are currently fenced or in controlled shutdown.")
            dirs = tuple(self._default_dir(image, r) for r in replicas)
            out.append(RecordAndVersion(PartitionRecord(
                partition_id=current + i, topic_id=topic.topic_id, replicas=replicas, isr=isr, leader=isr[0],
                leader_epoch=0, partition_epoch=0, directories=dirs), 1))
        return out

    @staticmethod
    def _validate_manual_assignment(image: MetadataImage, replicas: Sequence[int], rf: int | None) -> None:
        """ReplicationControlManager.validateManualPartitionAssignment."""
        if not replicas:
            raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT,
                                  "The manual partition assignment includes an empty replica list.")
        previous: int | None = None
        for b in sorted(replicas):
            if b not in image.brokers:
                raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                      f"broker {b}, but no such broker is registered.")
            if b == previous:
                raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                      f"the broker {previous} more than once.")
            previous = b
        if rf is not None and len(replicas) != rf:
            raise ControllerError(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes a "
                                  f"partition with {len(replicas)} replica(s), but this is not consistent with "
                                  f"previous partitions, which have {rf} replica(s).")

    # --- topic configs -------------------------------------------------------------------------------

    def incremental_alter_configs(self, resources: Sequence[AlterResource], *,
                                  validate_only: bool = False) -> tuple[list[RecordAndVersion], list[AlterResult]]:
        """Kafka's ControllerApis.handleIncrementalAlterConfigs (a resource named twice refused) and
        ConfigurationControlManager.incrementalAlterConfigs for TOPIC resources; the records are one atomic
        batch, none when ``validate_only``."""
        seen: dict[tuple[int, str], int] = {}
        for r in resources:
            key = (r.resource_type, r.resource_name)
            seen[key] = seen.get(key, 0) + 1
        results: list[AlterResult] = []
        records: list[RecordAndVersion] = []
        answered: set[tuple[int, str]] = set()
        image = self.image()
        for r in resources:
            key = (r.resource_type, r.resource_name)
            if seen[key] > 1:
                if key not in answered:  # one answer per resource named twice
                    answered.add(key)
                    results.append(AlterResult(*key, errors.INVALID_REQUEST, "Duplicate resource."))
                continue
            if r.resource_type != TOPIC_RESOURCE:
                results.append(AlterResult(*key, errors.INVALID_REQUEST, f"Resource type {r.resource_type} is not "
                                           "handled by the Odradek controller (TOPIC only)"))
                continue
            try:
                changed = self._alter_topic_configs(image, r)
            except ControllerError as e:
                results.append(AlterResult(*key, e.code, e.message))
                continue
            results.append(AlterResult(*key))
            if not validate_only:
                records += changed
        return records, results

    @staticmethod
    def _alter_topic_configs(image: MetadataImage, r: AlterResource) -> list[RecordAndVersion]:
        current = image.config(TOPIC_RESOURCE, r.resource_name)
        ops = {c.name: c for c in r.configs}  # ControllerApis keeps the last operation of a name
        new: list[RecordAndVersion] = []
        for name, c in ops.items():
            before = current.get(name)
            after: str | None = before
            if c.operation == OP_SET:
                after = c.value
            elif c.operation == OP_DELETE:
                after = None
            elif c.operation in (OP_APPEND, OP_SUBTRACT):
                d = TOPIC_CONFIGS.get(name)
                if d is None or d.type != T_LIST:  # ConfigurationControlManager: configSchema.isSplittable
                    raise ControllerError(errors.INVALID_CONFIG, f"Can't {_OP_NAMES[c.operation]} to key {name} "
                                          "because its type is not LIST.")
                parts = [p.strip() for p in (after if after is not None else d.default or "").split(",") if p.strip()]
                for v in (v.strip() for v in (c.value or "").split(",") if v.strip()):
                    if c.operation == OP_APPEND and v not in parts:
                        parts.append(v)
                    elif c.operation == OP_SUBTRACT and v in parts:
                        parts.remove(v)
                after = ",".join(parts)
            else:
                raise ControllerError(errors.INVALID_REQUEST, f"Unknown config operation {c.operation}")
            if after != before:
                new.append(RecordAndVersion(ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=r.resource_name,
                                                         name=name, value=after), 0))
        configs: dict[str, str | None] = dict(current)
        for rec in new:
            assert isinstance(rec.record, ConfigRecord)
            if rec.record.value is None:
                configs.pop(rec.record.name, None)
            else:
                configs[rec.record.name] = rec.record.value
        try:  # ControllerConfigurationValidator: LogConfig.validate
            validate_topic_configs(configs)
        except ConfigError as e:
            raise ControllerError(errors.INVALID_CONFIG, str(e)) from None
        if image.topic(r.resource_name) is None:  # QuorumController.ConfigResourceExistenceChecker
            raise ControllerError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{r.resource_name}' does not exist.")
        return new


def records_of(records: Sequence[RecordAndVersion]) -> list[MetadataRecord]:
    return [r.record for r in records]
