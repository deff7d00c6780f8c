"""ReadShareGroupState (84, KIP-932): a share-partition's start offset, state epoch and state batches; a newer
leader epoch is recorded (coordinator.share.share_state.ShareCoordinatorShard.read_state). See _share_state_rpc."""

from __future__ import annotations

from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_state_rpc import serve
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    return serve(
        ctx, request,
        lambda c, key, p, done: c.read_state(key, int(p.leader_epoch), done),
        lambda topics: make(m.ReadShareGroupStateResponse, results=tuple(
            make(m.ReadStateResult, topic_id=tid, partitions=tuple(
                make(m.PartitionResult, partition=p.partition, error_code=r.error_code, error_message=r.error_message,
                     state_epoch=r.state_epoch, start_offset=r.start_offset, state_batches=tuple(
                         make(m.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                              delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                         for b in r.state_batches))
                for p, r in parts))
            for tid, parts in topics)),
    )
