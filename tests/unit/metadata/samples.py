"""A metadata log of every record type, at every version Kafka 4.4 writes, that applies cleanly to an image.

Shared by the unit tests (encode, decode, apply) and by tests/judges/test_metadata_records.py (Kafka 4.4's
DumpLogSegments decodes the same records from a segment written here).
"""

from __future__ import annotations

import uuid

from odradek.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    DelegationTokenRecord,
    EndTransactionRecord,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
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

TOPIC_A = uuid.UUID("5b1a6f0e-2c3d-4e5f-8a9b-0c1d2e3f4a5b")
TOPIC_B = uuid.UUID("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")
TOPIC_GONE = uuid.UUID("11111111-2222-4333-8444-555555555555")
DIR_1 = uuid.UUID("a0a0a0a0-b1b1-4c2c-8d3d-e4e4e4e4e4e4")
DIR_2 = uuid.UUID("c5c5c5c5-d6d6-4e7e-8f8f-a9a9a9a9a9a9")
INCARNATION = uuid.UUID("12345678-9abc-4def-8123-456789abcdef")
ACL_1 = uuid.UUID("0a0b0c0d-0e0f-4a1b-8c1d-1e1f2a2b2c2d")
ACL_2 = uuid.UUID("3a3b3c3d-3e3f-4a4b-8c4d-4e4f5a5b5c5d")


def _endpoint(port: int, name: str = "PLAINTEXT", protocol: int = 0) -> BrokerEndpoint:
    return BrokerEndpoint(name=name, host="127.0.0.1", port=port, security_protocol=protocol)


def _features() -> tuple[BrokerFeature, ...]:
    return (BrokerFeature(name="metadata.version", min_supported_version=7, max_supported_version=29),
            BrokerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1))


