"""Metadata (3): brokers, topics with ids, partitions; auto-creates topics when allowed."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from odradek.controller.topics import TopicError, validate_topic_name
from odradek.protocol import errors
from odradek.protocol.codec import make

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12

log = logging.getLogger("odradek.metadata")
_NO_OPS = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)


def _topic_response(m: Any, meta: Any, version: int, live: Any = None) -> Any:
    """``live``: the live broker ids in cluster mode (a partition whose leader is not
    among them has no leader: LEADER_NOT_AVAILABLE), None when embedded."""
    parts = tuple(
        make(
            m.MetadataResponsePartition,
            error_code=errors.NONE if live is None or p.leader in live else errors.LEADER_NOT_AVAILABLE,
            partition_index=p.index,
            leader_id=p.leader if live is None or p.leader in live else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.isr),
            offline_replicas=() if live is None else tuple(b for b in p.replicas if b not in live),
        )
        for p in meta.partitions
    )
    return make(
        m.MetadataResponseTopic,
        error_code=errors.NONE,
        name=meta.name,
        topic_id=meta.topic_id,
        is_internal=meta.is_internal,
        partitions=parts,
        topic_authorized_operations=_NO_OPS,
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


def handle(ctx: Any, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.api_version
    m = ctx.response_module
    reg = broker.topics
    requested = request.topics
    if version == 0 and requested is not None and len(requested) == 0:
        requested = None  # v0: empty list means all topics
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and broker.config.get(
        "auto.create.topics.enable"
    )
    out = []
    cluster = broker.cluster
    live = set(cluster.live_brokers) if cluster is not None else None
    if requested is None:
        out = [_topic_response(m, meta, version, live) for meta in reg.topics.values()]
    else:
        for t in requested:
            name = t.name
            if name is None:
                tid = getattr(t, "topic_id", None)
                meta = reg.by_id.get(tid) if tid is not None else None
                if meta is None:
                    # the name is non-nullable before v12: an unknown id is answered with ""
                    out.append(_error_topic(m, None if version >= 12 else "", errors.UNKNOWN_TOPIC_ID, tid))
                else:
                    out.append(_topic_response(m, meta, version, live))
                continue
            meta = reg.get(name)
            if meta is None:
                try:
                    validate_topic_name(name)
                except TopicError as e:
                    out.append(_error_topic(m, name, e.error_code))
                    continue
                if not allow_auto:
                    out.append(_error_topic(m, name, errors.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                try:
                    meta = broker.create_topic(name, -1, -1)
                    log.info("auto-created topic %s", name)
                    if cluster is not None:  # the controller has yet to elect its leaders
                        out.append(_error_topic(m, name, errors.LEADER_NOT_AVAILABLE))
                        continue
                except TopicError as e:
                    code = e.error_code
                    if code == errors.TOPIC_ALREADY_EXISTS:
                        meta = reg.get(name)
                    if meta is None:
                        out.append(_error_topic(m, name, code))
                        continue
            out.append(_topic_response(m, meta, version, live))
    if cluster is not None:
        brokers = tuple(
            make(m.MetadataResponseBroker, node_id=b, host=n["host"], port=n["port"], rack=n.get("rack"))
            for b, n in sorted(cluster.live_brokers.items())
        )
        controller_id = cluster.controller_id
    else:
        host, port = broker.advertised_endpoint(ctx.connection.listener)
        brokers = (make(m.MetadataResponseBroker, node_id=broker.node_id, host=host, port=port, rack=broker.rack),)
        controller_id = broker.node_id
    return make(
        m.MetadataResponse,
        throttle_time=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=controller_id,
        topics=tuple(out),
        cluster_authorized_operations=_NO_OPS,
        error_code=errors.NONE,
    )
