"""FindCoordinator (10): groups (key type 0); batched keys v4+. Embedded: this broker
coordinates every group; cluster mode: the leader of the group's __consumer_offsets
partition (Utils.abs(javaHashCode(group)) % partitions) does."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.cluster_access import endpoint_for
from odradek.server.request_context import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

KEY_GROUP = 0
KEY_TRANSACTION = 1


def _lookup(ctx: Any, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port)."""
    svc = ctx.services
    if key_type == KEY_GROUP:
        if not key:
            return errors.INVALID_REQUEST, "group id must not be empty", -1, "", -1
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return errors.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
        if not svc.groups.ensure_topic():
            return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        cluster = svc.cluster
        if not cluster.embedded:
            # the leader of the group's __consumer_offsets partition coordinates it
            meta = svc.topics.get("__consumer_offsets")
            p = svc.groups.coordinator.partition_for(key)
            leader = meta.partitions[p].leader if meta is not None and p < len(meta.partitions) else -1
            node = cluster.live_brokers.get(leader)
            if node is None:
                return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
            host, port = endpoint_for(node, ctx.listener)
            return errors.NONE, None, leader, host, port
        host, port = svc.advertised_endpoint(ctx.listener)
        return errors.NONE, None, svc.node_id, host, port
    if key_type == KEY_TRANSACTION:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
        return errors.COORDINATOR_NOT_AVAILABLE, "transactions are not supported by this broker yet", -1, "", -1
    return errors.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1


def handle(ctx: RequestContext, request: Any) -> Any:
    svc = ctx.services
    if getattr(request, "key_type", KEY_GROUP) == KEY_GROUP and svc.topics.get("__consumer_offsets") is None:
        # first use: create __consumer_offsets and answer once its leaders are elected
        if svc.groups.ensure_topic():
            return _answer(ctx, request)
        cluster = svc.cluster

        def ready() -> bool:
            meta = svc.topics.get("__consumer_offsets")
            return meta is not None and all(p.leader in cluster.live_brokers for p in meta.partitions)

        return cluster.wait_for_metadata(ready, 5000, lambda: _answer(ctx, request))
    return _answer(ctx, request)


def _answer(ctx: Any, request: Any) -> Any:
    m = ctx.response_module
    if ctx.api_version >= 4:
        out = []
        for key in request.coordinator_keys:
            code, msg, node, host, port = _lookup(ctx, key, request.key_type)
            out.append(make(m.Coordinator, key=key, node_id=node, host=host, port=port, error_code=code, error_message=msg))
        return make(m.FindCoordinatorResponse, throttle_time=0, coordinators=tuple(out))
    code, msg, node, host, port = _lookup(ctx, request.key, getattr(request, "key_type", KEY_GROUP))
    return make(
        m.FindCoordinatorResponse, throttle_time=0, error_code=code, error_message=msg, node_id=node, host=host, port=port
    )
