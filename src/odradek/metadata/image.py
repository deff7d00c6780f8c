"""The cluster's metadata as the KRaft log describes it at one offset: Kafka's MetadataImage, immutable.

An image is what every record of the log up to ``offset`` amounts to (:mod:`.delta` applies records to an
image and gives the next one). Its parts follow Kafka's ``org.apache.kafka.image`` classes:

    features       FeaturesImage: metadata.version's level, the other finalized features (kraft.version,
                   transaction.version, group.version, eligible.leader.replicas.version, ...)
    brokers        ClusterImage: BrokerRegistration by id (epoch, incarnation, listeners, supported
                   features, rack, fenced, in controlled shutdown, log dirs, cordoned log dirs)
    controllers    ClusterImage: ControllerRegistration by id
    topics         TopicsImage: TopicImage by id (name, id, PartitionRegistration by partition id), and
                   the ids by name
    configs        ConfigurationsImage: config name -> value per (resource type, resource name)
    client_quotas  ClientQuotasImage: quota key -> value per entity ((entity type, entity name) pairs)
    producer_ids   ProducerIdsImage: the next producer id to hand out (-1 before the first block)
    acls           AclsImage: the ACL records by id
    scram          ScramImage: SCRAM credentials by (mechanism, user)
    tokens         DelegationTokenImage: the token records by token id

Mappings are never changed after the image is built: a delta copies what it changes.

:func:`image_records` is the other way (Kafka's ``MetadataImage.write`` with an ImageWriter): the records
that, replayed on an empty image, give this one; a snapshot (KIP-630) holds them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from odradek.metadata.records import (
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    DelegationTokenRecord,
    EntityData,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from odradek.metadata.schema import ZERO_UUID

# DirectoryId.MIGRATING: the replica's log dir is not known yet (every replica, until brokers report them)
DIR_MIGRATING = ZERO_UUID
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# ConfigResource.Type ids of ConfigRecord.resource_type
CONFIG_TOPIC = 2
CONFIG_BROKER = 4
CONFIG_BROKER_LOGGER = 8
CONFIG_CLIENT_METRICS = 16
CONFIG_GROUP = 32

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


class MetadataApplyError(ValueError):
    """A record that cannot apply to the image (Kafka's replay throws): a partition of an unknown topic,
    a broker fenced with another epoch, an ACL removed that was never added, ..."""


def _migrating_if_unknown(directories: tuple[uuid.UUID, ...], replicas: int) -> tuple[uuid.UUID, ...]:
    """PartitionRegistration.defaultToMigrating: no directories, or only MIGRATING ones, mean one
    MIGRATING per replica."""
    if all(d == DIR_MIGRATING for d in directories):
        return (DIR_MIGRATING,) * replicas
    return directories


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    directories: tuple[uuid.UUID, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int  # 0 recovered, 1 recovering (after an unclean election)
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, r: PartitionRecord) -> PartitionRegistration:
        if r.directories and len(r.directories) != len(r.replicas):
            raise MetadataApplyError(f"partition {r.topic_id}:{r.partition_id} has {len(r.replicas)} replicas "
                                     f"but {len(r.directories)} directories")
        return cls(r.replicas, _migrating_if_unknown(r.directories, len(r.replicas)), r.isr, r.removing_replicas,
                   r.adding_replicas, r.leader, r.leader_recovery_state, r.leader_epoch, r.partition_epoch,
                   r.eligible_leader_replicas or (), r.last_known_elr or ())

    def merge(self, c: PartitionChangeRecord) -> PartitionRegistration:
        """PartitionRegistration.merge: what the record leaves null stays; a leader other than -2 (-1: no
        leader) bumps the leader epoch; the partition epoch always bumps."""
        replicas = self.replicas if c.replicas is None else c.replicas
        if c.directories is None:
            directories = self.directories
        else:
            if c.replicas is not None and c.directories and len(c.directories) != len(c.replicas):
                raise MetadataApplyError(f"partition change {c.topic_id}:{c.partition_id} has {len(c.replicas)} "
                                         f"replicas but {len(c.directories)} directories")
            directories = c.directories
        if c.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = c.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=replicas,
            directories=_migrating_if_unknown(directories, len(replicas)),
            isr=self.isr if c.isr is None else c.isr,
            removing_replicas=self.removing_replicas if c.removing_replicas is None else c.removing_replicas,
            adding_replicas=self.adding_replicas if c.adding_replicas is None else c.adding_replicas,
            leader=leader,
            leader_recovery_state=self.leader_recovery_state if c.leader_recovery_state == -1
            else c.leader_recovery_state,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            elr=self.elr if c.eligible_leader_replicas is None else c.eligible_leader_replicas,
            last_known_elr=self.last_known_elr if c.last_known_elr is None else c.last_known_elr,
        )


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class BrokerRegistration:
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...]
    supported_features: Mapping[str, tuple[int, int]]  # name -> (min, max)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool = False
    directories: tuple[uuid.UUID, ...] = ()
    cordoned_directories: tuple[uuid.UUID, ...] | None = None

    @classmethod
    def from_record(cls, r: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(r.broker_id, r.broker_epoch, r.incarnation_id, tuple(r.end_points),
                   MappingProxyType({f.name: (f.min_supported_version, f.max_supported_version) for f in r.features}),
                   r.rack, r.fenced, r.in_controlled_shutdown, r.is_migrating_zk_broker,
                   r.log_dirs, r.cordoned_log_dirs)

    def with_changes(self, *, fenced: bool | None = None, in_controlled_shutdown: bool | None = None,
                     directories: tuple[uuid.UUID, ...] | None = None,
                     cordoned: tuple[uuid.UUID, ...] | None = None) -> BrokerRegistration:
        """BrokerRegistration.cloneWith: None leaves a field as it is."""
        return replace(
            self,
            fenced=self.fenced if fenced is None else fenced,
            in_controlled_shutdown=self.in_controlled_shutdown if in_controlled_shutdown is None
            else in_controlled_shutdown,
            directories=self.directories if directories is None else directories,
            cordoned_directories=self.cordoned_directories if cordoned is None else cordoned,
        )


@dataclass(frozen=True)
class ControllerRegistration:
    id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool
    listeners: tuple[BrokerEndpoint, ...]
    supported_features: Mapping[str, tuple[int, int]]

    @classmethod
    def from_record(cls, r: RegisterControllerRecord) -> ControllerRegistration:
        return cls(r.controller_id, r.incarnation_id, r.zk_migration_ready, tuple(r.end_points),
                   MappingProxyType({f.name: (f.min_supported_version, f.max_supported_version) for f in r.features}))


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


QuotaEntity = tuple[tuple[str, str | None], ...]  # sorted (entity type, entity name or None for the default)
ConfigResource = tuple[int, str]  # (ConfigResource.Type id, name)


@dataclass(frozen=True)
class MetadataImage:
    offset: int = -1  # the offset of the last record applied
    epoch: int = -1  # the quorum epoch of that record's batch
    metadata_version: int | None = None  # metadata.version's feature level
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # the other finalized features
    zk_migration_state: int = 0
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    producer_ids: int = -1  # the next producer id (ProducerIdsImage.nextProducerId)
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=lambda: _EMPTY)
    scram: Mapping[tuple[int, str], ScramCredential] = field(default_factory=lambda: _EMPTY)
    tokens: Mapping[str, DelegationTokenRecord] = field(default_factory=lambda: _EMPTY)

    def topic(self, name: str) -> TopicImage | None:
        tid = self.topic_ids.get(name)
        return None if tid is None else self.topics[tid]

    def finalized_features(self) -> dict[str, int]:
        """Every finalized feature with its level, metadata.version included (as DescribeFeatures shows)."""
        out = dict(self.features)
        if self.metadata_version is not None:
            out[METADATA_VERSION] = self.metadata_version
        return out

    def config(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), _EMPTY)


EMPTY_IMAGE = MetadataImage()


def _at_highest(record: MetadataRecord) -> RecordAndVersion:
    return RecordAndVersion(record, type(record).HIGHEST)


def image_records(image: MetadataImage) -> list[RecordAndVersion]:
    """The records of ``image`` in the order of Kafka's ``MetadataImage.write``: features (metadata.version
    first), brokers, controllers, topics (each TopicRecord followed by its PartitionRecords), configs,
    client quotas, producer ids, ACLs, SCRAM credentials, delegation tokens. Each record is at the highest
    version Kafka 4.4 writes for its type. Applied to an empty image (:func:`.delta.apply_records`) they
    give ``image`` back, offset and epoch aside."""
    out: list[RecordAndVersion] = []
    if image.metadata_version is not None:
        out.append(RecordAndVersion(FeatureLevelRecord(name=METADATA_VERSION, feature_level=image.metadata_version),
                                    0))
    for name in sorted(image.features):
        out.append(RecordAndVersion(FeatureLevelRecord(name=name, feature_level=image.features[name]), 0))
    if image.zk_migration_state:
        out.append(RecordAndVersion(ZkMigrationStateRecord(zk_migration_state=image.zk_migration_state), 0))
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        out.append(_at_highest(RegisterBrokerRecord(
            broker_id=b.id, is_migrating_zk_broker=b.is_migrating_zk_broker, incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch, end_points=b.listeners,
            features=tuple(BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                           for n, (lo, hi) in sorted(b.supported_features.items())),
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=b.directories, cordoned_log_dirs=b.cordoned_directories)))
    for cid in sorted(image.controllers):
        c = image.controllers[cid]
        out.append(_at_highest(RegisterControllerRecord(
            controller_id=c.id, incarnation_id=c.incarnation_id, zk_migration_ready=c.zk_migration_ready,
            end_points=tuple(ControllerEndpoint(name=e.name, host=e.host, port=e.port,
                                                security_protocol=e.security_protocol) for e in c.listeners),
            features=tuple(ControllerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                           for n, (lo, hi) in sorted(c.supported_features.items())))))
    for name in sorted(image.topic_ids):
        topic = image.topics[image.topic_ids[name]]
        out.append(_at_highest(TopicRecord(name=topic.name, topic_id=topic.topic_id)))
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            out.append(_at_highest(PartitionRecord(
                partition_id=pid, topic_id=topic.topic_id, replicas=p.replicas, isr=p.isr,
                removing_replicas=p.removing_replicas, adding_replicas=p.adding_replicas, leader=p.leader,
                leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, directories=p.directories,
                eligible_leader_replicas=p.elr or None, last_known_elr=p.last_known_elr or None)))
    for (rtype, rname) in sorted(image.configs):
        values = image.configs[(rtype, rname)]
        for key in sorted(values):
            out.append(_at_highest(ConfigRecord(resource_type=rtype, resource_name=rname, name=key,
                                                value=values[key])))
    for entity in sorted(image.client_quotas, key=lambda e: [(t, n or "") for t, n in e]):
        quotas = image.client_quotas[entity]
        for key in sorted(quotas):
            out.append(_at_highest(ClientQuotaRecord(
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity), key=key,
                value=quotas[key])))
    if image.producer_ids >= 0:
        out.append(_at_highest(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                                 next_producer_id=image.producer_ids)))
    for acl_id in sorted(image.acls):
        out.append(_at_highest(image.acls[acl_id]))
    for (mechanism, user) in sorted(image.scram):
        cred = image.scram[(mechanism, user)]
        out.append(_at_highest(UserScramCredentialRecord(
            name=user, mechanism=mechanism, salt=cred.salt, stored_key=cred.stored_key,
            server_key=cred.server_key, iterations=cred.iterations)))
    for token_id in sorted(image.tokens):
        out.append(_at_highest(image.tokens[token_id]))
    return out
