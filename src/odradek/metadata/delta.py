"""Records applied to a metadata image: Kafka's MetadataDelta, and KIP-868's metadata transactions.

``MetadataDelta(image)`` takes records one by one (:meth:`MetadataDelta.replay`), copying only the parts of the
image they change, and :meth:`MetadataDelta.apply` gives the new :class:`~.image.MetadataImage`; nothing
else is touched, so the base image stays valid. What each record does is what Kafka's ``replay`` does:

    TopicRecord              a new topic, no partitions yet
    PartitionRecord          a partition's registration, whole
    PartitionChangeRecord    merged into the partition (PartitionRegistration.merge): null fields unchanged,
                             leader -2 unchanged, any other leader (-1: none) bumps the leader epoch, the
                             partition epoch always bumps; a partition never created is an error
    RemoveTopicRecord        the topic and its partitions go, and the topic's configs with them
    ClearElrRecord           ELR and last known ELR emptied (a partition change) in the named topic, or
                             every topic when the name is empty
    RegisterBrokerRecord     the broker's registration, replaced whole
    UnregisterBrokerRecord   the broker is gone
    Fence/UnfenceBrokerRecord, BrokerRegistrationChangeRecord
                             fenced / unfenced / in controlled shutdown / log dirs; the record's epoch must
                             be the registered broker's (else an error, as ClusterDelta.getBrokerOrThrow)
    Register/UnregisterControllerRecord  the controller's registration
    FeatureLevelRecord       metadata.version's level, or another feature's (level 0 removes it)
    ConfigRecord             one config of one resource set (value null: removed)
    ClientQuotaRecord        one quota of one entity set or removed
    ProducerIdsRecord        the next producer id
    AccessControlEntryRecord / RemoveAccessControlEntryRecord   an ACL by id
    UserScramCredentialRecord / RemoveUserScramCredentialRecord a credential by (mechanism, user)
    DelegationTokenRecord / RemoveDelegationTokenRecord         a token by id
    NoOpRecord, ZkMigrationStateRecord   nothing (the latter's state is kept)

Begin/End/AbortTransactionRecord (KIP-868) are not for a delta: :func:`apply_batches` reads them as KIP-868
says and Kafka's MetadataBatchLoader mostly does. A transaction's records become visible together at its
EndTransactionRecord; an AbortTransactionRecord drops them; a log that ends inside a transaction leaves it
out of the image; a marker out of place (End or Abort outside a transaction, Begin inside one) is an error,
with Kafka's messages. One difference: Kafka's loader drops an aborted transaction's records only when the
abort is the last record of the commit it is handed (it then publishes an empty delta); records after the
abort in the same commit are replayed onto the delta that still holds the aborted ones. Here an abort
always drops them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, TypeVar

from odradek.metadata.batches import MetadataBatch
from odradek.metadata.image import (
    CONFIG_TOPIC,
    EMPTY_IMAGE,
    METADATA_VERSION,
    BrokerRegistration,
    ConfigResource,
    ControllerRegistration,
    MetadataApplyError,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredential,
    TopicImage,
)
from odradek.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)

K = TypeVar("K")
V = TypeVar("V")

# BrokerRegistrationChangeRecord.fenced: BrokerRegistrationFencingChange; in_controlled_shutdown:
# BrokerRegistrationInControlledShutdownChange
_FENCING = {1: True, 0: None, -1: False}
_SHUTDOWN = {0: None, 1: True}


def _frozen(d: dict[K, V]) -> Mapping[K, V]:
    return MappingProxyType(d)


class MetadataDelta:
    """The changes of some records on top of ``image`` (Kafka's MetadataDelta)."""

    def __init__(self, image: MetadataImage = EMPTY_IMAGE) -> None:
        self.image = image
        self._changed: dict[str, dict[Any, Any]] = {}  # image field -> its working copy
        self._topic_parts: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._scalars: dict[str, Any] = {}
        self.offset = image.offset
        self.epoch = image.epoch

    # --- the working copies -------------------------------------------------------------------------

    def _map(self, name: str) -> dict[Any, Any]:
        m = self._changed.get(name)
        if m is None:
            m = self._changed[name] = dict(getattr(self.image, name))
        return m

    def _view(self, name: str) -> Mapping[Any, Any]:
        m = self._changed.get(name)
        return m if m is not None else getattr(self.image, name)

    def _partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration]:
        parts = self._topic_parts.get(topic_id)
        if parts is None:
            topic = self._view("topics").get(topic_id)
            if topic is None:
                raise MetadataApplyError(f"no topic with id {topic_id}")
            parts = self._topic_parts[topic_id] = dict(topic.partitions)
        return parts

    # --- replay ---------------------------------------------------------------------------------------

    def replay(self, record: MetadataRecord) -> None:
        """Apply one record (not a transaction marker: see :func:`apply_batches`)."""
        handler = _HANDLERS.get(type(record))
        if handler is None:
            raise MetadataApplyError(f"{type(record).__name__} is not replayed by a metadata delta")
        handler(self, record)

    def _topic(self, r: TopicRecord) -> None:
        topics, ids = self._map("topics"), self._map("topic_ids")
        old = ids.get(r.name)
        if old is not None and old != r.topic_id:
            raise MetadataApplyError(f"topic {r.name!r} exists with id {old}, not {r.topic_id}")
        topics[r.topic_id] = TopicImage(r.name, r.topic_id)
        ids[r.name] = r.topic_id
        self._topic_parts[r.topic_id] = {}

    def _partition(self, r: PartitionRecord) -> None:
        self._partitions(r.topic_id)[r.partition_id] = PartitionRegistration.from_record(r)

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        parts = self._partitions(r.topic_id)
        current = parts.get(r.partition_id)
        if current is None:
            raise MetadataApplyError(f"Unable to find partition {r.topic_id}:{r.partition_id}")
        parts[r.partition_id] = current.merge(r)

    def _remove_topic(self, r: RemoveTopicRecord) -> None:
        topics = self._map("topics")
        topic = topics.pop(r.topic_id, None)
        if topic is None:
            raise MetadataApplyError(f"Unable to delete topic with id {r.topic_id}: no such topic found.")
        self._map("topic_ids").pop(topic.name, None)
        self._topic_parts.pop(r.topic_id, None)
        resource = (CONFIG_TOPIC, topic.name)
        if resource in self._view("configs"):
            del self._map("configs")[resource]

    def _clear_elr(self, r: ClearElrRecord) -> None:
        if r.topic_name:
            tid = self._view("topic_ids").get(r.topic_name)
            if tid is None:
                raise MetadataApplyError(f"Unable to clear the ELR of topic {r.topic_name}: no such topic found.")
            ids: Iterable[uuid.UUID] = (tid,)
        else:
            ids = list(self._view("topics"))
        for tid in ids:
            current = self._topic_parts.get(tid)
            if current is None:
                current = self._view("topics")[tid].partitions
            with_elr = [pid for pid, p in current.items() if p.elr or p.last_known_elr]
            if not with_elr:
                continue
            parts = self._partitions(tid)
            for pid in with_elr:
                parts[pid] = parts[pid].merge(PartitionChangeRecord(partition_id=pid, topic_id=tid,
                                                                    eligible_leader_replicas=(), last_known_elr=()))

    def _broker(self, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        broker: BrokerRegistration | None = self._view("brokers").get(broker_id)
        if broker is None:
            raise MetadataApplyError(f"Tried to {action} broker {broker_id}, but that broker was not registered.")
        if broker.epoch != epoch:
            raise MetadataApplyError(f"Tried to {action} broker {broker_id}, but the given epoch, {epoch}, did not "
                                     f"match the current broker epoch, {broker.epoch}")
        return broker

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        self._map("brokers")[r.broker_id] = BrokerRegistration.from_record(r)

    def _unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        self._map("brokers").pop(r.broker_id, None)

    def _fence(self, r: FenceBrokerRecord) -> None:
        self._map("brokers")[r.id] = self._broker(r.id, r.epoch, "fence").with_changes(fenced=True)

    def _unfence(self, r: UnfenceBrokerRecord) -> None:
        self._map("brokers")[r.id] = self._broker(r.id, r.epoch, "unfence").with_changes(fenced=False)

    def _broker_change(self, r: BrokerRegistrationChangeRecord) -> None:
        current = self._broker(r.broker_id, r.broker_epoch, "change")
        if r.fenced not in _FENCING:
            raise MetadataApplyError(f"Unable to replay {r}: unknown value for fenced field: {r.fenced}")
        if r.in_controlled_shutdown not in _SHUTDOWN:
            raise MetadataApplyError(f"Unable to replay {r}: unknown value for inControlledShutdown field: "
                                     f"{r.in_controlled_shutdown}")
        nxt = current.with_changes(fenced=_FENCING[r.fenced], in_controlled_shutdown=_SHUTDOWN[r.in_controlled_shutdown],
                                   directories=r.log_dirs or None, cordoned=r.cordoned_log_dirs)
        if nxt != current:
            self._map("brokers")[r.broker_id] = nxt

    def _register_controller(self, r: RegisterControllerRecord) -> None:
        self._map("controllers")[r.controller_id] = ControllerRegistration.from_record(r)

    def _unregister_controller(self, r: UnregisterControllerRecord) -> None:
        self._map("controllers").pop(r.controller_id, None)

    def _feature(self, r: FeatureLevelRecord) -> None:
        if r.name == METADATA_VERSION:
            self._scalars["metadata_version"] = r.feature_level
        elif r.feature_level == 0:
            self._map("features").pop(r.name, None)
        else:
            self._map("features")[r.name] = r.feature_level

    def _zk_migration(self, r: ZkMigrationStateRecord) -> None:
        self._scalars["zk_migration_state"] = r.zk_migration_state

    def _config(self, r: ConfigRecord) -> None:
        resource: ConfigResource = (r.resource_type, r.resource_name)
        configs = self._map("configs")
        values = dict(configs.get(resource, {}))
        if r.value is None:
            values.pop(r.name, None)
        else:
            values[r.name] = r.value
        if values:
            configs[resource] = _frozen(values)
        else:
            configs.pop(resource, None)

    def _quota(self, r: ClientQuotaRecord) -> None:
        entity: QuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in r.entity))
        quotas = self._map("client_quotas")
        values = dict(quotas.get(entity, {}))
        if r.remove:
            values.pop(r.key, None)
        else:
            values[r.key] = r.value
        if values:
            quotas[entity] = _frozen(values)
        else:
            quotas.pop(entity, None)

    def _producer_ids(self, r: ProducerIdsRecord) -> None:
        self._scalars["producer_ids"] = r.next_producer_id

    def _acl(self, r: AccessControlEntryRecord) -> None:
        self._map("acls")[r.id] = r

    def _remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        if self._map("acls").pop(r.id, None) is None:
            raise MetadataApplyError(f"Failed to find existing ACL with ID {r.id} in either image or changes")

    def _scram(self, r: UserScramCredentialRecord) -> None:
        self._map("scram")[(r.mechanism, r.name)] = ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)

    def _remove_scram(self, r: RemoveUserScramCredentialRecord) -> None:
        self._map("scram").pop((r.mechanism, r.name), None)

    def _token(self, r: DelegationTokenRecord) -> None:
        self._map("tokens")[r.token_id] = r

    def _remove_token(self, r: RemoveDelegationTokenRecord) -> None:
        self._map("tokens").pop(r.token_id, None)

    def _noop(self, r: NoOpRecord) -> None:
        pass

    # --- the new image --------------------------------------------------------------------------------

    def apply(self) -> MetadataImage:
        """The image with every record replayed so far; the delta may go on taking records."""
        changes: dict[str, Any] = dict(self._scalars)
        for name, m in self._changed.items():
            changes[name] = _frozen(dict(m))
        if self._topic_parts:
            topics = dict(self._view("topics"))
            for tid, parts in self._topic_parts.items():
                if tid in topics:
                    topics[tid] = TopicImage(topics[tid].name, tid, _frozen(dict(parts)))
            changes["topics"] = _frozen(topics)
        changes["offset"] = self.offset
        changes["epoch"] = self.epoch
        return replace(self.image, **changes)


