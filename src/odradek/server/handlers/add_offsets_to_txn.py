"""AddOffsetsToTxn (25): the group's __consumer_offsets partition joins the producer's
transaction, before TxnOffsetCommit (KafkaApis.handleAddOffsetsToTxnRequest)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.coordinator.transaction.coordinator import ADD_OFFSETS_TO_TXN, error_for_version
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, HasTxn, RequestContext

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 4


class Needs(HasGroups, HasTxn, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(code: int) -> None:
        if not fut.done():
            fut.set_result(make(m.AddOffsetsToTxnResponse, throttle_time=0,
                                error_code=error_for_version(code, ADD_OFFSETS_TO_TXN, ctx.api_version)))

    if not ctx.permits(ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        respond(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not ctx.permits(ResourceType.GROUP, request.group_id):
        respond(errors.GROUP_AUTHORIZATION_FAILED)
    elif not request.group_id:
        respond(errors.INVALID_GROUP_ID)
    else:
        services(ctx).groups.ensure_topic()
        services(ctx).txn.coordinator.add_offsets(request.transactional_id, int(request.producer_id),
                                                 int(request.producer_epoch), request.group_id, respond)
    return fut.result() if fut.done() else fut
