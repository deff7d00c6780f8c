"""WriteShareGroupState (85, KIP-932): the batches a share-partition changed, with its start offset (v1: and
KIP-1226's delivery complete count), appended as a ShareUpdate or ShareSnapshot
(coordinator.share.share_state.ShareCoordinatorShard.write_state). See _share_state_rpc."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.share_state import StateBatch, WriteStateRequest
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.handlers import HandlerResult
from odradek.server.handlers._share_state_rpc import serve
from odradek.server.request_context import RequestContext

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 1


def _write(c: Any, key: Any, p: Any, done: Any) -> None:
    batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
                    for b in p.state_batches)
    c.write_state(WriteStateRequest(key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), batches,
                                    int(getattr(p, "delivery_complete_count", -1))), done)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    return serve(
        ctx, request, _write,
        lambda topics: make(m.WriteShareGroupStateResponse, results=tuple(
            make(m.WriteStateResult, topic_id=tid, partitions=tuple(
                make(m.PartitionResult, partition=p.partition, error_code=r.error_code, error_message=r.error_message)
                for p, r in parts))
            for tid, parts in topics)),
    )
