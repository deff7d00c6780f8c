"""InitializeShareGroupState (83, KIP-932): a share-partition's state started at a start offset and state epoch
(coordinator.share.share_state.ShareCoordinatorShard.initialize_state). See _share_state_rpc."""

from __future__ import annotations

from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_state_rpc import serve
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    return serve(
        ctx, request,
        lambda c, key, p, done: c.initialize_state(key, int(p.state_epoch), int(p.start_offset), done),
        lambda topics: make(m.InitializeShareGroupStateResponse, results=tuple(
            make(m.InitializeStateResult, topic_id=tid, partitions=tuple(
                make(m.PartitionResult, partition=p.partition, error_code=r.error_code, error_message=r.error_message)
                for p, r in parts))
            for tid, parts in topics)),
    )
