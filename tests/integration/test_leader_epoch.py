"""OffsetForLeaderEpoch against the real broker: the epoch cache survives restarts."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderPartition, OffsetForLeaderTopic
from kio.static.primitive import i32

from odradek.client.wire import WireClient
from odradek.protocol import errors

from .broker import Broker


def _ask(bootstrap: str, partition: int, leader_epoch: int, current: int = -1) -> tuple[int, int, int]:
    with WireClient(bootstrap) as c:
        resp = c.request(23, 4, replica_id=i32(-1), topics=(OffsetForLeaderTopic(topic="le", partitions=(
            OffsetForLeaderPartition(partition=i32(partition), current_leader_epoch=i32(current),
                                     leader_epoch=i32(leader_epoch)),)),))
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)


def test_end_offset_of_the_current_epoch(broker: Broker) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic("le", 1, 1)])["le"].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(7):
        p.produce("le", b"%d" % i, partition=0)
    assert p.flush(15) == 0
    assert _ask(broker.bootstrap, 0, 0) == (0, 0, 7)
    broker.restart()
    # written by the log's flush (a clean stop flushes), not at every new epoch
    assert (broker.partition_dir("le", 0) / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert _ask(broker.bootstrap, 0, 0) == (0, 0, 7)
    assert _ask(broker.bootstrap, 0, 0, current=3)[0] == errors.UNKNOWN_LEADER_EPOCH
    assert _ask(broker.bootstrap, 5, 0)[0] == errors.UNKNOWN_TOPIC_OR_PARTITION
