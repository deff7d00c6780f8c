"""Fetch (1): zero-copy reads, long-poll until min_bytes or max_wait, fetch sessions.

The response is encoded by hand (protocol.fetch_response) so record data goes from
the segment files to the socket with sendfile. Incremental fetch sessions (KIP-227,
v7+) are kept in the broker's FetchSessionCache (server.fetch_session).

A fetch naming a replica id (``replica_id`` ≥ 0, or ReplicaState from v15) is a follower's:
it reads up to the log end offset and its offset moves the follower's state, the ISR and the
high watermark. As in KafkaApis.handleFetchRequest it needs CLUSTER_ACTION, which only the
inter-broker and control plane listeners hold (server.cluster_access); elsewhere every
partition is answered TOPIC_AUTHORIZATION_FAILED. A replica id the partition's assignment
does not name gets Partition.followerReplicaOrThrow's error (UNKNOWN_LEADER_EPOCH when the
request carries a leader epoch, else NOT_LEADER_OR_FOLLOWER) and changes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.protocol import errors
from odradek.protocol.fetch_response import MAX_VERSION as _ENC_MAX
from odradek.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from odradek.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    SessionError,
    apply_incremental,
    has_news,
)
from odradek.server.handlers import RawResponse
from odradek.server.request_context import RequestContext

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = _ENC_MAX

Key = tuple[str, int]
log = logging.getLogger("odradek.cluster")


def _unknown_name(topic_id: Any) -> str:
    # placeholder name for a topic id this broker does not know (never a legal topic name)
    return f"<unknown {topic_id}>"


def _requested(version: int, request: Any, reg: Any) -> tuple[list[tuple[Key, CachedPartition]], list[Key]]:
    parts: list[tuple[Key, CachedPartition]] = []
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
            parts.append(
                ((name, int(fp.partition)), CachedPartition(int(fp.fetch_offset), int(fp.partition_max_bytes),
                                                            -1 if epoch is None else int(epoch), tid))
            )
    forgotten: list[Key] = []
    for ft in getattr(request, "forgotten_topics_data", ()) or ():
        if version >= 13:
            meta = reg.by_id.get(ft.topic_id) if ft.topic_id is not None else None
            name = meta.name if meta is not None else _unknown_name(ft.topic_id)
        else:
            name = ft.topic
        forgotten += [(name, int(p)) for p in ft.partitions]
    return parts, forgotten


def _refuse_follower(ctx: Any, version: int, requested: list[tuple[Key, CachedPartition]]) -> RawResponse:
    """A follower fetch from a connection without CLUSTER_ACTION (no session is created)."""
    log.warning(
        "refusing a follower fetch from %s on listener %s: TOPIC_AUTHORIZATION_FAILED", ctx.peer,
        ctx.listener,
    )
    topics: list[TopicResult] = []
    by_name: dict[str, TopicResult] = {}
    for (name, p), cp in requested:
        tr = by_name.get(name)
        if tr is None:
            meta = ctx.services.topics.get(name)
            tr = by_name[name] = TopicResult(name, meta.topic_id if meta is not None else cp.topic_id)
            topics.append(tr)
        pr = PartitionResult(p)
        pr.error_code = errors.TOPIC_AUTHORIZATION_FAILED
        tr.partitions.append(pr)
    parts, size = encode_fetch_response(version, topics, session_id=0)
    return RawResponse(parts, size)


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    svc = ctx.services
    rm = svc.replica_manager
    reg = svc.topics
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    min_bytes = max(int(request.min_bytes), 0)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    read_committed = getattr(request, "isolation_level", 0) == 1
    requested, forgotten = _requested(version, request, reg)
    replica_state = getattr(request, "replica_state", None)
    replica_id = int(replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1))
    follower = replica_id >= 0
    if follower and ctx.listener not in svc.cluster.cluster_listeners:
        return _refuse_follower(ctx, version, requested)
    # a follower's fetch offset counts as its log end offset only for a partition whose
    # epoch check and read succeeded, and only on the request's first attempt
    record_follower = [follower]

    session: FetchSession | None = None
    incremental = False
    session_id = int(getattr(request, "session_id", 0) or 0)
    epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
    cache = svc.fetch_sessions
    now = svc.now_ms()
    if version >= 7:
        if epoch == FINAL_EPOCH:
            if session_id:
                cache.remove(session_id)
        elif epoch == INITIAL_EPOCH:
            if session_id:
                cache.remove(session_id)
            session = cache.create(requested, now)
        else:
            try:
                session = cache.get(session_id, epoch, now)
            except SessionError as e:
                parts, size = encode_fetch_response(version, [], error_code=e.error_code, session_id=0)
                return RawResponse(parts, size)
            apply_incremental(session, requested, forgotten)
            incremental = True
    entries: list[tuple[Key, CachedPartition]] = (
        list(session.partitions.items()) if incremental and session is not None else requested
    )
    response_session_id = session.session_id if session is not None else 0

    def read_all() -> tuple[list[tuple[Key, CachedPartition, PartitionResult]], int, bool]:
        remaining = max_bytes
        total = 0
        has_error = False
        out = []
        for (name, p), cp in entries:
            pr = PartitionResult(p)
            out.append(((name, p), cp, pr))
            meta = reg.get(name)
            if meta is None:
                pr.error_code = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
                has_error = True
                continue
            if not 0 <= p < len(meta.partitions):
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                has_error = True
                continue
            leader_epoch = rm.leader_epoch(name, p)
            if cp.current_leader_epoch >= 0 and cp.current_leader_epoch != leader_epoch:
                pr.error_code = (
                    errors.FENCED_LEADER_EPOCH if cp.current_leader_epoch < leader_epoch else errors.UNKNOWN_LEADER_EPOCH
                )
                has_error = True
                continue
            if follower:
                code = rm.follower_error(name, p, replica_id, cp.current_leader_epoch)
                if code is not None:
                    pr.error_code = code
                    has_error = True
                    continue
            limit = max(min(cp.max_bytes, remaining), 0)
            code, plog, data = rm.read(
                name, p, cp.fetch_offset, limit, read_committed, min_one_message=(total == 0),
                replica_id=replica_id if follower else -1,
            )
            pr.error_code = code
            if record_follower[0] and code == errors.NONE:
                rm.on_follower_fetch(name, p, replica_id, cp.fetch_offset, svc.now_ms())
            if plog is not None:
                pr.high_watermark = plog.high_watermark
                pr.last_stable_offset = plog.high_watermark
                pr.log_start_offset = plog.log_start_offset
            if read_committed:
                pr.aborted_transactions = ()
            if code != errors.NONE:
                has_error = True
                continue
            if data is not None and data.size:
                pr.records = data.regions
                pr.records_size = data.size
                total += data.size
                remaining -= data.size
        return out, total, has_error

    def respond(results: list[tuple[Key, CachedPartition, PartitionResult]]) -> RawResponse:
        topics: list[TopicResult] = []
        by_name: dict[str, TopicResult] = {}
        for (name, _p), cp, pr in results:
            news = has_news(cp, pr)  # also remembers what the client was told
            if incremental and not news:
                continue
            tr = by_name.get(name)
            if tr is None:
                meta = reg.get(name)
                tr = by_name[name] = TopicResult(name, meta.topic_id if meta is not None else cp.topic_id)
                topics.append(tr)
            tr.partitions.append(pr)
            if session is not None and pr.records_size:
                session.partitions.move_to_end((name, pr.partition))  # fairness across partitions
        parts, size = encode_fetch_response(version, topics, session_id=response_session_id)
        return RawResponse(parts, size)

    def attempt(force: bool) -> RawResponse | None:
        results, total, has_error = read_all()
        record_follower[0] = False
        if not force and total < min_bytes and not has_error:
            return None
        return respond(results)

    response = attempt(max_wait_ms <= 0)
    if response is not None:
        return response
    from odradek.server.replica_manager import DelayedFetch

    tps = [key for key, _ in entries if reg.get(key[0]) is not None]
    delayed = DelayedFetch(rm, tps, attempt, max_wait_ms)
    ctx.park(delayed.future, delayed.cancel)
    return delayed.future
