"""Metadata (3): brokers, topics with ids (by id from v12), partitions from the metadata cache the
controller keeps; auto-creates topics when allowed (the answer waits briefly for the
controller to elect their leaders)."""

from __future__ import annotations

import logging
import uuid
from typing import Any, Protocol

from odradek.controller.partition_limits import MAX_PARTITIONS_PER_REQUEST
from odradek.controller.topics import TopicError, validate_topic_name
from odradek.controller.zk_data import live_broker_endpoints
from odradek.protocol import codec, errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import (
    HasAdmin,
    HasAdvertisedEndpoint,
    HasCluster,
    HasClusterId,
    HasConfig,
    HasNodeId,
    HasRack,
    HasTopics,
    RequestContext,
)
from odradek.server.turns import in_turns

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 13  # v13: the top-level error code (KIP-1102), 0 here as on Kafka, whose brokers set it only in an
# error response built for a failed request (MetadataRequest.getErrorResponse); Odradek closes such a connection

log = logging.getLogger("odradek.metadata")
_NO_OPS = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)


# (response module, partition index, leader, leader epoch, replicas, isr, leader live, offline) -> the
# partition's response entity. kio entities are immutable, so one serves every response that describes the
# partition the same way; building them was most of a Metadata answer for a topic of 10,000 partitions
# (librdkafka asks again at each producer start and metadata refresh)
_PARTITION_CACHE: dict[tuple[Any, ...], Any] = {}
_PARTITION_CACHE_MAX = 200_000
# an answer equal to a recent one is sent as the same bytes (encoding 10,000 partitions is ~130 ms)
codec.memoize_encoding("MetadataResponse")


