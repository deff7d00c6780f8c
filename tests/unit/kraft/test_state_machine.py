"""The controller's metadata state machine (kraft/state_machine.py) on a fake clock: registration, unfencing
on catch-up, fencing by session timeout, controlled shutdown, topic placement, topic deletion, new partitions,
topic config changes, producer id blocks, and the records committed through the log's batches (the bootstrap
transaction first)."""

from __future__ import annotations

import uuid

import pytest

from odradek.kraft.state_machine import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfig,
    AlterResource,
    AlterResult,
    ControllerError,
    ControllerState,
    Heartbeat,
    NewPartitions,
    NewTopic,
    PartitionsResult,
    Registration,
)
from odradek.metadata.batches import Entry, MetadataBatch
from odradek.metadata.features import METADATA_VERSION, bootstrap_records
from odradek.metadata.records import (
    BeginTransactionRecord,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from odradek.protocol import errors

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
ZERO = uuid.UUID(int=0)
MV = 33  # 4.4-IV2


class Log:
    """The state machine's records appended and committed in order, one batch per write."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.end = 0

    def commit(self, records: list[RecordAndVersion]) -> int:
        if not records:
            return self.end
        first = self.end
        self.state.written(first + len(records) - 1, records, first)
        entries = tuple(Entry(first + i, 0, r, None) for i, r in enumerate(records))
        self.state.apply_committed([MetadataBatch(first, first + len(records) - 1, 1, 0, False, 0, entries)])
        self.end += len(records)
        return first


def features(lo: int = 7, hi: int = MV) -> tuple[BrokerFeature, ...]:
    return (BrokerFeature(name=METADATA_VERSION, min_supported_version=lo, max_supported_version=hi),)


def registration(broker_id: int, incarnation: uuid.UUID | None = None, **kw: object) -> Registration:
    args: dict[str, object] = {"broker_id": broker_id, "cluster_id": CLUSTER,
                               "incarnation_id": incarnation or uuid.uuid4(), "listeners": (),
                               "features": features(), "rack": None}
    args.update(kw)
    return Registration(**args)  # type: ignore[arg-type]


@pytest.fixture
def state() -> tuple[ControllerState, Log]:
    s = ControllerState(session_timeout_ms=9000)
    log = Log(s)
    boot = bootstrap_records({METADATA_VERSION: MV})
    log.commit([RecordAndVersion(BeginTransactionRecord(name="Bootstrap records"), 0), *boot,
                RecordAndVersion(EndTransactionRecord(), 0)])
    assert s.committed.metadata_version == MV
    return s, log


def register(s: ControllerState, log: Log, broker_id: int, now: int) -> int:
    records = s.register_broker(registration(broker_id), CLUSTER, log.end, now)
    return log.commit(records)


def unfence(s: ControllerState, log: Log, broker_id: int, epoch: int, now: int) -> None:
    records, result = s.heartbeat(Heartbeat(broker_id, epoch, log.end, False, False), now)
    log.commit(records)
    assert not result.is_fenced


def test_registration_writes_a_fenced_register_broker_record_whose_offset_is_the_epoch(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    records = s.register_broker(registration(1, rack="r1"), CLUSTER, log.end, 0)
    [r] = records
    assert isinstance(r.record, RegisterBrokerRecord)
    assert r.record.fenced and r.record.broker_epoch == log.end and r.record.rack == "r1"
    offset = log.commit(records)
    assert s.committed.brokers[1].epoch == offset and s.committed.brokers[1].fenced


def test_registration_refused_for_another_cluster_or_unsupported_features(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    with pytest.raises(ControllerError) as e:
        s.register_broker(registration(1, cluster_id="other"), CLUSTER, log.end, 0)
    assert e.value.code == errors.INCONSISTENT_CLUSTER_ID
    with pytest.raises(ControllerError) as e:
        s.register_broker(registration(1, features=features(7, 20)), CLUSTER, log.end, 0)
    assert e.value.code == errors.UNSUPPORTED_VERSION
    assert "does not support finalized version 33 of metadata.version" in e.value.message


def test_a_second_incarnation_is_refused_while_the_first_session_lives(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    register(s, log, 1, 0)
    with pytest.raises(ControllerError) as e:
        s.register_broker(registration(1), CLUSTER, log.end, 8999)
    assert e.value.code == errors.DUPLICATE_BROKER_REGISTRATION
    s.register_broker(registration(1), CLUSTER, log.end, 9000)  # the session expired: accepted


def test_heartbeat_unfences_once_the_broker_caught_up_to_its_registration(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    epoch = register(s, log, 1, 0)
    records, result = s.heartbeat(Heartbeat(1, epoch, epoch - 1, False, False), 100)
    assert records == [] and not result.is_caught_up and result.is_fenced
    records, result = s.heartbeat(Heartbeat(1, epoch, epoch, False, False), 200)
    assert result.is_caught_up and not result.is_fenced
    assert [r.record for r in records] == [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1)]
    log.commit(records)
    assert not s.committed.brokers[1].fenced
    with pytest.raises(ControllerError) as e:
        s.heartbeat(Heartbeat(1, epoch + 5, log.end, False, False), 300)
    assert e.value.code == errors.STALE_BROKER_EPOCH
    with pytest.raises(ControllerError) as e:
        s.heartbeat(Heartbeat(7, 0, log.end, False, False), 300)
    assert e.value.code == errors.BROKER_ID_NOT_REGISTERED


def test_session_timeout_fences_and_moves_leadership(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    e1 = register(s, log, 1, 0)
    e2 = register(s, log, 2, 0)
    unfence(s, log, 1, e1, 0)
    unfence(s, log, 2, e2, 0)
    records, _ = s.create_topics([NewTopic("t", 1, 2)])
    log.commit(records)
    p = s.committed.topic("t").partitions[0]  # type: ignore[union-attr]
    leader, other = p.leader, [r for r in p.replicas if r != p.leader][0]
    s.heartbeat(Heartbeat(other, {1: e1, 2: e2}[other], log.end, False, False), 8000)
    assert s.expire_sessions(8999) == []
    fenced = s.expire_sessions(9000)
    assert [r.record for r in fenced][0] == BrokerRegistrationChangeRecord(broker_id=leader, broker_epoch={1: e1, 2: e2}[leader],
                                                                          fenced=1)
    change = fenced[1].record
    assert isinstance(change, PartitionChangeRecord) and change.leader == other and change.isr == (other,)
    log.commit(fenced)
    assert s.committed.brokers[leader].fenced
    assert s.committed.topic("t").partitions[0].leader == other  # type: ignore[union-attr]
    assert s.expire_sessions(20000) != []  # the other one's session ends too (last heartbeat 8000)


def test_controlled_shutdown(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    e1 = register(s, log, 1, 0)
    unfence(s, log, 1, e1, 0)
    log.commit(s.create_topics([NewTopic("t", 1, 1)])[0])
    records, result = s.heartbeat(Heartbeat(1, e1, log.end, False, True), 10)
    assert isinstance(records[0].record, BrokerRegistrationChangeRecord) and records[0].record.in_controlled_shutdown == 1
    assert result.should_shut_down
    log.commit(records)
    assert s.committed.brokers[1].in_controlled_shutdown
    assert s.committed.topic("t").partitions[0].leader == -1  # type: ignore[union-attr]


def test_topic_creation_places_replicas_over_unfenced_brokers(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    epochs = {b: register(s, log, b, 0) for b in (1, 2, 3)}
    for b in (1, 2):
        unfence(s, log, b, epochs[b], 0)
    tid = uuid.uuid4()
    records, results = s.create_topics([NewTopic("t", 4, 2, configs={"retention.ms": "1000"})], topic_ids=[tid])
    assert results[0].error_code == errors.NONE and results[0].topic_id == tid
    assert isinstance(records[0].record, TopicRecord) and records[0].record.topic_id == tid
    assert records[1].record == ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000")
    parts = [r.record for r in records if isinstance(r.record, PartitionRecord)]
    assert len(parts) == 4
    for p in parts:
        assert sorted(p.replicas) == [1, 2] and p.isr == p.replicas and p.leader == p.replicas[0]
    assert {p.leader for p in parts} == {1, 2}  # leadership spread
    log.commit(records)
    assert s.committed.config(2, "t") == {"retention.ms": "1000"}

    _, results = s.create_topics([NewTopic("t", 1, 1), NewTopic("u", 1, 3), NewTopic("v", 0, 1)])
    assert [r.error_code for r in results] == [errors.TOPIC_ALREADY_EXISTS, errors.INVALID_REPLICATION_FACTOR,
                                                errors.INVALID_PARTITIONS]
    assert "only 2 broker(s) are registered" in (results[1].error_message or "")


def test_pending_records_are_seen_before_they_commit(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    records = s.register_broker(registration(1), CLUSTER, log.end, 0)
    s.written(log.end, records, log.end)  # appended, not committed
    assert 1 not in s.committed.brokers and 1 in s.image().brokers
    s.reset_pending()  # leadership lost
    assert 1 not in s.image().brokers


def test_the_bootstrap_transaction_in_flight_is_part_of_the_image() -> None:
    s = ControllerState()
    boot = [RecordAndVersion(BeginTransactionRecord(name="Bootstrap records"), 0),
            *bootstrap_records({METADATA_VERSION: MV}), RecordAndVersion(EndTransactionRecord(), 0)]
    s.written(len(boot) - 1, boot, 0)  # appended by a new active controller, not yet committed
    assert s.image().metadata_version == MV and s.committed.metadata_version is None
    assert s.expire_sessions(0) == []


def test_producer_id_blocks(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    epoch = register(s, log, 1, 0)
    records, start = s.allocate_producer_ids(1, epoch)
    assert start == 0 and records[0].record == ProducerIdsRecord(broker_id=1, broker_epoch=epoch, next_producer_id=1000)
    log.commit(records)
    assert s.allocate_producer_ids(1, epoch)[1] == 1000


def cluster(s: ControllerState, log: Log, brokers: tuple[int, ...] = (1, 2, 3), fenced: tuple[int, ...] = ()) -> None:
    epochs = {b: register(s, log, b, 0) for b in brokers}
    for b in brokers:
        if b not in fenced:
            unfence(s, log, b, epochs[b], 0)


def test_delete_topics_by_name_and_id_writes_remove_topic_records(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log)
    t_id, u_id = uuid.uuid4(), uuid.uuid4()
    log.commit(s.create_topics([NewTopic("t", 2, 2, configs={"retention.ms": "1000"}), NewTopic("u", 1, 1)],
                               topic_ids=[t_id, u_id])[0])
    records, results = s.delete_topics([], [("t", ZERO), (None, u_id)])
    assert [r.record for r in records] == [RemoveTopicRecord(topic_id=u_id), RemoveTopicRecord(topic_id=t_id)]
    assert sorted((r.name, r.topic_id, r.error_code) for r in results) == [("t", t_id, 0), ("u", u_id, 0)]
    log.commit(records)
    assert s.committed.topics == {} and s.committed.topic_ids == {}
    assert s.committed.config(2, "t") == {}  # the topic's configs went with it
    # the same name can be created again, with a new id
    log.commit(s.create_topics([NewTopic("t", 1, 1)])[0])
    assert s.committed.topic("t").topic_id != t_id  # type: ignore[union-attr]


def test_delete_topics_errors(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log, (1,))
    tid = uuid.uuid4()
    log.commit(s.create_topics([NewTopic("t", 1, 1)], topic_ids=[tid])[0])
    other = uuid.uuid4()
    records, results = s.delete_topics(["nope", "d", "d"])
    assert records == []
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("d", errors.INVALID_REQUEST, "Duplicate topic name."),
        ("nope", errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    records, results = s.delete_topics([], [(None, other), (None, None), ("t", tid), (None, tid), ("t", None)])
    assert records == []
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in results] == [
        (None, ZERO, errors.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("t", tid, errors.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (None, other, errors.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        ("t", tid, errors.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")]
    # delete.topic.enable=false: every topic of the request refused, INVALID_REQUEST before v3
    for version, code in ((6, errors.TOPIC_DELETION_DISABLED), (2, errors.INVALID_REQUEST)):
        records, results = s.delete_topics(["t"], enabled=False, api_version=version)
        assert records == [] and [(r.name, r.error_code) for r in results] == [("t", code)]


def test_a_deletion_in_flight_is_seen_by_the_next_request(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log, (1,))
    log.commit(s.create_topics([NewTopic("t", 1, 1)])[0])
    records, _ = s.delete_topics(["t"])
    s.written(log.end, records, log.end)  # appended, not committed
    _, results = s.delete_topics(["t"])
    assert results[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_places_new_partitions_over_unfenced_brokers(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log, (1, 2, 3), fenced=(3,))
    tid = uuid.uuid4()
    log.commit(s.create_topics([NewTopic("t", 2, 2)], topic_ids=[tid])[0])
    records, results = s.create_partitions([NewPartitions("t", 5)], validate_only=True)
    assert records == [] and results == [PartitionsResult("t")]
    records, results = s.create_partitions([NewPartitions("t", 5)])
    assert results == [PartitionsResult("t")]
    parts = [r.record for r in records]
    assert [p.partition_id for p in parts] == [2, 3, 4]  # type: ignore[union-attr]
    for p in parts:
        assert isinstance(p, PartitionRecord) and p.topic_id == tid
        assert sorted(p.replicas) == [1, 2] and p.isr == p.replicas and p.leader == p.replicas[0]
    log.commit(records)
    assert sorted(s.committed.topic("t").partitions) == [0, 1, 2, 3, 4]  # type: ignore[union-attr]


def test_create_partitions_errors(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log, (1, 2, 3), fenced=(3,))
    log.commit(s.create_topics([NewTopic("t", 2, 2), NewTopic("one", 1, 1)])[0])

    def error(t: NewPartitions) -> tuple[int, str | None]:
        records, [r] = s.create_partitions([t])
        assert records == [] or r.error_code == errors.NONE
        return r.error_code, r.error_message

    assert error(NewPartitions("t", 2)) == (errors.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    assert error(NewPartitions("t", 1)) == (errors.INVALID_PARTITIONS,
                                            "The topic t currently has 2 partition(s); 1 would not be an increase.")
    assert error(NewPartitions("x", 3)) == (errors.UNKNOWN_TOPIC_OR_PARTITION, None)
    assert error(NewPartitions("t", 4, ((1, 2),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 1 assignment(s) "
        "were specified.")
    assert error(NewPartitions("t", 3, ((1, 9),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 9, but no such broker "
        "is registered.")
    assert error(NewPartitions("t", 3, ((2, 2),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 2 more than once.")
    assert error(NewPartitions("t", 3, ((1,),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 1 replica(s), "
        "but this is not consistent with previous partitions, which have 2 replica(s).")
    assert error(NewPartitions("t", 3, ((),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert error(NewPartitions("one", 2, ((3,),))) == (
        errors.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for partition 1 "
        "are fenced or in controlled shutdown.")
    # a fenced broker assigned by hand is a replica, not in the ISR; the leader is the first in the ISR
    records, [r] = s.create_partitions([NewPartitions("t", 3, ((3, 2),))])
    assert r.error_code == errors.NONE
    p = records[0].record
    assert isinstance(p, PartitionRecord) and p.replicas == (3, 2) and p.isr == (2,) and p.leader == 2
    # a topic named twice is refused, the others done
    records, results = s.create_partitions([NewPartitions("t", 3), NewPartitions("t", 4), NewPartitions("one", 2)])
    assert results == [PartitionsResult("t", errors.INVALID_REQUEST, "Duplicate topic name."), PartitionsResult("one")]
    assert len(records) == 1


def test_incremental_alter_topic_configs(state: tuple[ControllerState, Log]) -> None:
    s, log = state
    cluster(s, log, (1,))
    log.commit(s.create_topics([NewTopic("t", 1, 1, configs={"retention.ms": "1000"})])[0])

    def alter(*configs: AlterConfig, name: str = "t", validate_only: bool = False) -> tuple[list[RecordAndVersion],
                                                                                             AlterResult]:
        records, [result] = s.incremental_alter_configs([AlterResource(2, name, configs)],
                                                        validate_only=validate_only)
        return records, result

    records, result = alter(AlterConfig("retention.ms", OP_SET, "2000"), AlterConfig("cleanup.policy", OP_APPEND,
                                                                                      "compact"),
                            AlterConfig("segment.ms", OP_DELETE, None))
    assert result == AlterResult(2, "t")
    assert [r.record for r in records] == [
        ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="2000"),
        ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value="delete,compact")]
    assert alter(AlterConfig("retention.ms", OP_SET, "5"), validate_only=True)[0] == []
    log.commit(records)
    assert s.committed.config(2, "t") == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    records, result = alter(AlterConfig("cleanup.policy", OP_SUBTRACT, "delete"),
                            AlterConfig("retention.ms", OP_DELETE, None))
    log.commit(records)
    assert s.committed.config(2, "t") == {"cleanup.policy": "compact"}
    assert alter(AlterConfig("retention.ms", OP_APPEND, "1")) == (
        [], AlterResult(2, "t", errors.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."))
    assert alter(AlterConfig("no.such", OP_SET, "1"))[1].error_code == errors.INVALID_CONFIG
    assert alter(AlterConfig("retention.ms", OP_SET, "abc"))[1].error_code == errors.INVALID_CONFIG
    assert alter(AlterConfig("retention.ms", OP_SET, "1"), name="x") == (
        [], AlterResult(2, "x", errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'x' does not exist."))
    # the same resource twice: refused once; another resource type: refused
    _, results = s.incremental_alter_configs([AlterResource(2, "t", ()), AlterResource(2, "t", ()),
                                              AlterResource(4, "1", ())])
    assert [(r.resource_type, r.error_code) for r in results] == [(2, errors.INVALID_REQUEST), (4, errors.INVALID_REQUEST)]
    assert results[0].error_message == "Duplicate resource."
