"""Records applied to a metadata image as Kafka's MetadataDelta / MetadataBatchLoader apply them: the whole
sample log, PartitionChangeRecord's merge rules, the broker epoch checks, transactions, and an image that a
delta never changes."""

from __future__ import annotations

import uuid

import pytest

from odradek.metadata.batches import build_control_batch, build_records_batch, read_batches
from odradek.metadata.delta import MetadataDelta, apply_batches, apply_records
from odradek.metadata.image import (
    CONFIG_BROKER,
    CONFIG_TOPIC,
    DIR_MIGRATING,
    EMPTY_IMAGE,
    MetadataApplyError,
    MetadataImage,
)
from odradek.metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    EndTransactionRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RecordAndVersion,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
)

from .samples import ACL_1, DIR_1, DIR_2, TOPIC_A, TOPIC_B, TOPIC_GONE, sample_log

T = uuid.UUID(int=42)


def _batches(items: list[RecordAndVersion], per_batch: int = 7) -> bytes:
    out = b""
    for i in range(0, len(items), per_batch):
        out += build_records_batch(items[i : i + per_batch], base_offset=i, leader_epoch=3, timestamp=1000 + i)
    return out


@pytest.fixture(scope="module")
def image() -> MetadataImage:
    return apply_batches(EMPTY_IMAGE, read_batches(_batches(sample_log())))


def test_features(image: MetadataImage) -> None:
    assert image.metadata_version == 27
    assert dict(image.features) == {"kraft.version": 1}  # group.version set, then level 0: removed
    assert image.finalized_features() == {"metadata.version": 27, "kraft.version": 1}
    assert image.zk_migration_state == 0


def test_brokers_and_controllers(image: MetadataImage) -> None:
    assert sorted(image.brokers) == [1, 2, 4, 5]  # 3 unregistered
    b1, b2, b4, b5 = (image.brokers[i] for i in (1, 2, 4, 5))
    assert (b1.fenced, b1.epoch, b1.listeners[0].port, b1.rack) == (False, 10, 9092, None)
    assert b1.supported_features["metadata.version"] == (7, 29)
    assert (b2.fenced, b2.rack, [e.name for e in b2.listeners]) == (False, "rack-b", ["PLAINTEXT", "SSL"])
    assert b4.directories == (DIR_2,) and b4.fenced
    assert (b5.fenced, b5.directories, b5.cordoned_directories) == (False, (DIR_1, DIR_2), ())
    assert sorted(image.controllers) == [3000]
    assert image.controllers[3000].listeners[0].name == "CONTROLLER"


def test_topics_and_partitions(image: MetadataImage) -> None:
    assert set(image.topic_ids) == {"orders", "payments"}  # doomed removed; payments' transaction committed
    assert TOPIC_GONE not in image.topics
    orders = image.topic("orders")
    assert orders is not None and orders.topic_id == TOPIC_A and sorted(orders.partitions) == [0, 1, 2]
    p0 = orders.partitions[0]
    # PartitionRecord leader 1 epoch 0 / 0; ISR change (no leader change); leader 2 with new replicas
    assert (p0.replicas, p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ((2, 1), (2,), 2, 1, 2)
    assert p0.directories == (DIR_MIGRATING, DIR_MIGRATING)
    p1 = orders.partitions[1]
    # leader -1 (none) bumps the leader epoch; ELR set by v2 then cleared by ClearElrRecord (one more epoch)
    assert (p1.leader, p1.leader_epoch, p1.partition_epoch) == (-1, 1, 3)
    assert (p1.directories, p1.adding_replicas, p1.elr, p1.last_known_elr) == ((DIR_2, DIR_1), (1,), (), ())
    p2 = orders.partitions[2]
    assert (p2.removing_replicas, p2.adding_replicas, p2.leader_recovery_state) == ((2,), (4,), 1)
    assert (p2.elr, p2.last_known_elr, p2.partition_epoch) == ((), (), 6)
    payments = image.topics[TOPIC_B]
    assert payments.name == "payments" and payments.partitions[0].isr == (1,)


def test_configs(image: MetadataImage) -> None:
    assert dict(image.config(CONFIG_TOPIC, "orders")) == {"cleanup.policy": "compact"}  # retention.ms deleted
    assert (CONFIG_TOPIC, "doomed") not in image.configs  # went with its topic
    assert (CONFIG_TOPIC, "payments") not in image.configs  # its transaction was aborted
    assert dict(image.config(CONFIG_BROKER, "")) == {"log.retention.bytes": "1048576"}
    assert dict(image.config(CONFIG_BROKER, "1")) == {"log.cleaner.threads": "2"}


def test_security_quotas_ids_and_tokens(image: MetadataImage) -> None:
    assert image.producer_ids == 2000
    assert list(image.acls) == [ACL_1] and image.acls[ACL_1].principal == "User:alice"
    assert list(image.scram) == [(1, "alice")] and image.scram[(1, "alice")].iterations == 4096
    assert {k: dict(v) for k, v in image.client_quotas.items()} == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1048576.0}}
    assert list(image.tokens) == ["token-1"] and image.tokens["token-1"].renewers == ("User:bob", "User:carol")


