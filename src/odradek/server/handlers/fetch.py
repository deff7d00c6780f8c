"""Fetch (1): zero-copy reads, long-poll until min_bytes or max_wait, fetch sessions.

The response is encoded by hand (protocol.fetch_response) so record data goes from
the segment files to the socket with sendfile. Incremental fetch sessions (KIP-227,
v7+) are kept in the broker's FetchSessionCache (server.fetch_session), whose
``new_context`` applies their epoch rules. The handler decodes the request, asks the
ReplicaManager to fetch (an answer now, or a DelayedFetch completed by the fetch purgatory)
and encodes what the session context says the response carries.

A fetch naming a replica id (``replica_id`` ≥ 0, or ReplicaState from v15) is a follower's:
it reads up to the log end offset and its offset moves the follower's state, the ISR and the
high watermark. As in KafkaApis.handleFetchRequest it needs CLUSTER_ACTION, which only the
inter-broker and control plane listeners hold (server.cluster_access); elsewhere every
partition is answered TOPIC_AUTHORIZATION_FAILED. A replica id the partition's assignment
does not name gets Partition.followerReplicaOrThrow's error (UNKNOWN_LEADER_EPOCH when the
request carries a leader epoch, else NOT_LEADER_OR_FOLLOWER) and changes nothing. A follower's
response counts its bytes of throttled partitions against the leader replication quota (KIP-73,
server.quota.replication; the ReplicaManager holds back followers outside the ISR over it).

A Fetch may name at most :data:`PARTITIONS_OVER_CLUSTER` more partition entries (fetched and
forgotten ones, duplicates included) than the cluster holds, and as many topic entries; a larger
one is refused before it is decoded (:func:`check_frame`: a log line and a closed connection).
Kafka sets no such bound, but serves each request on one of many handler threads; here every
request shares the event loop, and decoding and answering a million entries held it for 20-24 s
while every other client waited. No client that names partitions from its metadata gets near the
bound: every partition of the cluster may be fetched in one request, and 10,000 more besides
(deleted, or not yet known to this broker).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from odradek.log.fetch_isolation import FetchIsolation
from odradek.metrics.error_counts import add_error
from odradek.metrics.stats import BrokerTopicStats
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_request_scan import count_partitions, min_entry_bytes
from odradek.protocol.fetch_response import MAX_VERSION as _ENC_MAX
from odradek.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from odradek.purgatory import DelayedResponse
from odradek.replication.delayed_fetch import FetchParams, LogReadResult
from odradek.security.acl import ResourceType
from odradek.server.fetch_session import FINAL_EPOCH, CachedPartition
from odradek.server.handlers import HandlerResult, RawResponse
from odradek.server.request_context import (
    HasCluster,
    HasFetchMaxBytes,
    HasFetchSessions,
    HasNowMs,
    HasQuotas,
    HasReplicaManager,
    HasSecurity,
    HasTopics,
    RequestContext,
)

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = _ENC_MAX

Key = tuple[str, int]
log = logging.getLogger("odradek.cluster")
_UNKNOWN = frozenset({errors.UNKNOWN_TOPIC_OR_PARTITION, errors.UNKNOWN_TOPIC_ID})
# fetch errors Kafka's ReplicaManager.readFromLog does not count as FailedFetchRequests
_NOT_FAILED_FETCH = frozenset({
    errors.NOT_LEADER_OR_FOLLOWER, errors.OFFSET_OUT_OF_RANGE, errors.FENCED_LEADER_EPOCH,
    errors.UNKNOWN_LEADER_EPOCH, errors.KAFKA_STORAGE_ERROR, errors.TOPIC_AUTHORIZATION_FAILED,
})


PARTITIONS_OVER_CLUSTER = 10_000  # partition entries one Fetch may name beyond the cluster's partitions


class Needs(HasTopics, HasCluster, HasReplicaManager, HasFetchSessions, HasNowMs, HasQuotas, HasSecurity,
            HasFetchMaxBytes, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def check_frame(svc: HasTopics, version: int, frame: Any, offset: int) -> str | None:
    """Why a Fetch must be refused before it is decoded: more partition entries, or more topic
    entries, than the cluster holds partitions plus :data:`PARTITIONS_OVER_CLUSTER`. A body too short
    to name that many is let through on its length alone (at most 30-60 KB: an entry takes 3 to 6
    bytes at least); a longer one is counted on the wire, the count stopping once it passes the
    bound. The cluster's partitions (a sum over its topics) are only counted for a Fetch naming more
    than :data:`PARTITIONS_OVER_CLUSTER`."""
    body = len(frame) - offset
    if body <= PARTITIONS_OVER_CLUSTER * min_entry_bytes(version):
        return None
    if count_partitions(version, frame, offset, PARTITIONS_OVER_CLUSTER) <= PARTITIONS_OVER_CLUSTER:
        return None
    limit = svc.topics.partition_count() + PARTITIONS_OVER_CLUSTER
    if count_partitions(version, frame, offset, limit) <= limit:
        return None
    return (f"a Fetch naming more than {limit} partitions or topics (the cluster's "
            f"{limit - PARTITIONS_OVER_CLUSTER} partitions and {PARTITIONS_OVER_CLUSTER} more) in {body} bytes")


def _unknown_name(topic_id: Any) -> str:
    # placeholder name for a topic id this broker does not know (never a legal topic name)
    return f"<unknown {topic_id}>"


def _requested(version: int, request: Any, reg: Any) -> tuple[list[tuple[Key, CachedPartition]], list[Key]]:
    """The request's partitions, each once: a partition listed again replaces its earlier entry
    in that entry's place (Kafka's FetchRequest.fetchData builds a LinkedHashMap keyed by
    TopicIdPartition), so a request naming one partition many times reads it once. Then the
    forgotten partitions (v7+)."""
    parts: dict[Key, CachedPartition] = {}
    for ft in request.topics:
        if version >= 13:
            meta = reg.by_id.get(ft.topic_id) if ft.topic_id is not None else None
            name = meta.name if meta is not None else _unknown_name(ft.topic_id)
            tid = ft.topic_id
        else:
            meta = reg.get(ft.topic)
            name, tid = ft.topic, (meta.topic_id if meta is not None else None)
        for fp in ft.partitions:
            epoch = getattr(fp, "current_leader_epoch", -1)
            parts[(name, int(fp.partition))] = CachedPartition(
                int(fp.fetch_offset), int(fp.partition_max_bytes), -1 if epoch is None else int(epoch), tid
            )
    forgotten: list[Key] = []
    for ft in getattr(request, "forgotten_topics_data", ()) or ():
        if version >= 13:
            meta = reg.by_id.get(ft.topic_id) if ft.topic_id is not None else None
            name = meta.name if meta is not None else _unknown_name(ft.topic_id)
        else:
            name = ft.topic
        forgotten += [(name, int(p)) for p in ft.partitions]
    return list(parts.items()), forgotten


def _raw(version: int, topics: list[TopicResult], *, error_code: int = 0, throttle_time_ms: int = 0,
         session_id: int = 0) -> RawResponse:
    """The encoded response with its error counts (ErrorsPerSec): the top-level code and each partition's,
    as Kafka's FetchResponse.errorCounts."""
    parts, size = encode_fetch_response(version, topics, error_code=error_code, throttle_time_ms=throttle_time_ms,
                                        session_id=session_id)
    counts = {error_code: 1}
    for t in topics:
        for pr in t.partitions:
            add_error(counts, pr.error_code)
    return RawResponse(parts, size, counts)