def sample_log() -> list[RecordAndVersion]:
    """Every record type and version, in an order that applies to an empty image."""
    r = RecordAndVersion
    return [
        r(FeatureLevelRecord(name="metadata.version", feature_level=27), 0),
        r(FeatureLevelRecord(name="kraft.version", feature_level=1), 0),
        r(FeatureLevelRecord(name="group.version", feature_level=1), 0),
        r(FeatureLevelRecord(name="group.version", feature_level=0), 0),  # level 0: the feature is removed
        r(ZkMigrationStateRecord(zk_migration_state=0), 0),
        r(RegisterControllerRecord(
            controller_id=3000, incarnation_id=INCARNATION, zk_migration_ready=False,
            end_points=(ControllerEndpoint(name="CONTROLLER", host="127.0.0.1", port=19093, security_protocol=0),),
            features=(ControllerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1),)), 0),
        r(RegisterBrokerRecord(broker_id=1, incarnation_id=INCARNATION, broker_epoch=10,
                               end_points=(_endpoint(9092),), features=_features(), rack=None), 0),
        r(RegisterBrokerRecord(broker_id=2, incarnation_id=INCARNATION, broker_epoch=11,
                               end_points=(_endpoint(9093), _endpoint(9193, "SSL", 1)), features=_features(),
                               rack="rack-b", in_controlled_shutdown=False), 1),
        r(RegisterBrokerRecord(broker_id=3, incarnation_id=INCARNATION, broker_epoch=12,
                               end_points=(_endpoint(9094),), rack="rack-c", is_migrating_zk_broker=True), 2),
        r(RegisterBrokerRecord(broker_id=4, incarnation_id=INCARNATION, broker_epoch=13,
                               end_points=(_endpoint(9095),), features=_features(), log_dirs=(DIR_1,)), 3),
        r(RegisterBrokerRecord(broker_id=5, incarnation_id=INCARNATION, broker_epoch=14,
                               end_points=(_endpoint(9096),), log_dirs=(DIR_1, DIR_2), cordoned_log_dirs=(DIR_2,),
                               fenced=False), 4),
        r(UnfenceBrokerRecord(id=1, epoch=10), 0),
        r(UnfenceBrokerRecord(id=2, epoch=11), 0),
        r(FenceBrokerRecord(id=2, epoch=11), 0),
        r(BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=11, fenced=-1), 0),
        r(BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=12, fenced=-1, in_controlled_shutdown=1), 1),
        r(BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=13, log_dirs=(DIR_2,)), 2),
        r(BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=14, cordoned_log_dirs=()), 3),
        r(UnregisterBrokerRecord(broker_id=3, broker_epoch=12), 0),
        r(TopicRecord(name="orders", topic_id=TOPIC_A), 0),
        r(PartitionRecord(partition_id=0, topic_id=TOPIC_A, replicas=(1, 2), isr=(1, 2), leader=1,
                          leader_epoch=0, partition_epoch=0), 0),
        r(PartitionRecord(partition_id=1, topic_id=TOPIC_A, replicas=(2, 1), isr=(2, 1), leader=2,
                          leader_epoch=0, partition_epoch=0, directories=(DIR_1, DIR_2)), 1),
        r(PartitionRecord(partition_id=2, topic_id=TOPIC_A, replicas=(1, 2, 4), isr=(1, 4), leader=1,
                          removing_replicas=(2,), adding_replicas=(4,), leader_recovery_state=1, leader_epoch=3,
                          partition_epoch=5, directories=(DIR_1, DIR_1, DIR_2),
                          eligible_leader_replicas=(2,), last_known_elr=(5,)), 2),
        r(ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy", value="compact"), 0),
        r(ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="3600000"), 0),
        r(ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=None), 0),
        r(ConfigRecord(resource_type=4, resource_name="", name="log.retention.bytes", value="1048576"), 0),
        r(ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value="2"), 0),
        r(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_A, isr=(1,)), 0),
        r(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_A, leader=2, isr=(2,), replicas=(2, 1),
                                leader_recovery_state=0), 0),
        r(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_A, leader=-1, directories=(DIR_2, DIR_1)), 1),
        r(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_A, removing_replicas=(), adding_replicas=(1,),
                                eligible_leader_replicas=(2,), last_known_elr=(1,)), 2),
        r(TopicRecord(name="doomed", topic_id=TOPIC_GONE), 0),
        r(PartitionRecord(partition_id=0, topic_id=TOPIC_GONE, replicas=(1,), isr=(1,), leader=1,
                          leader_epoch=0, partition_epoch=0), 0),
        r(ConfigRecord(resource_type=2, resource_name="doomed", name="segment.bytes", value="1048576"), 0),
        r(RemoveTopicRecord(topic_id=TOPIC_GONE), 0),
        r(ClearElrRecord(topic_name="orders"), 0),
        r(ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000), 0),
        r(ProducerIdsRecord(broker_id=2, broker_epoch=11, next_producer_id=2000), 0),
        r(AccessControlEntryRecord(id=ACL_1, resource_type=2, resource_name="orders", pattern_type=3,
                                   principal="User:alice", host="*", operation=3, permission_type=3), 0),
        r(AccessControlEntryRecord(id=ACL_2, resource_type=3, resource_name="grp-", pattern_type=4,
                                   principal="User:bob", host="10.0.0.1", operation=2, permission_type=2), 0),
        r(RemoveAccessControlEntryRecord(id=ACL_2), 0),
        r(UserScramCredentialRecord(name="alice", mechanism=1, salt=b"salt-256", stored_key=b"\x01" * 32,
                                    server_key=b"\x02" * 32, iterations=4096), 0),
        r(UserScramCredentialRecord(name="alice", mechanism=2, salt=b"salt-512", stored_key=b"\x03" * 64,
                                    server_key=b"\x04" * 64, iterations=8192), 0),
        r(RemoveUserScramCredentialRecord(name="alice", mechanism=2), 0),
        r(ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),
                                    EntityData(entity_type="client-id", entity_name=None)),
                            key="producer_byte_rate", value=1048576.0), 0),
        r(ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name=None),),
                            key="consumer_byte_rate", value=2.5), 0),
        r(ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name=None),),
                            key="consumer_byte_rate", remove=True), 0),
        r(DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=("User:bob", "User:carol"),
                                issue_timestamp=1_700_000_000_000, max_timestamp=1_700_604_800_000,
                                expiration_timestamp=1_700_086_400_000, token_id="token-1"), 0),
        r(DelegationTokenRecord(owner="User:bob", requester="User:admin", renewers=(),
                                issue_timestamp=1, max_timestamp=2, expiration_timestamp=3, token_id="token-2"), 0),
        r(RemoveDelegationTokenRecord(token_id="token-2"), 0),
        r(NoOpRecord(), 0),
        r(BeginTransactionRecord(name="create topic payments"), 0),
        r(TopicRecord(name="payments", topic_id=TOPIC_B), 0),
        r(PartitionRecord(partition_id=0, topic_id=TOPIC_B, replicas=(1,), isr=(1,), leader=1,
                          leader_epoch=0, partition_epoch=0), 0),
        r(EndTransactionRecord(), 0),
        r(BeginTransactionRecord(), 0),
        r(ConfigRecord(resource_type=2, resource_name="payments", name="retention.ms", value="1"), 0),
        r(AbortTransactionRecord(reason="controller failover"), 0),
        r(RegisterControllerRecord(controller_id=3001, incarnation_id=INCARNATION, zk_migration_ready=True,
                                   end_points=(), features=()), 0),
        r(UnregisterControllerRecord(controller_id=3001), 0),
    ]
