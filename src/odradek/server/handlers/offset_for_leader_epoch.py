"""OffsetForLeaderEpoch (23): the end offset of a leader epoch (KIP-101/279, KIP-320).

A follower (or a consumer validating its position) asks for the end offset of its
latest epoch; the answer is the start offset of the next larger epoch this leader
knows, or the log end offset for the current epoch. The caller truncates there.
"""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasReplicaManager, HasTopics, RequestContext

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MIN_VERSION = 2
MAX_VERSION = 4


class Needs(HasTopics, HasReplicaManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    topics_out = []
    for t in request.topics:
        meta = svc.topics.get(t.topic)
        # followers ask with CLUSTER_ACTION, clients with DESCRIBE on the topic
        describable = ctx.permits(ResourceType.TOPIC, t.topic) or ctx.permits(ResourceType.CLUSTER)
        parts = []
        for p in t.partitions:
            code, epoch, end = errors.NONE, -1, -1
            if not describable:
                code = errors.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition < len(meta.partitions):
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                rm = svc.replica_manager
                part = rm.leading(t.topic, p.partition)  # only the leader answers, at its own epoch
                cur = p.current_leader_epoch
                plog = rm.get_log(t.topic, p.partition) if part is not None else None
                if part is None or plog is None:
                    code = errors.NOT_LEADER_OR_FOLLOWER
                elif cur is not None and cur >= 0 and cur != part.leader_epoch:
                    code = errors.FENCED_LEADER_EPOCH if cur < part.leader_epoch else errors.UNKNOWN_LEADER_EPOCH
                else:
                    epoch, end = plog.leader_epoch_cache.end_offset_for(int(p.leader_epoch), plog.log_end_offset)
            parts.append(make(m.EpochEndOffset, error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics_out.append(make(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return make(m.OffsetForLeaderEpochResponse, throttle_time=0, topics=tuple(topics_out))