def _refuse_follower(ctx: Any, version: int, requested: list[tuple[Key, CachedPartition]]) -> RawResponse:
    """A follower fetch from a connection without CLUSTER_ACTION (no session is created)."""
    log.warning(
        "refusing a follower fetch from %s on listener %s: TOPIC_AUTHORIZATION_FAILED", ctx.peer,
        ctx.listener,
    )
    topics: list[TopicResult] = []
    by_name: dict[str, TopicResult] = {}
    reg = services(ctx).topics
    for (name, p), cp in requested:
        tr = by_name.get(name)
        if tr is None:
            meta = reg.get(name)
            tr = by_name[name] = TopicResult(name, meta.topic_id if meta is not None else cp.topic_id)
            topics.append(tr)
        pr = PartitionResult(p)
        pr.error_code = errors.TOPIC_AUTHORIZATION_FAILED
        tr.partitions.append(pr)
    return _raw(version, topics)


def _fetch_throttle_ms(ctx: RequestContext, read_bytes: int) -> int:
    """consumer_byte_rate: record the bytes read; over the quota, take them back (the response
    will carry none), mute the connection and return the throttle time (KIP-219)."""
    svc = services(ctx)
    quota = svc.quotas.fetch
    now = svc.now_ms()
    user, client = ctx.quota_user, ctx.client_id or ""
    throttle = quota.record_and_get_throttle_time_ms(user, client, read_bytes, now)
    if throttle:
        quota.unrecord(user, client, read_bytes, now)
        ctx.throttle(throttle)
    return throttle


def _max_bytes(ctx: RequestContext, request: Any, replica_id: int) -> int:
    """The response's bound on record bytes (Kafka's KafkaApis.handleFetchRequest fetchMaxBytes):
    the request's max_bytes, at most the broker's fetch.max.bytes, and for a consumer with a
    consumer_byte_rate quota at most what it may take at once (Kafka's getMaxValueInQuotaWindow).
    ReplicaManager.read_from_log keeps the whole response within it but for one whole batch of the
    first partition with data."""
    svc = services(ctx)
    max_bytes = min(int(getattr(request, "max_bytes", 0x7FFFFFFF)), svc.fetch_max_bytes)
    quota = svc.quotas.fetch
    if quota.quotas and replica_id < 0:
        window = quota.max_value_in_window(ctx.quota_user, ctx.client_id or "")
        if window is not None:
            max_bytes = min(max_bytes, max(int(window), 1))
    return max_bytes


