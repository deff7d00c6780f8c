"""DescribeProducers (61, KIP-664): the active producers of partitions this broker leads, from
each log's producer state, with the first offset of an open transaction
(kafka-transactions.sh describe-producers / find-hanging)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasReplicaManager, HasTopics, RequestContext

API_KEY = ApiKey.DESCRIBE_PRODUCERS
MIN_VERSION = 0
MAX_VERSION = 0


class Needs(HasTopics, HasReplicaManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    svc = services(ctx)
    rm = svc.replica_manager
    topics = []
    for t in request.topics:
        meta = svc.topics.get(t.name)
        parts = []
        for p in t.partition_indexes:
            p = int(p)
            code, msg = errors.NONE, None
            active: list[Any] = []
            if not ctx.permits(ResourceType.TOPIC, t.name):
                code = errors.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p < len(meta.partitions):
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif rm.leading(t.name, p) is None or (plog := rm.get_log(t.name, p)) is None:
                code = errors.NOT_LEADER_OR_FOLLOWER
            else:
                for e in plog.producer_state_entries():
                    active.append(make(
                        m.ProducerState, producer_id=e.producer_id, producer_epoch=e.epoch,
                        last_sequence=e.last_seq if e.batches else -1, last_timestamp=e.last_timestamp,
                        coordinator_epoch=e.coordinator_epoch, current_txn_start_offset=e.current_txn_first_offset,
                    ))
            parts.append(make(m.PartitionResponse, partition_index=p, error_code=code, error_message=msg,
                              active_producers=tuple(active)))
        topics.append(make(m.TopicResponse, name=t.name, partitions=tuple(parts)))
    return make(m.DescribeProducersResponse, throttle_time=0, topics=tuple(topics))
