"""DeleteRecords (21): moves the log start offset forward (offset -1 = high watermark)."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasReplicaManager, RequestContext

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2


class Needs(HasReplicaManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    out = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code = errors.NONE
            low = -1
            rm = svc.replica_manager
            plog = rm.get_log(t.name, p.partition_index)
            if not ctx.permits(ResourceType.TOPIC, t.name):
                code = errors.TOPIC_AUTHORIZATION_FAILED
            elif plog is None:
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif rm.leading(t.name, p.partition_index) is None:
                code = errors.NOT_LEADER_OR_FOLLOWER  # followers follow the leader's log start offset
            else:
                target = plog.high_watermark if p.offset == -1 else int(p.offset)
                if target < 0 or target > plog.high_watermark:
                    code = errors.OFFSET_OUT_OF_RANGE
                else:
                    plog.delete_records_before(target)
                    low = plog.log_start_offset
            parts.append(make(m.DeleteRecordsPartitionResult, partition_index=p.partition_index, low_watermark=low, error_code=code))
        out.append(make(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return make(m.DeleteRecordsResponse, throttle_time=0, topics=tuple(out))
