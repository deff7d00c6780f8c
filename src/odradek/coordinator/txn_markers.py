"""Transaction markers written to the partitions this broker leads (the leader side of
WriteTxnMarkers, Kafka's ReplicaManager.appendRecords with origin Coordinator for the markers
KafkaApis.handleWriteTxnMarkersRequest receives).

One COMMIT or ABORT control batch (:mod:`odradek.log.txn_marker`) per partition, appended with
the leader's epoch; the partition's producer state, last stable offset and transaction index
follow (:meth:`odradek.log.log.Log.append_as_leader`). A marker landing in
``__consumer_offsets`` also ends the transaction's pending offset commits there
(``on_consumer_offsets_marker``). The caller waits for the markers to be replicated (acks=-1,
as Kafka appends them) with :meth:`ReplicaManager.wait_for_replication` on the returned end
offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from odradek.log.errors import ProducerStateError
from odradek.log.txn_marker import ControlRecordType, build_marker_batch
from odradek.protocol import errors

if TYPE_CHECKING:
    from odradek.controller.topics import TopicMeta
    from odradek.coordinator.runtime import CoordinatorPartitions, LogLookup


class TopicLookup(Protocol):
    def get(self, name: str) -> TopicMeta | None: ...

log = logging.getLogger("odradek.txn")

TopicPartition = tuple[str, int]
OFFSETS_TOPIC = "__consumer_offsets"


def write_markers(
    rm: CoordinatorPartitions,
    logs: LogLookup,
    topics: TopicLookup,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    on_consumer_offsets_marker: Callable[[int, int, bool], None],
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Append the marker to each partition: (error per partition, end offset per appended
    partition to wait for). UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
    NOT_LEADER_OR_FOLLOWER where this broker does not lead, INVALID_PRODUCER_EPOCH or
    TRANSACTION_COORDINATOR_FENCED from the producer state."""
    result = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    codes: dict[TopicPartition, int] = {}
    required: dict[TopicPartition, int] = {}
    for tp in partitions:
        topic, index = tp
        meta = topics.get(topic)
        if meta is None or not 0 <= index < len(meta.partitions):
            codes[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        part = rm.leading(topic, index)
        plog = logs.get_log(topic, index)
        if part is None or plog is None:
            codes[tp] = errors.NOT_LEADER_OR_FOLLOWER
            continue
        batch = build_marker_batch(producer_id, producer_epoch, coordinator_epoch, result, timestamp=now_ms)
        try:
            info = rm.append_internal(part, plog, bytearray(batch), now_ms)
        except ProducerStateError as e:
            log.warning("%s marker of producer %d (epoch %d) refused by %s-%d: %s",
                        result.name, producer_id, producer_epoch, topic, index, e)
            codes[tp] = e.error_code
            continue
        except OSError:
            codes[tp] = errors.KAFKA_STORAGE_ERROR
            continue
        codes[tp] = errors.NONE
        required[tp] = info.last_offset + 1
        if topic == OFFSETS_TOPIC:
            on_consumer_offsets_marker(index, producer_id, commit)
    return codes, required
