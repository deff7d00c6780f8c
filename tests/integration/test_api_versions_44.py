"""The API versions Kafka 4.4 added over Odradek's earlier maxima, each sent raw on the wire to a real
broker (kio requests through WireClient), with their error cases: Metadata v13, DescribeGroups v6,
AlterPartitionReassignments v1, DescribeCluster v2, ListTransactions v2, ListOffsets v11,
DescribeLogDirs v5, OffsetCommit v10 and OffsetFetch v10. ApiVersions advertises each of them."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from odradek.client.wire import WireClient

from .broker import Broker
from .clients import create_topic, unique

SHARED_BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
                           "group.initial.rebalance.delay.ms": 0}

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICATION_FACTOR = 38
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_ID = 100
INVALID_REGULAR_EXPRESSION = 128
RETRIABLE_COORDINATOR = (14, 15, 16)  # loading, not available, not coordinator


def _topic_id(w: WireClient, topic: str) -> uuid.UUID:
    from kio.schema.metadata.v12 import request as mreq

    r = w.request(3, 12, topics=(mreq.MetadataRequestTopic(topic_id=None, name=topic),),
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    tid = r.topics[0].topic_id
    assert tid is not None and tid != uuid.UUID(int=0)
    return tid


def _find_coordinator(w: WireClient, key: str, key_type: int = 0, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        r = w.request(10, 4, key_type=key_type, coordinator_keys=(key,))
        if int(r.coordinators[0].error_code) == 0:
            return
        assert time.monotonic() < deadline, f"no coordinator for {key}: {r}"
        time.sleep(0.1)


def _retry(send: Any, code_of: Any, timeout: float = 20.0) -> Any:
    """``send()`` again while the coordinator is still loading or moving."""
    deadline = time.monotonic() + timeout
    while True:
        r = send()
        if code_of(r) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def test_api_versions_advertise_kafka_44s_maxima(shared_broker: Broker) -> None:
    with WireClient(shared_broker.bootstrap) as w:
        r = w.request(18, 3, client_software_name="t", client_software_version="1")
    got = {int(k.api_key): int(k.max_version) for k in r.api_keys}
    assert {k: got[k] for k in (3, 15, 45, 60, 66, 2, 35, 8, 9)} == {
        3: 13, 15: 6, 45: 1, 60: 2, 66: 2, 2: 11, 35: 5, 8: 10, 9: 10}


def test_metadata_v13(shared_broker: Broker) -> None:
    """v13 adds the top-level error code (KIP-1102): 0 on an answered request, the topic errors
    staying per topic (an unknown id UNKNOWN_TOPIC_ID, an unknown name UNKNOWN_TOPIC_OR_PARTITION)."""
    from kio.schema.metadata.v13 import request as mreq

    b = shared_broker
    topic = unique("md13")
    create_topic(b.bootstrap, topic, 2)
    with WireClient(b.bootstrap) as w:
        tid = _topic_id(w, topic)
        missing = uuid.uuid4()
        r = w.request(3, 13, topics=(
            mreq.MetadataRequestTopic(topic_id=tid, name=None),
            mreq.MetadataRequestTopic(topic_id=None, name=topic),
            mreq.MetadataRequestTopic(topic_id=missing, name=None),
            mreq.MetadataRequestTopic(topic_id=None, name=unique("absent")),
        ), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        assert int(r.error_code) == 0
        by_id, by_name, unknown_id, unknown_name = r.topics
        assert int(by_id.error_code) == 0 and by_id.name == topic and len(by_id.partitions) == 2
        assert int(by_name.error_code) == 0 and by_name.topic_id == tid
        assert int(unknown_id.error_code) == UNKNOWN_TOPIC_ID and unknown_id.name is None
        assert unknown_id.topic_id == missing
        assert int(unknown_name.error_code) == UNKNOWN_TOPIC_OR_PARTITION
        everything = w.request(3, 13, topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
        assert int(everything.error_code) == 0 and topic in {t.name for t in everything.topics}


def test_describe_groups_v6_reports_a_missing_group(shared_broker: Broker) -> None:
    """KIP-1043: v6 answers GROUP_ID_NOT_FOUND (state Dead) for a group that does not exist, where
    v5 answered Dead with no error; a group that exists is described as before."""
    from kio.schema.offset_commit.v9 import request as oc
    from kio.schema.types import GroupId

    b = shared_broker
    topic, group, missing = unique("dg6"), unique("g-dg6"), unique("g-none")
    create_topic(b.bootstrap, topic, 1)
    with WireClient(b.bootstrap) as w:
        _find_coordinator(w, group)
        # a standalone commit (no member, generation -1) makes the group exist, Empty
        r = _retry(lambda: w.request(8, 9, group_id=GroupId(group), generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=(oc.OffsetCommitRequestTopic(name=topic, partitions=(
                                         oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata=None),)),)),
                   lambda r: int(r.topics[0].partitions[0].error_code))
        assert int(r.topics[0].partitions[0].error_code) == 0

        def describe(version: int) -> Any:
            return _retry(lambda: w.request(15, version, groups=(GroupId(group), GroupId(missing)),
                                            include_authorized_operations=False),
                          lambda r: int(r.groups[0].error_code))

        old_present, old_missing = describe(5).groups
        assert int(old_missing.error_code) == 0 and old_missing.group_state == "Dead"
        present, absent = describe(6).groups
        assert int(present.error_code) == 0 and present.error_message is None
        assert present.group_state == old_present.group_state == "Empty"
        assert int(absent.error_code) == GROUP_ID_NOT_FOUND and absent.group_state == "Dead"
        assert absent.error_message == f"Group {missing} not found." and absent.members == ()


def test_alter_partition_reassignments_v1_echoes_the_flag(shared_broker: Broker) -> None:
    """v1 (KIP-860): allow_replication_factor_change comes back in the response; a target keeping the
    replication factor is accepted with the flag off. (A change of factor refused needs several brokers:
    tests/cluster/test_reassignment.py.)"""
    from kio.schema.alter_partition_reassignments.v1 import request as ar

    b = shared_broker
    topic = unique("apr1")
    create_topic(b.bootstrap, topic, 1)
    with WireClient(b.bootstrap) as w:
        node = int(w.request(60, 2, include_cluster_authorized_operations=False, endpoint_type=1,
                             include_fenced_brokers=False).brokers[0].broker_id)
        for allow in (False, True):
            r = w.request(45, 1, timeout=datetime.timedelta(seconds=30), allow_replication_factor_change=allow,
                          topics=(ar.ReassignableTopic(name=topic, partitions=(
                              ar.ReassignablePartition(partition_index=0, replicas=(node,)),
                              ar.ReassignablePartition(partition_index=7, replicas=(node,)))),))
            assert int(r.error_code) == 0 and r.allow_replication_factor_change is allow
            ok, unknown = r.responses[0].partitions
            assert int(ok.error_code) == 0 and int(unknown.error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_cluster_v2(shared_broker: Broker) -> None:
    """v2 (KIP-1073): include_fenced_brokers and is_fenced; a registered broker is never fenced here
    (fencing is KRaft's), so both answers list the broker, unfenced."""
    with WireClient(shared_broker.bootstrap) as w:
        for fenced in (False, True):
            r = w.request(60, 2, include_cluster_authorized_operations=False, endpoint_type=1,
                          include_fenced_brokers=fenced)
            assert int(r.error_code) == 0 and len(r.brokers) == 1
            assert r.brokers[0].is_fenced is False and int(r.brokers[0].port) == shared_broker.port
        # the endpoint type check of v1 still holds
        r = w.request(60, 2, include_cluster_authorized_operations=False, endpoint_type=2, include_fenced_brokers=False)
        assert int(r.error_code) == 114  # UNSUPPORTED_ENDPOINT_TYPE


def test_list_transactions_v2_filters_by_pattern(shared_broker: Broker) -> None:
    """v2 (KIP-1152): transactional_id_pattern, an RE2 regular expression the whole id must match;
    null or empty lists all; an invalid one (RE2 has no lookahead) is INVALID_REGULAR_EXPRESSION."""
    b = shared_broker
    prefix = unique("lt2")
    ids = [f"{prefix}-a1", f"{prefix}-a2", f"{prefix}-b1"]
    producers = []
    for tid in ids:
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
        p.init_transactions(30)
        producers.append(p)
    with WireClient(b.bootstrap) as w:
        def listed(pattern: str | None, version: int = 2) -> tuple[int, set[str]]:
            fields: dict[str, Any] = {"state_filters": (), "producer_id_filters": (), "duration_filter": -1}
            if version >= 2:
                fields["transactional_id_pattern"] = pattern
            r = w.request(66, version, **fields)
            return int(r.error_code), {t.transactional_id for t in r.transaction_states}

        assert listed(f"{prefix}-a.") == (0, {ids[0], ids[1]})
        assert listed(f"{prefix}-.*1") == (0, {ids[0], ids[2]})
        assert listed("a1") == (0, set())  # the whole id, not a search
        assert listed(None)[1] >= set(ids) and listed("")[1] >= set(ids)
        assert listed(None, version=1)[1] >= set(ids)
        assert listed("(?=x).*") == (INVALID_REGULAR_EXPRESSION, set())
        assert listed(f"({prefix}") == (INVALID_REGULAR_EXPRESSION, set())
    for p in producers:
        p.flush(5)


def test_list_offsets_v11_earliest_pending_upload(shared_broker: Broker) -> None:
    """v11 (KIP-1023): the earliest offset pending upload to tiered storage (-6); without tiered
    storage Kafka answers no offset (-1) and no epoch, as for the latest tiered offset (-5)."""
    from kio.schema.list_offsets.v11 import request as lo

    b = shared_broker
    topic = unique("lo11")
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(3):
        p.produce(topic, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0
    with WireClient(b.bootstrap) as w:
        def offset(spec: int, name: str = topic) -> tuple[int, int, int]:
            r = w.request(2, 11, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=5),
                          topics=(lo.ListOffsetsTopic(name=name, partitions=(
                              lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=spec),)),))
            part = r.topics[0].partitions[0]
            return int(part.error_code), int(part.offset), int(part.leader_epoch)

        assert offset(-6) == (0, -1, -1)
        assert offset(-5) == (0, -1, -1)
        assert offset(-2)[:2] == (0, 0) and offset(-1)[:2] == (0, 3)
        assert offset(-6, unique("absent"))[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_log_dirs_v5(shared_broker: Broker) -> None:
    """v5 (KIP-1066): is_cordoned per log dir; false, as cordoned.log.dirs is not acted on."""
    from kio.schema.describe_log_dirs.v5 import request as dl

    b = shared_broker
    topic = unique("dld5")
    create_topic(b.bootstrap, topic, 1)
    with WireClient(b.bootstrap) as w:
        r = w.request(35, 5, topics=(dl.DescribableLogDirTopic(topic=topic, partitions=(0,)),))
    assert int(r.error_code) == 0 and len(r.results) == 1
    d = r.results[0]
    assert int(d.error_code) == 0 and d.is_cordoned is False and int(d.total_bytes) > 0
    assert [(t.name, [int(p.partition_index) for p in t.partitions]) for t in d.topics] == [(topic, [0])]


def test_offset_commit_and_fetch_v10_by_topic_id(shared_broker: Broker) -> None:
    """v10 (KIP-848): OffsetCommit and OffsetFetch name topics by id. An unknown id is
    UNKNOWN_TOPIC_ID on each of its partitions; offsets committed by id are the topic's by name
    (v9 reads them); fetching all committed offsets lists them by id."""
    from kio.schema.offset_commit.v10 import request as oc
    from kio.schema.offset_fetch.v9 import request as of9
    from kio.schema.offset_fetch.v10 import request as of
    from kio.schema.types import GroupId

    b = shared_broker
    topic, group = unique("oc10"), unique("g-oc10")
    create_topic(b.bootstrap, topic, 2)
    missing = uuid.uuid4()
    with WireClient(b.bootstrap) as w:
        tid = _topic_id(w, topic)
        _find_coordinator(w, group)

        def part(i: int, offset: int) -> Any:
            return oc.OffsetCommitRequestPartition(partition_index=i, committed_offset=offset,
                                                   committed_leader_epoch=-1, committed_metadata="m")

        r = _retry(lambda: w.request(8, 10, group_id=GroupId(group), generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=(
                                         oc.OffsetCommitRequestTopic(topic_id=tid, partitions=(part(0, 5), part(1, 7),
                                                                                                part(9, 1))),
                                         oc.OffsetCommitRequestTopic(topic_id=missing, partitions=(part(0, 3),)))),
                   lambda r: int(r.topics[0].partitions[0].error_code))
        known, unknown = r.topics
        assert known.topic_id == tid and unknown.topic_id == missing
        assert [(int(p.partition_index), int(p.error_code)) for p in known.partitions] == [
            (0, 0), (1, 0), (9, UNKNOWN_TOPIC_OR_PARTITION)]
        assert [(int(p.partition_index), int(p.error_code)) for p in unknown.partitions] == [(0, UNKNOWN_TOPIC_ID)]

        fetched = w.request(9, 10, require_stable=False, groups=(of.OffsetFetchRequestGroup(
            group_id=GroupId(group), member_id=None, member_epoch=-1, topics=(
                of.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=(0, 1)),
                of.OffsetFetchRequestTopics(topic_id=missing, partition_indexes=(0, 4)))),))
        g = fetched.groups[0]
        assert int(g.error_code) == 0
        by_id = {t.topic_id: [(int(p.partition_index), int(p.committed_offset), int(p.error_code))
                              for p in t.partitions] for t in g.topics}
        assert by_id == {tid: [(0, 5, 0), (1, 7, 0)], missing: [(0, -1, UNKNOWN_TOPIC_ID), (4, -1, UNKNOWN_TOPIC_ID)]}
        assert g.topics[0].partitions[0].metadata == "m"

        everything = w.request(9, 10, require_stable=False, groups=(of.OffsetFetchRequestGroup(
            group_id=GroupId(group), member_id=None, member_epoch=-1, topics=None),))
        assert {t.topic_id: sorted((int(p.partition_index), int(p.committed_offset)) for p in t.partitions)
                for t in everything.groups[0].topics} == {tid: [(0, 5), (1, 7)]}

        # the same offsets by name (v9)
        v9 = w.request(9, 9, require_stable=False, groups=(of9.OffsetFetchRequestGroup(
            group_id=GroupId(group), member_id=None, member_epoch=-1, topics=(
                of9.OffsetFetchRequestTopics(name=topic, partition_indexes=(0, 1)),)),))
        assert [(t.name, [int(p.committed_offset) for p in t.partitions]) for t in v9.groups[0].topics] == [
            (topic, [5, 7])]