class Needs(HasNodeId, HasClusterId, HasRack, HasConfig, HasTopics, HasCluster, HasAdmin, HasAdvertisedEndpoint, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _partition_response(m: Any, p: Any, live: Any) -> Any:
    replicas = tuple(p.replicas)
    isr = tuple(p.isr)
    up = live is None or p.leader in live
    offline = () if live is None else tuple(b for b in replicas if b not in live)
    key = (m, p.index, p.leader, p.leader_epoch, replicas, isr, up, offline)
    entity = _PARTITION_CACHE.get(key)
    if entity is None:
        if len(_PARTITION_CACHE) >= _PARTITION_CACHE_MAX:
            _PARTITION_CACHE.clear()
        entity = _PARTITION_CACHE[key] = make(
            m.MetadataResponsePartition,
            error_code=errors.NONE if up else errors.LEADER_NOT_AVAILABLE,
            partition_index=p.index,
            leader_id=p.leader if up else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=replicas,
            isr_nodes=isr,
            offline_replicas=offline,
        )
    return entity


def _topic_response(m: Any, meta: Any, version: int, live: Any, ops: int = _NO_OPS) -> Any:
    """``live``: the live broker ids (a partition whose leader is not among them has no
    leader: LEADER_NOT_AVAILABLE)."""
    parts = tuple(_partition_response(m, p, live) for p in meta.partitions)
    return make(
        m.MetadataResponseTopic,
        error_code=errors.NONE,
        name=meta.name,
        topic_id=meta.topic_id,
        is_internal=meta.is_internal,
        partitions=parts,
        topic_authorized_operations=ops,
    )


def _error_topic(m: Any, name: str | None, code: int, topic_id: Any = None) -> Any:
    return make(
        m.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id or _ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=_NO_OPS,
    )


AUTO_CREATE_WAIT_MS = 2000  # how long a Metadata request waits for topics it auto-created to get leaders


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    version = ctx.api_version
    requested = request.topics
    if version == 0 and requested is not None and len(requested) == 0:
        requested = None  # v0: empty list means all topics
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and svc.config.get(
        "auto.create.topics.enable"
    )
    created: list[str] = []
    planned: dict[str, int] = {}  # partitions of each topic created
    to_create: list[str] = []
    if requested is not None and allow_auto:
        reg = svc.topics
        # one Metadata request creates at most what one CreateTopics may (Kafka forwards its
        # automatic creations as one CreateTopics): the names past that are answered unknown
        budget = MAX_PARTITIONS_PER_REQUEST
        per_topic = max(int(svc.config.get("num.partitions")), 1)
        for t in requested:
            if t.name is None or reg.get(t.name) is not None or t.name in planned or not _may_create(ctx, t.name):
                continue
            if per_topic > budget:
                log.info("not auto-creating topic %s: this request already creates %d partitions", t.name,
                         MAX_PARTITIONS_PER_REQUEST - budget)
                break
            budget -= per_topic
            planned[t.name] = per_topic
            to_create.append(t.name)

    def create(name: str) -> None:
        try:
            validate_topic_name(name)
            planned[name] = len(svc.admin.create_topic(name, -1, -1).partitions)
            log.info("auto-created topic %s", name)
            created.append(name)
        except TopicError:
            pass  # answered below (invalid name, already being created, store unavailable)

    def finish() -> Any:
        if not created:
            return _respond(ctx, requested, allow_auto, request)
        # the controller elects the new topics' leaders: answer once this broker knows them (or
        # with LEADER_NOT_AVAILABLE for those still without, as Kafka does)
        cluster = svc.cluster

        def ready() -> bool:
            live = cluster.live_brokers
            # a large topic reaches the metadata cache in batches (the controller's NEW_PARTITION_BATCH)
            return all((m := svc.topics.get(n)) is not None and len(m.partitions) >= planned[n]
                       and all(p.leader in live for p in m.partitions) for n in created)

        return cluster.wait_for_metadata(ready, AUTO_CREATE_WAIT_MS,
                                         lambda: _respond(ctx, requested, allow_auto, request))

    return in_turns(to_create, lambda _, name: create(name), finish)  # each creation writes the metadata store


def _may_describe(ctx: RequestContext, name: str) -> bool:
    return ctx.permits(ResourceType.TOPIC, name)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (Kafka's KafkaApis.handleTopicMetadataRequest)."""
    return _may_describe(ctx, name) and (
        ctx.permits_also(ResourceType.CLUSTER) or ctx.permits_also(ResourceType.TOPIC, name)
    )


def _respond(ctx: Any, requested: Any, allow_auto: bool, request: Any) -> Any:
    svc = services(ctx)
    version = ctx.api_version
    m = ctx.response_module
    reg = svc.topics
    cluster = svc.cluster
    live = set(cluster.live_brokers)
    out = []
    # KIP-430: the operations the principal may do on each topic, when the client asks
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    def topic_ops(name: str) -> int:
        return ctx.authorized_operations(ResourceType.TOPIC, name) if include_ops else _NO_OPS

    if requested is None:
        # all topics: those the principal may not DESCRIBE are left out
        out = [_topic_response(m, meta, version, live, topic_ops(meta.name))
               for meta in reg.topics.values() if _may_describe(ctx, meta.name)]
    else:
        for t in requested:
            name = t.name
            tid = getattr(t, "topic_id", None)
            # a topic with an id is looked up by its id, whatever its name says: the Java client sends "" with
            # it (KafkaApis.handleTopicMetadataRequest uses the ids when any is non-zero)
            if name is None or (tid is not None and tid != _ZERO_UUID):
                meta = reg.by_id.get(tid) if tid is not None else None
                if meta is None or not _may_describe(ctx, meta.name):
                    # the name is non-nullable before v12: an unknown id is answered with ""
                    out.append(_error_topic(m, None if version >= 12 else "", errors.UNKNOWN_TOPIC_ID, tid))
                else:
                    out.append(_topic_response(m, meta, version, live, topic_ops(meta.name)))
                continue
            if not _may_describe(ctx, name):  # whether it exists is not told
                out.append(_error_topic(m, name, errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            meta = reg.get(name)
            if meta is None:
                try:
                    validate_topic_name(name)
                except TopicError as e:
                    out.append(_error_topic(m, name, e.error_code))
                    continue
                # being created (the controller has yet to elect leaders), or not allowed to be
                creatable = allow_auto and _may_create(ctx, name)
                code = errors.LEADER_NOT_AVAILABLE if creatable else errors.UNKNOWN_TOPIC_OR_PARTITION
                out.append(_error_topic(m, name, code))
                continue
            out.append(_topic_response(m, meta, version, live, topic_ops(name)))
    if cluster.embedded:
        # one broker: its endpoint on the listener this client came in through
        host, port = svc.advertised_endpoint(ctx.listener)
        brokers = (make(m.MetadataResponseBroker, node_id=svc.node_id, host=host, port=port, rack=svc.rack),)
    else:
        # each broker's address on the listener this client came in through (Kafka's MetadataCache)
        brokers = tuple(make(m.MetadataResponseBroker, node_id=b, host=h, port=p, rack=r)
                        for b, h, p, r in live_broker_endpoints(cluster.live_brokers, ctx.listener))
    return make(
        m.MetadataResponse,
        throttle_time=0,
        brokers=brokers,
        cluster_id=svc.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(out),
        cluster_authorized_operations=(ctx.cluster_authorized_operations()
                                       if getattr(request, "include_cluster_authorized_operations", False)
                                       else _NO_OPS),
        error_code=errors.NONE,
    )
