"""EndTxn (26): commit or abort the producer's transaction. The coordinator writes
PrepareCommit/PrepareAbort, answers, then writes the markers to every partition of the
transaction and CompleteCommit/CompleteAbort (KafkaApis.handleEndTxnRequest). v5 is
transaction.version 2 (KIP-890 part 2): the epoch is bumped and the response carries the
producer id and epoch to go on with; it is UNSUPPORTED_VERSION while the finalized
transaction.version is below 2 (server.txn_version)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.coordinator.transaction.coordinator import END_TXN, EndTxnResult, error_for_version
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasFeatures, HasTxn, RequestContext
from odradek.server.txn_version import TV_2, client_transaction_version, transaction_version

API_KEY = ApiKey.END_TXN
MIN_VERSION = 0
MAX_VERSION = 5  # v5 is transaction.version 2 (KIP-890 part 2: an epoch bump on every EndTxn)


class Needs(HasTxn, HasFeatures, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(r: EndTxnResult) -> None:
        if not fut.done():
            fut.set_result(make(m.EndTxnResponse, throttle_time=0,
                                error_code=error_for_version(r.error_code, END_TXN, ctx.api_version),
                                producer_id=r.producer_id, producer_epoch=r.producer_epoch))

    if not ctx.permits(ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        respond(EndTxnResult(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        return fut.result()
    tv = client_transaction_version(API_KEY, ctx.api_version)
    if tv >= TV_2 and transaction_version(services(ctx).features) < TV_2:
        respond(EndTxnResult(errors.UNSUPPORTED_VERSION))
        return fut.result()
    services(ctx).txn.coordinator.end_txn(request.transactional_id, int(request.producer_id),
                                         int(request.producer_epoch), bool(request.committed), respond, tv)
    return fut.result() if fut.done() else fut
