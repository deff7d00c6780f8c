"""DescribeTransactions (65, KIP-664): the state of transactional ids this broker coordinates
(kafka-transactions.sh describe). A transactional id the principal may not DESCRIBE is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; of a described one, only the topics the principal may DESCRIBE
are listed (KafkaApis.handleDescribeTransactionsRequest), so the answer names no topic it could not
see otherwise."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasTxn, RequestContext

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 0


class Needs(HasTxn, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    states = []
    # DESCRIBE on each transactional id (Kafka's handleDescribeTransactionsRequest)
    allowed = [t for t in request.transactional_ids
               if ctx.permits(ResourceType.TRANSACTIONAL_ID, t)]
    for tid in request.transactional_ids:
        if tid not in allowed:
            states.append(make(
                m.TransactionState, error_code=errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid,
                transaction_state="", transaction_timeout=datetime.timedelta(0),
                transaction_start_time=datetime.datetime.fromtimestamp(-0.001, datetime.UTC),
                producer_id=-1, producer_epoch=-1, topics=(),
            ))
    for d in services(ctx).txn.coordinator.describe_transactions(allowed):
        states.append(make(
            m.TransactionState, error_code=d.error_code, transactional_id=d.transactional_id,
            transaction_state=d.state, transaction_timeout=datetime.timedelta(milliseconds=d.transaction_timeout_ms),
            transaction_start_time=datetime.datetime.fromtimestamp(d.transaction_start_time_ms / 1000, datetime.UTC),
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=tuple(make(m.TopicData, topic=t, partitions=tuple(ps)) for t, ps in d.topics.items()
                         if ctx.permits(ResourceType.TOPIC, t)),
        ))
    return make(m.DescribeTransactionsResponse, throttle_time=0, transaction_states=tuple(states))
