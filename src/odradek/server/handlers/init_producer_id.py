"""InitProducerId (22): producer ids for idempotent producers (no transactions yet)."""

from __future__ import annotations

import logging
from typing import Any

from odradek.controller.store import StoreError
from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.request_context import RequestContext

log = logging.getLogger("odradek.producer_ids")

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    svc = ctx.services
    m = ctx.response_module
    if request.transactional_id is None and svc.security.acls is not None and not (
        ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE)
        or svc.security.authorize_by_resource_type(ctx.principal, ctx.client_host, AclOperation.WRITE,
                                                   ResourceType.TOPIC)
    ):  # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        return make(m.InitProducerIdResponse, throttle_time=0, error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                    producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        return make(
            m.InitProducerIdResponse,
            throttle_time=0,
            error_code=errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
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
