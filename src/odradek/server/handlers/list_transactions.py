"""ListTransactions (66, KIP-664; v1 adds the duration filter of KIP-994, v2 the transactional id
pattern of KIP-1152): the transactional ids this broker coordinates, filtered by state, producer id,
age and a regular expression (RE2 syntax, as Kafka's RE2/J; matching the whole id) on the id
(kafka-transactions.sh list). A pattern that is not a valid regular expression is answered
INVALID_REGULAR_EXPRESSION with no transactions."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasTxn, RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 2


class Needs(HasTxn, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    r = services(ctx).txn.coordinator.list_transactions(
        request.state_filters, [int(p) for p in request.producer_id_filters],
        int(getattr(request, "duration_filter", -1)), getattr(request, "transactional_id_pattern", None),
    )
    return make(
        m.ListTransactionsResponse, throttle_time=0, error_code=r.error_code,
        unknown_state_filters=tuple(r.unknown_state_filters),
        transaction_states=tuple(
            make(m.TransactionState, transactional_id=t.transactional_id, producer_id=t.producer_id,
                 transaction_state=t.state)
            for t in r.transactions
            # only the transactional ids the principal may DESCRIBE (Kafka's handleListTransactionsRequest)
            if ctx.permits(ResourceType.TRANSACTIONAL_ID, t.transactional_id)
        ),
    )
