"""ReadShareGroupStateSummary (87, KIP-932): a share-partition's start offset and epochs without its batches (v1:
KIP-1226's delivery complete count too) (coordinator.share.share_state.ShareCoordinatorShard.read_state_summary).
See _share_state_rpc."""

from __future__ import annotations

from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_state_rpc import serve
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    v1 = ctx.api_version >= 1
    return serve(
        ctx, request,
        lambda c, key, p, done: c.read_state_summary(key, done),
        lambda topics: make(m.ReadShareGroupStateSummaryResponse, results=tuple(
            make(m.ReadStateSummaryResult, topic_id=tid, partitions=tuple(
                make(m.PartitionResult, partition=p.partition, error_code=r.error_code, error_message=r.error_message,
                     state_epoch=r.state_epoch, leader_epoch=r.leader_epoch, start_offset=r.start_offset,
                     **({"delivery_complete_count": r.delivery_complete_count} if v1 else {}))
                for p, r in parts))
            for tid, parts in topics)),
    )
