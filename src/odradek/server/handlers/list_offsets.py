"""ListOffsets (2): earliest, latest, max timestamp, and by timestamp (time index).

By timestamp, one stored batch's records may be read (inflated with a bound): a batch that
inflates past it or does not decode answers CORRUPT_MESSAGE for that partition, with a log line."""

from __future__ import annotations

import logging
from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.protocol.records import InvalidRecordError
from odradek.security.acl import ResourceType
from odradek.server.request_context import RequestContext

log = logging.getLogger("odradek.server")

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 10  # v11 adds earliest-pending-upload (-6, tiered storage)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


DEBUG_REPLICA = -2  # ListOffsets from a debugging tool may be answered by any replica


def handle(ctx: RequestContext, request: Any) -> Any:
    svc = ctx.services
    m = ctx.response_module
    rm = svc.replica_manager
    topics_out = []
    for t in request.topics:
        meta = svc.topics.get(t.name)
        describable = ctx.permits(ResourceType.TOPIC, t.name)
        parts_out = []
        for p in t.partitions:
            code = errors.NONE
            offset = -1
            ts = -1
            epoch = -1
            plog = None
            if not describable:
                code = errors.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < len(meta.partitions):
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = rm.leader_epoch(t.name, p.partition_index)
                cur = getattr(p, "current_leader_epoch", -1)
                if rm.leading(t.name, p.partition_index) is None and request.replica_id != DEBUG_REPLICA:
                    code = errors.NOT_LEADER_OR_FOLLOWER  # only the leader answers (or a debug request)
                elif cur is not None and cur >= 0 and cur != epoch:
                    code = errors.FENCED_LEADER_EPOCH if cur < epoch else errors.UNKNOWN_LEADER_EPOCH
                else:
                    plog = rm.get_log(t.name, p.partition_index)
                    if plog is None:
                        code = errors.NOT_LEADER_OR_FOLLOWER
            if plog is not None and code == errors.NONE:
                target = int(p.timestamp)
                isolation = int(getattr(request, "isolation_level", 0) or 0)
                if target == LATEST:
                    offset = plog.latest_offset(isolation)  # read_committed: the last stable offset
                elif target in (EARLIEST, EARLIEST_LOCAL):
                    offset = plog.log_start_offset
                elif target == LATEST_TIERED:
                    offset = -1
                else:
                    try:
                        found = plog.fetch_offset_by_timestamp(target)
                    except InvalidRecordError as e:  # a stored batch that does not inflate or decode
                        log.warning(
                            "ListOffsets by timestamp %d on %s-%d: %s", target, t.name, p.partition_index, e.message
                        )
                        code, found = errors.CORRUPT_MESSAGE, None
                    if found is not None:
                        offset, ts = found
                        if offset >= plog.latest_offset(isolation):
                            offset, ts = -1, -1
            parts_out.append(
                make(
                    m.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch if offset >= 0 else -1,
                    old_style_offsets=(offset,) if offset >= 0 else (),
                )
            )
        topics_out.append(make(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts_out)))
    return make(m.ListOffsetsResponse, throttle_time=0, topics=tuple(topics_out))