def _count(stats: BrokerTopicStats, read: LogReadResult, consumer: bool) -> None:
    """Kafka's BrokerTopicMetrics of a fetch, per partition: TotalFetchRequests, FailedFetchRequests
    (errors other than the ones clients recover from), BytesOut (consumers) or ReplicationBytesOut."""
    for (name, _p), _cp, pr in read.partitions:
        code = pr.error_code
        if code in _UNKNOWN:
            continue
        c = stats.topic(name)
        c.total_fetch += 1
        if code and code not in _NOT_FAILED_FETCH:
            c.failed_fetch += 1
        size = pr.records_size
        if size:
            if consumer:
                c.bytes_out += size
            else:
                c.replication_bytes_out += size


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    version = ctx.api_version
    svc = services(ctx)
    reg = svc.topics
    requested, forgotten = _requested(version, request, reg)
    replica_state = getattr(request, "replica_state", None)
    replica_id = int(replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1))
    max_bytes = _max_bytes(ctx, request, replica_id)
    params = FetchParams(  # positional: half the cost of keywords, per request
        replica_id,
        int(request.max_wait.total_seconds() * 1000),  # max_wait_ms
        min(max(int(request.min_bytes), 0), max_bytes),  # min_bytes, at most max_bytes (Kafka's fetchMinBytes)
        max_bytes,
        FetchIsolation.of(replica_id, getattr(request, "isolation_level", 0)),  # the level, converted once
        version >= 13,  # topic_ids
    )
    if params.replica_id >= 0 and (
        ctx.listener not in svc.cluster.cluster_listeners or not ctx.permits(ResourceType.CLUSTER)
    ):
        return _refuse_follower(ctx, version, requested)
    # partitions of topics the principal may not READ are answered TOPIC_AUTHORIZATION_FAILED and
    # kept out of the fetch session (Kafka's KafkaApis.handleFetchRequest erroneous partitions)
    denied: list[tuple[Key, CachedPartition]] = []
    if svc.security.authorizer is not None:
        readable: dict[str, bool] = {}
        for key, _cp in requested:
            if key[0] not in readable:
                readable[key[0]] = ctx.permits(ResourceType.TOPIC, key[0])
        if not all(readable.values()):
            denied = [(k, cp) for k, cp in requested if not readable[k[0]]]
            requested = [(k, cp) for k, cp in requested if readable[k[0]]]

    fetch_context = svc.fetch_sessions.new_context(
        version,
        int(getattr(request, "session_id", 0) or 0),
        int(getattr(request, "session_epoch", FINAL_EPOCH)),
        requested,
        forgotten,
        svc.now_ms(),
        params.replica_id >= 0,
    )
    if fetch_context.error_code:
        return _raw(version, [], error_code=fetch_context.error_code)

    consumer = params.replica_id < 0

    def respond(read: LogReadResult) -> RawResponse:
        _count(svc.replica_manager.topic_stats, read, consumer)
        if not consumer:
            svc.replica_manager.record_leader_replication(read)  # KIP-73 leader side
        elif svc.quotas.fetch.quotas:
            throttle = _fetch_throttle_ms(ctx, read.bytes)
            if throttle:  # Kafka's getThrottledResponse: nothing read is sent, the session stays as it was
                session_id = fetch_context.response_session_id if fetch_context.incremental else 0
                return _raw(version, [], throttle_time_ms=throttle, session_id=session_id)
        topics: list[TopicResult] = []
        by_name: dict[str, TopicResult] = {}
        for (name, _p), cp, pr in fetch_context.update_and_generate(read.partitions):
            tr = by_name.get(name)
            if tr is None:
                meta = reg.get(name)
                tr = by_name[name] = TopicResult(name, meta.topic_id if meta is not None else cp.topic_id)
                topics.append(tr)
            tr.partitions.append(pr)
        for (name, p), cp in denied:
            tr = by_name.get(name)
            if tr is None:
                tr = by_name[name] = TopicResult(name, cp.topic_id)
                topics.append(tr)
            pr = PartitionResult(p)
            pr.error_code = errors.TOPIC_AUTHORIZATION_FAILED
            tr.partitions.append(pr)
        return _raw(version, topics, session_id=fetch_context.response_session_id)

    result = svc.replica_manager.fetch(params, fetch_context.partitions)
    if isinstance(result, LogReadResult):
        return respond(result)
    return DelayedResponse(result, respond)