_HANDLERS: dict[type[MetadataRecord], Any] = {
    TopicRecord: MetadataDelta._topic,
    PartitionRecord: MetadataDelta._partition,
    PartitionChangeRecord: MetadataDelta._partition_change,
    RemoveTopicRecord: MetadataDelta._remove_topic,
    ClearElrRecord: MetadataDelta._clear_elr,
    RegisterBrokerRecord: MetadataDelta._register_broker,
    UnregisterBrokerRecord: MetadataDelta._unregister_broker,
    FenceBrokerRecord: MetadataDelta._fence,
    UnfenceBrokerRecord: MetadataDelta._unfence,
    BrokerRegistrationChangeRecord: MetadataDelta._broker_change,
    RegisterControllerRecord: MetadataDelta._register_controller,
    UnregisterControllerRecord: MetadataDelta._unregister_controller,
    FeatureLevelRecord: MetadataDelta._feature,
    ZkMigrationStateRecord: MetadataDelta._zk_migration,
    ConfigRecord: MetadataDelta._config,
    ClientQuotaRecord: MetadataDelta._quota,
    ProducerIdsRecord: MetadataDelta._producer_ids,
    AccessControlEntryRecord: MetadataDelta._acl,
    RemoveAccessControlEntryRecord: MetadataDelta._remove_acl,
    UserScramCredentialRecord: MetadataDelta._scram,
    RemoveUserScramCredentialRecord: MetadataDelta._remove_scram,
    DelegationTokenRecord: MetadataDelta._token,
    RemoveDelegationTokenRecord: MetadataDelta._remove_token,
    NoOpRecord: MetadataDelta._noop,
}


