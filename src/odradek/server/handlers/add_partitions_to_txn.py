"""AddPartitionsToTxn (24): partitions join a producer's transaction (the coordinator writes
the transaction as Ongoing with them). v0-3: one transaction, from producers; v4+: batched
transactions, from brokers, with VerifyOnly (KIP-890 part 1: a partition leader asks whether
the partitions are in the transaction before appending transactional data; nothing written).
v5 without VerifyOnly (KIP-890 part 2, transaction.version 2): a partition leader adds the
partition of a Produce v12 / TxnOffsetCommit v5 to the transaction itself; the transaction
takes client transaction version 2.

As Kafka's KafkaApis.handleAddPartitionToTxnRequest: with a partition of an unknown topic,
those answer UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, and nothing
is added. The coordinator's error applies to every partition of the transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from odradek.coordinator.transaction.coordinator import ADD_PARTITIONS_TO_TXN, error_for_version
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import error_code, make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, HasTopics, HasTxn, RequestContext
from odradek.server.txn_version import client_transaction_version

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 5

TopicPartition = tuple[str, int]


class Needs(HasTopics, HasCluster, HasTxn, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _topic_results(m: Any, codes: dict[TopicPartition, int]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            make(m.AddPartitionsToTxnPartitionResult, partition_index=p, partition_error_code=error_code(code)))
    return tuple(make(m.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(ps))
                 for t, ps in by_topic.items())


def _one(ctx: RequestContext, tid: str, pid: int, epoch: int, parts: list[TopicPartition], verify_only: bool,
         done: Callable[[dict[TopicPartition, int]], None]) -> None:
    txn = services(ctx).txn
    topics = services(ctx).topics
    if not verify_only and ctx.api_version < 4 and not ctx.permits(ResourceType.TRANSACTIONAL_ID, tid):
        done(dict.fromkeys(parts, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        return
    unwritable = {tp for tp in parts if not ctx.permits(ResourceType.TOPIC, tp[0])}
    if unwritable:
        done({tp: errors.TOPIC_AUTHORIZATION_FAILED if tp in unwritable else errors.OPERATION_NOT_ATTEMPTED
              for tp in parts})
        return
    unknown = [tp for tp in parts if (meta := topics.get(tp[0])) is None or not 0 <= tp[1] < len(meta.partitions)]
    if unknown:
        done({tp: errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else errors.OPERATION_NOT_ATTEMPTED
              for tp in parts})
        return
    if verify_only:
        done(txn.coordinator.verify_partitions(tid, pid, epoch, parts))
        return

    def respond(code: int) -> None:
        code = error_for_version(code, ADD_PARTITIONS_TO_TXN, ctx.api_version)
        done(dict.fromkeys(parts, code))

    txn.coordinator.add_partitions(tid, pid, epoch, parts, respond,
                                   client_transaction_version(API_KEY, ctx.api_version))


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    if ctx.api_version < 4:
        parts = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]

        def done_v3(codes: dict[TopicPartition, int]) -> None:
            if not fut.done():
                fut.set_result(make(m.AddPartitionsToTxnResponse, throttle_time=0,
                                    results_by_topic_v3_and_below=_topic_results(m, codes)))

        _one(ctx, request.v3_and_below_transactional_id, int(request.v3_and_below_producer_id),
             int(request.v3_and_below_producer_epoch), parts, False, done_v3)
        return fut.result() if fut.done() else fut
    txns = list(request.transactions)
    if ctx.listener not in services(ctx).cluster.cluster_listeners or not ctx.permits(ResourceType.CLUSTER):
        # v4+ is sent by brokers (CLUSTER_ACTION, KafkaApis.handleAddPartitionsToTxnRequest)
        return make(m.AddPartitionsToTxnResponse, throttle_time=0, error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                    results_by_transaction=())
    results: list[Any] = [None] * len(txns)
    left = [len(txns)]

    def finish() -> None:
        if not fut.done():
            fut.set_result(make(m.AddPartitionsToTxnResponse, throttle_time=0, error_code=errors.NONE,
                                results_by_transaction=tuple(results)))

    for i, t in enumerate(txns):
        def done(codes: dict[TopicPartition, int], i: int = i, tid: str = t.transactional_id) -> None:
            if results[i] is not None:
                return
            results[i] = make(m.AddPartitionsToTxnResult, transactional_id=tid, topic_results=_topic_results(m, codes))
            left[0] -= 1
            if left[0] == 0:
                finish()

        parts = [(tp.name, int(p)) for tp in t.topics for p in tp.partitions]
        _one(ctx, t.transactional_id, int(t.producer_id), int(t.producer_epoch), parts, bool(t.verify_only), done)
    if not txns:
        finish()
    return fut.result() if fut.done() else fut