def test_offset_and_epoch_follow_the_last_record(image: MetadataImage) -> None:
    assert image.offset == len(sample_log()) - 1 and image.epoch == 3


# ------------------------------------------------------------------------------------- merge rules


def _with_partition(**kw: object) -> MetadataImage:
    base = dict(partition_id=0, topic_id=T, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4,
                partition_epoch=9)
    base.update(kw)
    return apply_records(EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T), PartitionRecord(**base)])  # type: ignore[arg-type]


def _change(img: MetadataImage, **kw: object) -> MetadataImage:
    return apply_records(img, [PartitionChangeRecord(partition_id=0, topic_id=T, **kw)])  # type: ignore[arg-type]


def test_absent_fields_are_unchanged_but_the_partition_epoch_bumps() -> None:
    p = _change(_with_partition()).topics[T].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2, 3), (1, 2, 3), 1, 4, 10)


def test_isr_is_replaced_and_leader_minus_two_keeps_the_leader() -> None:
    p = _change(_with_partition(), isr=(1,), leader=-2).topics[T].partitions[0]
    assert (p.isr, p.leader, p.leader_epoch) == ((1,), 1, 4)


def test_leader_minus_one_means_no_leader_and_a_new_leader_epoch() -> None:
    p = _change(_with_partition(), leader=-1, isr=()).topics[T].partitions[0]
    assert (p.leader, p.leader_epoch, p.isr) == (-1, 5, ())


def test_the_same_leader_again_bumps_the_leader_epoch() -> None:
    p = _change(_with_partition(), leader=1).topics[T].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 5, 10)


def test_replicas_replace_and_directories_follow_their_count() -> None:
    p = _change(_with_partition(directories=(DIR_1, DIR_1, DIR_2)), replicas=(4, 5)).topics[T].partitions[0]
    assert p.replicas == (4, 5) and p.directories == (DIR_1, DIR_1, DIR_2)  # directories not in the change
    q = _change(_with_partition(), replicas=(4, 5), directories=(DIR_1, DIR_2)).topics[T].partitions[0]
    assert q.directories == (DIR_1, DIR_2)
    with pytest.raises(MetadataApplyError, match="2 replicas but 1 directories"):
        _change(_with_partition(), replicas=(4, 5), directories=(DIR_1,))


def test_leader_recovery_state_minus_one_is_no_change() -> None:
    img = _with_partition(leader_recovery_state=1)
    assert _change(img).topics[T].partitions[0].leader_recovery_state == 1
    assert _change(img, leader_recovery_state=0).topics[T].partitions[0].leader_recovery_state == 0


def test_a_change_of_an_unknown_partition_or_topic_is_an_error() -> None:
    with pytest.raises(MetadataApplyError, match="Unable to find partition"):
        apply_records(_with_partition(), [PartitionChangeRecord(partition_id=7, topic_id=T, isr=(1,))])
    with pytest.raises(MetadataApplyError, match="no topic with id"):
        apply_records(EMPTY_IMAGE, [PartitionChangeRecord(partition_id=0, topic_id=T)])
    with pytest.raises(MetadataApplyError, match="no such topic"):
        apply_records(EMPTY_IMAGE, [RemoveTopicRecord(topic_id=T)])


def test_clear_elr_of_every_topic() -> None:
    img = _with_partition(eligible_leader_replicas=(2,), last_known_elr=(3,))
    p = apply_records(img, [ClearElrRecord(topic_name="")]).topics[T].partitions[0]
    assert (p.elr, p.last_known_elr, p.partition_epoch) == ((), (), 10)
    with pytest.raises(MetadataApplyError, match="no such topic"):
        apply_records(img, [ClearElrRecord(topic_name="nope")])