def apply_records(image: MetadataImage, records: Iterable[MetadataRecord | RecordAndVersion]) -> MetadataImage:
    """``image`` with ``records`` replayed in order (no transaction markers among them)."""
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r.record if isinstance(r, RecordAndVersion) else r)
    return delta.apply()


def apply_batches(image: MetadataImage, batches: Iterable[MetadataBatch]) -> MetadataImage:
    """``image`` with the metadata records of ``batches`` applied, their transactions (KIP-868) as the module's
    docstring says: records between a BeginTransactionRecord and its EndTransactionRecord
    apply together, an AbortTransactionRecord drops them, and a transaction still open at the end is left
    out. Control records (leader changes, snapshot header and footer, voters) change no image; every
    record moves the image's offset and epoch."""
    committed = image
    delta = MetadataDelta(image)
    in_txn = False
    for batch in batches:
        for entry in batch.entries:
            delta.offset, delta.epoch = entry.offset, batch.leader_epoch
            if entry.record is None:
                continue
            record = entry.record.record
            if isinstance(record, BeginTransactionRecord):
                if in_txn:
                    raise MetadataApplyError(f"offset {entry.offset}: BeginTransactionRecord while already in "
                                             "a transaction")
                committed = delta.apply()
                delta = MetadataDelta(committed)
                in_txn = True
            elif isinstance(record, EndTransactionRecord):
                if not in_txn:
                    raise MetadataApplyError(f"offset {entry.offset}: EndTransactionRecord without having seen a "
                                             "BeginTransactionRecord")
                in_txn = False
            elif isinstance(record, AbortTransactionRecord):
                if not in_txn:
                    raise MetadataApplyError(f"offset {entry.offset}: AbortTransactionRecord without having seen a "
                                             "BeginTransactionRecord")
                delta = MetadataDelta(committed)
                delta.offset, delta.epoch = entry.offset, batch.leader_epoch
                in_txn = False
            else:
                try:
                    delta.replay(record)
                except MetadataApplyError as e:
                    raise MetadataApplyError(f"offset {entry.offset}: {e}") from None
    if in_txn:
        return committed
    return delta.apply()
