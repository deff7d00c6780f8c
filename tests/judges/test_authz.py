"""Kafka 4.4's Java client as the judge of Odradek's authorization: ``ClientJudge --authz`` (peers/kafka,
dev.odradek.peer.AuthzJudge) connects over SASL_PLAINTEXT/PLAIN as a principal with no ACL and runs each Admin call,
producer path (plain, idempotent, transactional, offsets sent to a transaction) and consumer path (no group, a classic
group, a KIP-848 consumer group), then again holding exactly the ACLs the call needs, and records the exception class
the client raises or what the call saw. Every outcome against Odradek must equal Kafka's, below.

``KAFKA_44`` is data: the outcomes of the same harness against Apache Kafka 4.4.0 (one combined KRaft node,
``StandardAuthorizer``, ``super.users=User:admin;User:ANONYMOUS``, PLAIN users admin and bob: peers/compatibility.py's
``kafka_authz_cluster``), recorded on 2026-12-07 with ``python peers/compatibility.py --authz-only --write
docs/compatibility.md``, which runs both brokers. Record it again when the harness changes; a call whose outcome on
Odradek differs on purpose is listed, explained, in ``compatibility.AUTHZ_GAPS`` (and so in docs/compatibility.md's
authorization table)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import compatibility
import pytest
from integration.broker import Broker, BrokerFactory

pytestmark = pytest.mark.timeout(900)

KAFKA_VERSION = "4.4.0"
RECORDED = "2026-12-07"
# call: (outcome without any ACL, outcome with the ACLs the call needs), against Kafka 4.4.0
KAFKA_44: dict[str, tuple[str, str]] = {
    "admin.createTopics": ("TopicAuthorizationException", "works"),
    "admin.createTopics.clusterCreate": ("TopicAuthorizationException", "works"),
    "admin.listTopics": ("works (listed=false)", "works (listed=true)"),
    "admin.describeTopics": ("TopicAuthorizationException", "works (partitions=3 ops=[DESCRIBE])"),
    "admin.describeTopics.byId": ("UnknownTopicIdException", "works (name=true ops=[DESCRIBE])"),
    "admin.describeConfigs.topic": ("TopicAuthorizationException", "works"),
    "admin.describeConfigs.broker": ("ClusterAuthorizationException", "works"),
    "admin.incrementalAlterConfigs.topic": ("TopicAuthorizationException", "works"),
    "admin.incrementalAlterConfigs.broker": ("ClusterAuthorizationException", "works"),
    "admin.describeConfigs.group": ("GroupAuthorizationException", "works"),
    "admin.incrementalAlterConfigs.group": ("GroupAuthorizationException", "works"),
    "admin.listConfigResources": ("ClusterAuthorizationException", "works"),
    "admin.createPartitions": ("TopicAuthorizationException", "works"),
    "admin.listOffsets": ("TopicAuthorizationException", "works (offset=10)"),
    "admin.deleteRecords": ("TopicAuthorizationException", "works (lowWatermark=1)"),
    "admin.describeProducers": ("TopicAuthorizationException", "works"),
    "admin.deleteTopics": ("TopicAuthorizationException", "works"),
    "admin.deleteTopics.byId": ("TopicAuthorizationException", "works"),
    "admin.describeCluster": ("works (ops=[])", "works (ops=[DESCRIBE])"),
    "admin.describeFeatures": ("works", "works"),
    "admin.updateFeatures": ("ClusterAuthorizationException", "works"),
    "admin.describeLogDirs": ("ClusterAuthorizationException", "works (dirs=1)"),
    "admin.electLeaders": ("ClusterAuthorizationException", "works (partitionError=ElectionNotNeededException)"),
    "admin.listPartitionReassignments": ("ClusterAuthorizationException", "works"),
    "admin.alterPartitionReassignments": ("ClusterAuthorizationException", "NoReassignmentInProgressException"),
    "admin.createAcls": ("ClusterAuthorizationException", "works"),
    "admin.describeAcls": ("ClusterAuthorizationException", "works (acls=1)"),
    "admin.deleteAcls": ("ClusterAuthorizationException", "works (deleted=1)"),
    "admin.alterClientQuotas": ("ClusterAuthorizationException", "works"),
    "admin.describeClientQuotas": ("ClusterAuthorizationException", "works"),
    "admin.alterUserScramCredentials": ("ClusterAuthorizationException", "works"),
    "admin.describeUserScramCredentials": ("ClusterAuthorizationException", "works"),
    "admin.listGroups": ("works (listed=false)", "works (listed=true)"),
    "admin.listGroups.clusterDescribe": ("works (listed=false)", "works (listed=true)"),
    "admin.describeConsumerGroups": ("GroupAuthorizationException", "works (state=Empty ops=[DESCRIBE])"),
    "admin.describeClassicGroups": ("GroupAuthorizationException", "works (state=Empty)"),
    "admin.listConsumerGroupOffsets": ("GroupAuthorizationException", "works (partitions=2)"),
    "admin.listConsumerGroupOffsets.groupOnly": ("GroupAuthorizationException", "works (partitions=0)"),
    "admin.alterConsumerGroupOffsets": ("GroupAuthorizationException", "works"),
    "admin.deleteConsumerGroupOffsets": ("GroupAuthorizationException", "works"),
    "admin.deleteConsumerGroups": ("GroupAuthorizationException", "works"),
    "admin.listTransactions": ("works (listed=false)", "works (listed=true)"),
    "admin.describeTransactions": ("TransactionalIdAuthorizationException", "works (state=CompleteCommit)"),
    "admin.fenceProducers": ("TransactionalIdAuthorizationException", "works"),
    "producer.send": ("TopicAuthorizationException", "works"),
    "producer.idempotent": ("TopicAuthorizationException", "works"),
    "producer.idempotent.clusterIdempotentWrite": ("TopicAuthorizationException", "TopicAuthorizationException"),
    "producer.transactional": ("TransactionalIdAuthorizationException", "works"),
    "producer.transactional.topicOnly": ("TransactionalIdAuthorizationException", "TransactionalIdAuthorizationException"),
    "txn.sendOffsetsToTransaction": ("TransactionalIdAuthorizationException", "works"),
    "txn.sendOffsetsToTransaction.noGroup": ("TransactionalIdAuthorizationException", "GroupAuthorizationException"),
    "producer.autoCreate": ("TopicAuthorizationException", "works"),
    "consumer.partitionsFor": ("TopicAuthorizationException", "works (partitions=4)"),
    "consumer.offsetsForTimes": ("TopicAuthorizationException", "works (offset=1)"),
    "consumer.listTopics": ("works (listed=false)", "works (listed=true)"),
    "consumer.assign": ("TopicAuthorizationException", "works (records>0=true)"),
    "consumer.subscribe.classic": ("TopicAuthorizationException", "works (records>0=true)"),
    "consumer.subscribe.classic.topicOnly": ("TopicAuthorizationException", "GroupAuthorizationException"),
    "consumer.subscribe.classic.groupOnly": ("TopicAuthorizationException", "TopicAuthorizationException"),
    "consumer.subscribe.consumer": ("GroupAuthorizationException", "works (records>0=true)"),
    "consumer.subscribe.consumer.topicOnly": ("GroupAuthorizationException", "GroupAuthorizationException"),
    "consumer.subscribe.consumer.groupOnly": ("GroupAuthorizationException", "TopicAuthorizationException"),
    "consumer.subscribe.pattern.classic": ("GroupAuthorizationException", "works (records>0=true)"),
    "consumer.subscribe.pattern.consumer": ("GroupAuthorizationException", "works (records>0=true)"),
    "consumer.committed": ("GroupAuthorizationException", "works (committed=1)"),
}


@pytest.fixture(scope="module")
def odradek_authz(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    factory = BrokerFactory(tmp_path_factory.mktemp("odradek-authz"))
    broker = factory(start=False)
    broker.overrides.update(compatibility.odradek_authz_overrides(broker.port))
    broker.start()
    yield broker
    factory.close()


@pytest.fixture(scope="module")
def results(odradek_authz: Broker) -> dict[str, compatibility.Authz]:
    return compatibility.run_authz_judge(odradek_authz.bootstrap, "judge")


def test_every_call_gets_kafkas_outcome(results: dict[str, compatibility.Authz]) -> None:
    assert list(results) == list(KAFKA_44), "the harness's calls changed: record KAFKA_44 again"
    got = {name: (r.without, r.with_acl) for name, r in results.items()}
    recorded = {name: (compatibility.authz_outcome(name, w), compatibility.authz_outcome(name, a))
                for name, (w, a) in KAFKA_44.items()}
    differ = {name: {"odradek": got[name], "kafka": want} for name, want in recorded.items()
              if got[name] != want and name not in compatibility.AUTHZ_GAPS}
    assert not differ, differ
    stale = [name for name in compatibility.AUTHZ_GAPS if got.get(name) == recorded.get(name)]
    assert not stale, f"listed as gaps but the same as Kafka's now: {stale}"


def test_the_calls_are_refused_without_acls_and_served_with_them() -> None:
    """The recorded data is a judge worth having: most calls are refused without an ACL and served with it."""
    refused = [n for n, (without, _) in KAFKA_44.items() if without.endswith("AuthorizationException")]
    served = [n for n, (_, with_acl) in KAFKA_44.items() if with_acl.startswith("works")]
    assert len(refused) >= 45 and len(served) >= 40


def test_the_doc_table_says_what_odradek_and_kafka_did(results: dict[str, compatibility.Authz]) -> None:
    kafka = {name: compatibility.Authz(compatibility.authz_outcome(name, w), compatibility.authz_outcome(name, a),
                                       results[name].acls) for name, (w, a) in KAFKA_44.items()}
    live = compatibility.section("\n".join(compatibility.render_authz(results, kafka)), compatibility.AUTHZ)
    assert compatibility.section(compatibility.DOC.read_text(), compatibility.AUTHZ) == live, \
        "docs/compatibility.md is stale: python peers/compatibility.py --authz-only --write docs/compatibility.md"