# ------------------------------------------------------------------------------------- brokers


def test_a_broker_change_needs_the_registered_epoch() -> None:
    img = apply_records(EMPTY_IMAGE, [RegisterBrokerRecord(broker_id=1, broker_epoch=5)])
    with pytest.raises(MetadataApplyError, match="given epoch, 4, did not match the current broker epoch, 5"):
        apply_records(img, [FenceBrokerRecord(id=1, epoch=4)])
    with pytest.raises(MetadataApplyError, match="that broker was not registered"):
        apply_records(img, [FenceBrokerRecord(id=2, epoch=5)])
    with pytest.raises(MetadataApplyError, match="unknown value for fenced field: 3"):
        apply_records(img, [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=3)])
    shut = apply_records(img, [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, in_controlled_shutdown=1)])
    assert shut.brokers[1].in_controlled_shutdown and shut.brokers[1].fenced


def test_removing_an_unknown_acl_is_an_error() -> None:
    with pytest.raises(MetadataApplyError, match="Failed to find existing ACL"):
        apply_records(EMPTY_IMAGE, [RemoveAccessControlEntryRecord(id=T)])


# ------------------------------------------------------------------------------------- purity, transactions


def test_the_base_image_is_never_changed() -> None:
    base = _with_partition()
    before = (dict(base.topics), dict(base.topics[T].partitions), dict(base.topic_ids))
    delta = MetadataDelta(base)
    delta.replay(PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1,)))
    delta.replay(TopicRecord(name="u", topic_id=uuid.UUID(int=7)))
    after = delta.apply()
    assert (dict(base.topics), dict(base.topics[T].partitions), dict(base.topic_ids)) == before
    assert after.topics[T].partitions[0].isr == (1,) and base.topics[T].partitions[0].isr == (1, 2, 3)
    with pytest.raises(TypeError):
        after.topics[T] = after.topics[T]  # type: ignore[index]


def _log(records: list[MetadataRecord]) -> bytes:
    return build_records_batch(records, base_offset=0, leader_epoch=1, timestamp=0)


def test_an_open_transaction_at_the_end_is_left_out() -> None:
    data = _log([TopicRecord(name="a", topic_id=T), BeginTransactionRecord(name="x"),
                 TopicRecord(name="b", topic_id=uuid.UUID(int=8))])
    img = apply_batches(EMPTY_IMAGE, read_batches(data))
    assert set(img.topic_ids) == {"a"} and img.offset == 1  # up to the BeginTransactionRecord


def test_an_aborted_transaction_leaves_nothing_and_later_records_apply() -> None:
    data = _log([BeginTransactionRecord(), TopicRecord(name="b", topic_id=uuid.UUID(int=8)),
                 AbortTransactionRecord(reason="failover"), TopicRecord(name="c", topic_id=uuid.UUID(int=9)),
                 BeginTransactionRecord(), TopicRecord(name="d", topic_id=uuid.UUID(int=10)), EndTransactionRecord()])
    img = apply_batches(EMPTY_IMAGE, read_batches(data))
    assert set(img.topic_ids) == {"c", "d"} and img.offset == 6


@pytest.mark.parametrize("records", [
    [EndTransactionRecord()],
    [AbortTransactionRecord()],
    [BeginTransactionRecord(), BeginTransactionRecord()],
])
def test_misplaced_transaction_markers_are_errors(records: list[MetadataRecord]) -> None:
    with pytest.raises(MetadataApplyError, match="offset"):
        apply_batches(EMPTY_IMAGE, read_batches(_log(records)))


def test_control_batches_move_the_offset_only() -> None:
    from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
    from kio.static.primitive import i16

    data = _log([TopicRecord(name="a", topic_id=T)]) + build_control_batch(
        [SnapshotFooterRecord(version=i16(0))], base_offset=1, leader_epoch=2, timestamp=0)
    img = apply_batches(EMPTY_IMAGE, read_batches(data))
    assert (img.offset, img.epoch, list(img.topic_ids)) == (1, 2, ["a"])


def test_a_transaction_marker_is_not_for_a_delta() -> None:
    with pytest.raises(MetadataApplyError, match="not replayed by a metadata delta"):
        MetadataDelta().replay(BeginTransactionRecord())
