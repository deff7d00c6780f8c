"""A new partition's leader leads before its own Metadata answers name it (issue 33).

The controller tells the replicas their roles (LeaderAndIsr) before it tells the brokers the metadata
(UpdateMetadata), in Kafka's ControllerBrokerRequestBatch order; a broker's requests from the controller
arrive in the order sent. The other way round, a broker named itself the leader of a new partition and
answered a Produce to it with NOT_LEADER_OR_FOLLOWER until its LeaderAndIsr came: a Java idempotent
producer whose first batch was refused there while its next, pipelined one was taken once the broker
led then retried that first batch for ever on OUT_OF_ORDER_SEQUENCE_NUMBER.

Each broker is asked, in a tight loop of its own, for the newest topic's metadata while topics are
created; the moment it names itself leader of a partition, a Produce goes to it. Before the fix 42 of
60 such produces were refused."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v9.request import MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import i16
from waiting import wait_until

from odradek.client.wire import WireClient
from odradek.protocol.records import build_batch

from .cluster import Cluster
from .zk import Ensemble

TOPICS, PARTITIONS = 8, 3


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zookeeper, 3).start()
    yield c
    c.stop()


class Prober:
    """Asks one broker for the current topic's metadata until it names itself a leader, then produces
    there at once; records the error code per (topic, partition)."""

    def __init__(self, cluster: Cluster, broker_id: int, current: list[str], answers: dict[tuple[str, int], int],
                 stop: threading.Event) -> None:
        self.wire = WireClient(cluster.brokers[broker_id].bootstrap)
        self.broker_id, self.current, self.answers, self.stop = broker_id, current, answers, stop
        self.batch = build_batch([(None, b"x")])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self._probe(self.current[0])
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.wire.close()

    def _probe(self, topic: str) -> None:
        md = self.wire.request(3, 9, topics=(MetadataRequestTopic(name=TopicName(topic)),),
                               allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False)
        for t in md.topics:
            for p in t.partitions if t.error_code.value == 0 else ():
                key = (topic, p.partition_index)
                if p.leader_id != self.broker_id or key in self.answers:
                    continue
                r = self.wire.request(0, 9, transactional_id=None, acks=i16(1), timeout=datetime.timedelta(seconds=5),
                                      topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
                                          PartitionProduceData(index=p.partition_index, records=self.batch),)),))
                self.answers[key] = r.responses[0].partition_responses[0].error_code.value


def test_a_broker_never_names_itself_leader_before_it_leads(cluster: Cluster) -> None:
    current = ["none-yet"]
    answers: dict[tuple[str, int], int] = {}
    stop = threading.Event()
    probers = [Prober(cluster, b, current, answers, stop) for b in cluster.brokers]
    for p in probers:
        p.thread.start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        for i in range(TOPICS):
            topic = current[0] = f"announced{i}"
            admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
            wait_until(lambda t=topic: all((t, p) in answers for p in range(PARTITIONS)), 30,
                       f"each leader of {topic} probed", detail=lambda: [p.error for p in probers])
    finally:
        stop.set()
        for p in probers:
            p.thread.join(10)
    assert [p.error for p in probers] == [None] * len(probers)
    refused = {tp: code for tp, code in answers.items() if code != 0}
    assert not refused, f"produce refused right after the leader named itself in Metadata: {refused}"
    assert len(answers) == TOPICS * PARTITIONS
