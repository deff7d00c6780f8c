"""DescribeTopicPartitions (75, KIP-966): topics and their partitions a page at a time, as Kafka's
DescribeTopicPartitionsRequestHandler answers it; Kafka 4's Admin.describeTopics (so kafka-topics --describe)
asks it first and falls back to Metadata only when a broker does not offer it.

- No topic named: every topic the principal may DESCRIBE (the others are left out); named topics: each one,
  an unknown one with UNKNOWN_TOPIC_OR_PARTITION, one it may not DESCRIBE with TOPIC_AUTHORIZATION_FAILED.
  Topics come sorted by name, those it may not DESCRIBE after the others (Kafka appends them last).
- Each topic the principal may DESCRIBE carries its KIP-430 authorized operations (``topic_authorized_operations``,
  the bits ``Admin.describeTopics`` turns into ``TopicDescription.authorizedOperations()``): Kafka sets them on
  every answer, there being no include flag in this request. The refused ones keep the field's default
  (-2147483648: not given), as Kafka's.
- At most ``min(response_partition_limit, max.request.partition.size.limit)`` partitions are answered;
  ``next_cursor`` names the topic and partition to ask from next, and a request's ``cursor`` starts there
  (a cursor topic missing from the named topics is INVALID_REQUEST).
- ELR (KIP-966's eligible and last known leader replicas) is a KRaft controller's: answered empty, as a
  Kafka cluster with eligible.leader.replicas.version 0 does.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, HasTopics, RequestContext

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 0

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


class Needs(HasTopics, HasCluster, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    reg = svc.topics
    live = set(svc.cluster.live_brokers)
    fetch_all = len(request.topics) == 0
    names = sorted(reg.topics) if fetch_all else sorted({t.name for t in request.topics})
    cursor = request.cursor
    start_topic, start_partition = (cursor.topic_name, max(0, int(cursor.partition_index))) if cursor else (None, 0)
    if cursor is not None and not fetch_all and start_topic not in names:
        # Kafka throws InvalidRequestException; its error response gives every named topic the code
        return make(m.DescribeTopicPartitionsResponse, throttle_time=0, next_cursor=None,
                    topics=tuple(_error_topic(m, n, errors.INVALID_REQUEST, uuid.UUID(int=0)) for n in names))
    if start_topic is not None:
        names = [n for n in names if n >= start_topic]
    limit = max(1, min(int(request.response_partition_limit), MAX_REQUEST_PARTITION_SIZE_LIMIT))
    out: list[Any] = []
    denied: list[Any] = []
    next_cursor = None
    for name in names:
        allowed = ctx.permits(ResourceType.TOPIC, name)
        if not allowed:
            if not fetch_all:
                denied.append(_error_topic(m, name, errors.TOPIC_AUTHORIZATION_FAILED, uuid.UUID(int=0)))
            continue
        meta = reg.get(name)
        if meta is None:
            if not fetch_all:
                out.append(_error_topic(m, name, errors.UNKNOWN_TOPIC_OR_PARTITION, uuid.UUID(int=0),
                                        ctx.authorized_operations(ResourceType.TOPIC, name)))
            continue
        first = start_partition if name == start_topic else 0
        parts = [p for p in meta.partitions if p.index >= first]
        if limit <= 0:
            next_cursor = make(m.Cursor, topic_name=name, partition_index=first)
            break
        taken, rest = parts[:limit], parts[limit:]
        limit -= len(taken)
        out.append(make(m.DescribeTopicPartitionsResponseTopic, error_code=errors.NONE, name=name,
                        topic_id=meta.topic_id, is_internal=meta.is_internal,
                        partitions=tuple(_partition(m, p, live) for p in taken),
                        topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        if rest:
            next_cursor = make(m.Cursor, topic_name=name, partition_index=rest[0].index)
            break
    return make(m.DescribeTopicPartitionsResponse, throttle_time=0, topics=(*out, *denied), next_cursor=next_cursor)


_NOT_GIVEN = -2147483648  # TopicAuthorizedOperations' default: no operations given


def _error_topic(m: Any, name: str, code: int, topic_id: uuid.UUID, ops: int = _NOT_GIVEN) -> Any:
    return make(m.DescribeTopicPartitionsResponseTopic, error_code=code, name=name, topic_id=topic_id,
                is_internal=False, partitions=(), topic_authorized_operations=ops)


def _partition(m: Any, p: Any, live: set[int] | None) -> Any:
    up = live is None or p.leader in live
    return make(
        m.DescribeTopicPartitionsResponsePartition,
        error_code=errors.NONE if up else errors.LEADER_NOT_AVAILABLE,
        partition_index=p.index,
        leader_id=p.leader if up else -1,
        leader_epoch=p.leader_epoch,
        replica_nodes=tuple(p.replicas),
        isr_nodes=tuple(p.isr),
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=() if live is None else tuple(b for b in p.replicas if b not in live),
    )
