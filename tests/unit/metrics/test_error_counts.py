"""ErrorsPerSec's counting: every error_code field of a kio response entity, at any depth."""

from __future__ import annotations

from odradek.metrics.error_counts import entity_error_counts
from odradek.metrics.stats import RequestStats
from odradek.protocol import errors
from odradek.protocol.codec import make


def test_nested_error_codes_are_counted_with_none() -> None:
    from kio.schema.metadata.v12 import response as m

    def partition(i: int, code: int) -> object:
        return make(m.MetadataResponsePartition, error_code=code, partition_index=i, leader_id=0,
                    leader_epoch=0, replica_nodes=(), isr_nodes=(), offline_replicas=())

    topics = (
        make(m.MetadataResponseTopic, error_code=errors.NONE, name="a", topic_id=None, is_internal=False,
             partitions=(partition(0, errors.NONE), partition(1, errors.LEADER_NOT_AVAILABLE)),
             topic_authorized_operations=-2147483648),
        make(m.MetadataResponseTopic, error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, name="b", topic_id=None,
             is_internal=False, partitions=(), topic_authorized_operations=-2147483648),
    )
    resp = make(m.MetadataResponse, throttle_time=0, brokers=(), cluster_id=None, controller_id=0, topics=topics)
    assert entity_error_counts(resp) == {errors.NONE: 2, errors.LEADER_NOT_AVAILABLE: 1,
                                         errors.UNKNOWN_TOPIC_OR_PARTITION: 1}


def test_request_stats_add_up_per_request_and_code() -> None:
    rs = RequestStats()
    rs.record_errors(0, {errors.NONE: 3})
    rs.record_errors(0, {errors.NONE: 1, errors.NOT_LEADER_OR_FOLLOWER: 2})
    assert rs.errors == {(0, errors.NONE): 4, (0, errors.NOT_LEADER_OR_FOLLOWER): 2}
