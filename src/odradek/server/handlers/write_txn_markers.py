"""WriteTxnMarkers (27): a transaction coordinator asks this broker, as leader, to append the
COMMIT/ABORT marker of a producer's transaction to partitions (coordinator.txn_markers), answered
once the markers are replicated (KafkaApis.handleWriteTxnMarkersRequest). Versions 1-2 (Kafka
4 dropped v0). The principal needs CLUSTER_ACTION on the cluster (Kafka's rule; always granted
without an authorizer). On top of that, a COMMIT marker is accepted only on the inter-broker or
control plane listener; an ABORT marker on any listener, which is how kafka-transactions.sh abort
ends a hanging transaction (server.cluster_access.may_write_txn_marker). Refused markers get
CLUSTER_AUTHORIZATION_FAILED on every partition."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from odradek.coordinator.txn_markers import write_markers
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.cluster_access import may_write_txn_marker
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import (
    HasCluster,
    HasGroups,
    HasLogManager,
    HasNowMs,
    HasReplicaManager,
    HasTopics,
    RequestContext,
)

log = logging.getLogger("odradek.txn")

API_KEY = ApiKey.WRITE_TXN_MARKERS
MIN_VERSION = 1
MAX_VERSION = 2

TIMEOUT_MS = 30000

TopicPartition = tuple[str, int]


class Needs(HasTopics, HasCluster, HasReplicaManager, HasLogManager, HasGroups, HasNowMs, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    rm = svc.replica_manager
    per_marker: list[tuple[int, dict[TopicPartition, int]]] = []
    required: dict[TopicPartition, int] = {}
    cluster = svc.cluster.cluster_listeners
    authorized = ctx.permits(ResourceType.CLUSTER)  # always true without an authorizer
    for mk in request.markers:
        parts = [(t.name, int(p)) for t in mk.topics for p in t.partition_indexes]
        commit = bool(mk.transaction_result)
        if not (authorized and may_write_txn_marker(ctx.listener, cluster, commit)):
            log.warning("refusing a%s marker of producer %d from %s (%s) on listener %s: CLUSTER_AUTHORIZATION_FAILED",
                        " COMMIT" if commit else "n ABORT", int(mk.producer_id), ctx.peer, ctx.principal, ctx.listener)
            per_marker.append((int(mk.producer_id), dict.fromkeys(parts, errors.CLUSTER_AUTHORIZATION_FAILED)))
            continue
        if ctx.listener not in cluster:
            log.warning("ABORT marker of producer %d epoch %d (coordinator epoch %d) on %s requested by %s on "
                        "listener %s (an admin abort)", int(mk.producer_id), int(mk.producer_epoch),
                        int(mk.coordinator_epoch), ", ".join(f"{t}-{p}" for t, p in parts), ctx.peer, ctx.listener)
        codes, req = write_markers(rm, svc.log_manager, svc.topics, int(mk.producer_id), int(mk.producer_epoch),
                                   int(mk.coordinator_epoch), bool(mk.transaction_result), parts, svc.now_ms(),
                                   svc.groups.complete_txn)
        per_marker.append((int(mk.producer_id), codes))
        for tp, end in req.items():
            required[tp] = max(required.get(tp, 0), end)

    def build(replicated: dict[TopicPartition, int]) -> Any:
        markers = []
        for pid, codes in per_marker:
            by_topic: dict[str, list[Any]] = {}
            for (topic, p), code in codes.items():
                if code == errors.NONE:
                    code = replicated.get((topic, p), errors.NONE)
                by_topic.setdefault(topic, []).append(
                    make(m.WritableTxnMarkerPartitionResult, partition_index=p, error_code=code))
            markers.append(make(m.WritableTxnMarkerResult, producer_id=pid, topics=tuple(
                make(m.WritableTxnMarkerTopicResult, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
        return make(m.WriteTxnMarkersResponse, markers=tuple(markers))

    if not required:
        return build({})
    outcome = rm.wait_for_replication(required, TIMEOUT_MS)
    if isinstance(outcome, dict):
        return build(outcome)
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def done(response: dict[TopicPartition, int] | None, error: BaseException | None) -> None:
        if not fut.done():
            fut.set_result(build(response if response is not None and error is None
                                 else dict.fromkeys(required, errors.REQUEST_TIMED_OUT)))

    outcome.then(done)
    ctx.park(fut, outcome.cancel)
    return fut
