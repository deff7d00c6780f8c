"""InitProducerId (22): producer ids for idempotent producers, and for transactional ones the
transaction coordinator's answer (KIP-98: epoch bump and fencing of the previous producer;
KIP-360 / KIP-588: a producer giving its current id and epoch resumes after an unknown
producer id or TRANSACTION_TIMED_OUT instead of being fenced)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from odradek.controller.store import StoreError
from odradek.coordinator.transaction.coordinator import (
    INIT_PRODUCER_ID,
    InitProducerIdResult,
    error_for_version,
)
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasProducerIds, HasSecurity, HasTxn, RequestContext

log = logging.getLogger("odradek.producer_ids")

API_KEY = ApiKey.INIT_PRODUCER_ID
MIN_VERSION = 0
MAX_VERSION = 5


class Needs(HasTxn, HasProducerIds, HasSecurity, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    if request.transactional_id is None and svc.security.acls is not None and not (
        ctx.permits(ResourceType.CLUSTER)
        or svc.security.authorize_by_resource_type(ctx.principal, ctx.client_host, AclOperation.WRITE,
                                                   ResourceType.TOPIC)
    ):  # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        return make(m.InitProducerIdResponse, throttle_time=0, error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                    producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        if not ctx.permits(ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return make(m.InitProducerIdResponse, throttle_time=0,
                        error_code=errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
        return _transactional(ctx, request)
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid is not None and pid >= 0 and epoch is not None and epoch >= 0 and epoch < 32766:
        # KIP-360: an idempotent producer may bump its own epoch to reset sequences
        return make(m.InitProducerIdResponse, throttle_time=0, error_code=errors.NONE, producer_id=pid, producer_epoch=epoch + 1)
    try:
        pid = svc.producer_ids.next_id()
    except StoreError as e:  # cluster mode, ZooKeeper unreachable: retriable
        log.warning("cannot allocate a producer id: %s", e)
        return make(m.InitProducerIdResponse, throttle_time=0, error_code=errors.COORDINATOR_NOT_AVAILABLE,
                    producer_id=-1, producer_epoch=-1)
    return make(m.InitProducerIdResponse, throttle_time=0, error_code=errors.NONE, producer_id=pid, producer_epoch=0)


def _transactional(ctx: RequestContext, request: Any) -> Any:
    m = ctx.response_module
    txn = services(ctx).txn
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(r: InitProducerIdResult) -> None:
        if fut.done():
            return
        fut.set_result(make(
            m.InitProducerIdResponse, throttle_time=0,
            error_code=error_for_version(r.error_code, INIT_PRODUCER_ID, ctx.api_version),
            producer_id=r.producer_id, producer_epoch=r.producer_epoch,
        ))

    if not txn.ensure_topic():
        respond(InitProducerIdResult(errors.COORDINATOR_NOT_AVAILABLE))
        return fut.result()
    timeout = request.transaction_timeout
    timeout_ms = int(timeout.total_seconds() * 1000) if hasattr(timeout, "total_seconds") else int(timeout)
    txn.coordinator.init_producer_id(
        request.transactional_id, timeout_ms,
        int(getattr(request, "producer_id", -1)), int(getattr(request, "producer_epoch", -1)), respond,
    )
    if fut.done():
        return fut.result()
    return fut
