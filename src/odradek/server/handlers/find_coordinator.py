"""FindCoordinator (10): groups (key type 0) and transactional ids (key type 1); batched keys
v4+. Embedded: this broker coordinates every group and transactional id; cluster mode: the
leader of the key's __consumer_offsets / __transaction_state partition
(Utils.abs(javaHashCode(key)) % partitions) does."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller.zk_data import endpoint_for
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import (
    HasAdvertisedEndpoint,
    HasCluster,
    HasGroups,
    HasNodeId,
    HasTopics,
    HasTxn,
    RequestContext,
)

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 6

KEY_GROUP = 0
KEY_TRANSACTION = 1


class Needs(HasNodeId, HasTopics, HasCluster, HasGroups, HasTxn, HasAdvertisedEndpoint, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _lookup(ctx: Any, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port)."""
    svc = services(ctx)
    if key_type == KEY_GROUP:
        if not key:
            return errors.INVALID_REQUEST, "group id must not be empty", -1, "", -1
        if not ctx.permits(ResourceType.GROUP, key):
            return errors.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
        if not svc.groups.ensure_topic():
            return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        # the leader of the group's __consumer_offsets partition coordinates it
        return _leader_of(ctx, "__consumer_offsets", svc.groups.coordinator.partition_for(key))
    if key_type == KEY_TRANSACTION:
        if not key:
            return errors.INVALID_REQUEST, "transactional id must not be empty", -1, "", -1
        if not ctx.permits(ResourceType.TRANSACTIONAL_ID, key):
            return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, "", -1
        if not svc.txn.ensure_topic():
            return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
        return _leader_of(ctx, "__transaction_state", svc.txn.partition_for(key))
    return errors.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1


def _leader_of(ctx: Any, topic: str, partition: int) -> tuple[int, str | None, int, str, int]:
    """Embedded: this broker; cluster mode: the leader of the coordinator's partition."""
    svc = services(ctx)
    cluster = svc.cluster
    if cluster.embedded:
        host, port = svc.advertised_endpoint(ctx.listener)
        return errors.NONE, None, svc.node_id, host, port
    meta = svc.topics.get(topic)
    leader = meta.partitions[partition].leader if meta is not None and partition < len(meta.partitions) else -1
    node = cluster.live_brokers.get(leader)
    if node is None:
        return errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    host, port = endpoint_for(node, ctx.listener)
    return errors.NONE, None, leader, host, port


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    key_type = getattr(request, "key_type", KEY_GROUP)
    topic = "__transaction_state" if key_type == KEY_TRANSACTION else "__consumer_offsets"
    if key_type in (KEY_GROUP, KEY_TRANSACTION) and svc.topics.get(topic) is None:
        # first use: create the coordinator's topic and answer once its leaders are elected
        created = svc.txn.ensure_topic() if key_type == KEY_TRANSACTION else svc.groups.ensure_topic()
        if created:
            return _answer(ctx, request)
        cluster = svc.cluster

        def ready() -> bool:
            meta = svc.topics.get(topic)
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
