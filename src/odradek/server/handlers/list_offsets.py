"""ListOffsets (2): earliest, latest, max timestamp, and by timestamp (time index), as Kafka 4.4's
ReplicaManager.fetchOffset, Partition.fetchOffsetForTimestamp and UnifiedLog.fetchOffsetByTimestamp answer.

A negative timestamp is a spec, each allowed from a request version (Kafka's
ReplicaManager.isListOffsetsTimestampUnsupported; older versions, and unknown negative values, answer
UNSUPPORTED_VERSION for the partition): latest (-1) and earliest (-2) from v1, max timestamp (-3, KIP-734)
from v7, earliest local (-4, KIP-405) from v8, latest tiered (-5, KIP-1005) from v9, earliest pending upload
(-6, KIP-1023) from v11. On a tiered topic (KIP-405) earliest is the log start offset, in the remote tier;
earliest local the local log start offset; latest tiered the highest offset copied to the remote tier (-1,
leader epoch -1, before the first copy); earliest pending upload the offset after it (or the log start when
nothing was copied and nothing deleted locally; -1 when nothing was copied but local retention deleted some).
On a topic that is not tiered earliest local answers as earliest, latest tiered and earliest pending upload
-1. The leader epoch answered is the one Kafka's leader-epoch cache gives the offset (earliest: the first
epoch if it starts at or below the log start; latest: the partition's), the found batch's for a timestamp.

By timestamp on a tiered topic the lookup walks the remote segment metadata (the remote log manager's
``find_offset_by_timestamp``, Kafka's RemoteLogManager.findOffsetByTimestamp): a segment only in the remote
tier is read on a reader thread and the request waits for it in a purgatory (Kafka's DelayedRemoteListOffsets,
KIP-1075: the request's TimeoutMs from v10, else ``remote.list.offsets.request.timeout.ms``; the partition
answers REQUEST_TIMED_OUT past it); nothing found there: the local log from its local log start offset.

A found offset at or past the last fetchable offset (``Log.latest_offset`` of the request's FetchIsolation, made
once here: a consumer's high watermark, or last stable offset for read_committed; the log end for other
replicas and debugging tools) answers no offset (Kafka's lastFetchableOffset), for every
spec but earliest and earliest local. By timestamp, one stored batch's records may be read (inflated with a
bound): a batch that inflates past it or does not decode answers CORRUPT_MESSAGE for that partition, with a
log line."""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any, Protocol

from odradek.log.fetch_isolation import FetchIsolation
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.protocol.records import InvalidRecordError
from odradek.purgatory import future_of
from odradek.replication.delayed_remote_list_offsets import DelayedRemoteListOffsets
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasConfig, HasReplicaManager, HasTopics, RequestContext
from odradek.tiered.metadata_cache import RemoteMetadataNotReadyError
from odradek.tiered.plan import TimestampAndOffset
from odradek.tiered.storage import RemoteStorageError

if TYPE_CHECKING:
    from odradek.log.log import Log

log = logging.getLogger("odradek.server")

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 1
MAX_VERSION = 11  # v11: earliest pending upload (-6, KIP-1023)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

# the first request version allowing each spec (Kafka's ReplicaManager.timestampMinSupportedVersion)
SPEC_MIN_VERSION = {
    EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11,
}

DEBUG_REPLICA = -2  # ListOffsets from a debugging tool may be answered by any replica


class Needs(HasConfig, HasTopics, HasReplicaManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def spec_unsupported(timestamp: int, version: int) -> bool:
    """Kafka's ReplicaManager.isListOffsetsTimestampUnsupported."""
    return timestamp < 0 and (timestamp not in SPEC_MIN_VERSION or version < SPEC_MIN_VERSION[timestamp])


def _epoch_of(plog: Log, offset: int) -> int:
    """Kafka's LeaderEpochFileCache.epochForOffset (-1: none)."""
    return plog.leader_epoch_cache.epoch_for_offset(offset)


def _earliest(plog: Log) -> TimestampAndOffset:
    """Earliest: the log start offset, with the first cached epoch when it starts at or below it."""
    entries = plog.leader_epoch_cache.entries
    epoch = entries[0].epoch if entries and entries[0].start_offset <= plog.log_start_offset else -1
    return TimestampAndOffset(-1, plog.log_start_offset, epoch)


def special_offset(plog: Log, target: int) -> TimestampAndOffset | None:
    """Kafka 4.4's UnifiedLog.fetchOffsetByTimestamp for earliest, earliest local, latest tiered and earliest
    pending upload (None for other targets)."""
    tiered = plog.config.remote_storage_enable
    if target == EARLIEST or (target == EARLIEST_LOCAL and not tiered):
        return _earliest(plog)
    if target == EARLIEST_LOCAL:
        local = plog.local_log_start_offset
        return TimestampAndOffset(-1, local, _epoch_of(plog, local))
    if target == LATEST_TIERED:
        if not tiered:
            return TimestampAndOffset(-1, -1, -1)
        highest = plog.highest_offset_in_remote_storage
        return TimestampAndOffset(-1, highest, _epoch_of(plog, highest) if highest >= 0 else -1)
    if target == EARLIEST_PENDING_UPLOAD:  # Kafka's UnifiedLog.fetchEarliestPendingUploadOffset
        if not tiered:
            return TimestampAndOffset(-1, -1, -1)
        highest = plog.highest_offset_in_remote_storage
        if highest == -1:
            if plog.local_log_start_offset == plog.log_start_offset:
                return _earliest(plog)
            return TimestampAndOffset(-1, -1, -1)
        offset = max(highest + 1, plog.log_start_offset)
        return TimestampAndOffset(-1, offset, _epoch_of(plog, offset))
    return None


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    rm = svc.replica_manager
    version = ctx.api_version
    replica_id = int(request.replica_id)
    # a client's isolation level bounds what it may see; a replica's or a debugging tool's request, the log end
    isolation = FetchIsolation.for_list_offsets(replica_id, int(getattr(request, "isolation_level", 0) or 0))
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    answered: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            (duplicates if key in seen else seen).add(key)

    def answer(index: int, code: int, found: TimestampAndOffset | None = None) -> Any:
        offset = found.offset if found is not None else -1
        return make(
            m.ListOffsetsPartitionResponse,
            partition_index=index,
            error_code=code,
            timestamp=found.timestamp if found is not None else -1,
            offset=offset,
            leader_epoch=found.leader_epoch if found is not None and version >= 4 else -1,
            old_style_offsets=(offset,) if offset >= 0 else (),
        )

    def fetchable(found: TimestampAndOffset | None, last_fetchable: int) -> TimestampAndOffset | None:
        return found if found is None or found.offset < last_fetchable else None

    topics_out: list[tuple[str, list[Any]]] = []
    # (topic's entry, position in it, partition index, the lookup, the log, the last fetchable offset)
    remote: list[tuple[list[Any], int, int, concurrent.futures.Future[TimestampAndOffset | None], Log, int, int]] = []
    for t in request.topics:
        meta = svc.topics.get(t.name)
        describable = ctx.permits(ResourceType.TOPIC, t.name)
        parts_out: list[Any] = []
        topics_out.append((t.name, parts_out))
        for p in t.partitions:
            index = int(p.partition_index)
            target = int(p.timestamp)
            plog = None
            if not describable:
                parts_out.append(answer(index, errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            if (t.name, index) in duplicates:  # answered once (Kafka's response is a map by partition)
                if (t.name, index) in answered:
                    continue
                answered.add((t.name, index))
                parts_out.append(answer(index, errors.INVALID_REQUEST))
                continue
            if spec_unsupported(target, version):
                parts_out.append(answer(index, errors.UNSUPPORTED_VERSION))
                continue
            code = errors.NONE
            if meta is None or not 0 <= index < len(meta.partitions):
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = rm.leader_epoch(t.name, index)
                cur = getattr(p, "current_leader_epoch", -1)
                if rm.leading(t.name, index) is None and replica_id != DEBUG_REPLICA:
                    code = errors.NOT_LEADER_OR_FOLLOWER  # only the leader answers (or a debug request)
                elif cur is not None and cur >= 0 and cur != epoch:
                    code = errors.FENCED_LEADER_EPOCH if cur < epoch else errors.UNKNOWN_LEADER_EPOCH
                else:
                    plog = rm.get_log(t.name, index)
                    if plog is None:
                        code = errors.NOT_LEADER_OR_FOLLOWER
            if plog is None:
                parts_out.append(answer(index, code))
                continue
            last_fetchable = plog.latest_offset(isolation)  # Kafka's Partition.fetchOffsetForTimestamp
            if target == LATEST:
                parts_out.append(answer(index, errors.NONE, TimestampAndOffset(-1, last_fetchable, epoch)))
                continue
            found = special_offset(plog, target)
            if found is not None:
                if target not in (EARLIEST, EARLIEST_LOCAL):
                    found = fetchable(found, last_fetchable)
                parts_out.append(answer(index, errors.NONE, found))
                continue
            reader = rm.remote_reader
            if (target != MAX_TIMESTAMP and plog.config.remote_storage_enable and reader is not None
                    and plog.log_start_offset != plog.log_end_offset):
                # by timestamp on a tiered log: the remote tier first (Kafka's RemoteLogManager.asyncOffsetRead)
                lookup = reader.find_offset_by_timestamp(plog, target, plog.log_start_offset)
                remote.append((parts_out, len(parts_out), index, lookup, plog, last_fetchable, target))
                parts_out.append(None)  # answered once the lookup is done
                continue
            try:
                local = plog.offset_for_timestamp(target)
            except InvalidRecordError as e:  # a stored batch that does not inflate or decode
                log.warning("ListOffsets by timestamp %d on %s-%d: %s", target, t.name, index, e.message)
                parts_out.append(answer(index, errors.CORRUPT_MESSAGE))
                continue
            found = None if local is None else TimestampAndOffset(local[1], local[0], local[2])
            parts_out.append(answer(index, errors.NONE, fetchable(found, last_fetchable)))

    def build(_results: object = None) -> Any:
        return make(m.ListOffsetsResponse, throttle_time=0, topics=tuple(
            make(m.ListOffsetsTopicResponse, name=name, partitions=tuple(parts)) for name, parts in topics_out))

    if not remote:
        return build()

    def resolve(i: int, fut: concurrent.futures.Future[TimestampAndOffset | None] | None) -> None:
        """One remote lookup's answer (Kafka's DelayedRemoteListOffsets.tryComplete), on the loop."""
        parts, position, index, _lookup, plog, last_fetchable, target = remote[i]
        if plog.closed or rm.get_log(plog.topic, plog.partition) is not plog:  # deleted or moved meanwhile
            parts[position] = answer(index, errors.NOT_LEADER_OR_FOLLOWER)
        else:
            parts[position] = answer(index, *_remote_result(fut, plog, target, last_fetchable))

    wait = getattr(request, "timeout", None)  # v10+: TimeoutMs (a timedelta)
    timeout = int(wait.total_seconds() * 1000) if wait is not None else 0
    if timeout <= 0:
        timeout = int(svc.config.get("remote.list.offsets.request.timeout.ms"))
    op = DelayedRemoteListOffsets(timeout, [r[3] for r in remote], resolve)
    rm.delay_remote_list_offsets(op)
    return future_of(op, build)


def _remote_result(
    fut: concurrent.futures.Future[TimestampAndOffset | None] | None, plog: Log, target: int, last_fetchable: int,
) -> tuple[int, TimestampAndOffset | None]:
    """The error code and the answer of a lookup of ``target`` in the remote tier (Kafka's
    DelayedRemoteListOffsets and RemoteLogOffsetReader): nothing found there, the local log from its local log
    start offset; a store failure UNKNOWN_SERVER_ERROR (Kafka's mapping of a RemoteStorageException); metadata
    still being read REPLICA_NOT_AVAILABLE; the timeout, REQUEST_TIMED_OUT."""
    if fut is None:
        return errors.REQUEST_TIMED_OUT, None
    try:
        found = fut.result()
        if found is None:
            local = plog.offset_for_timestamp(target, plog.local_log_start_offset)
            found = None if local is None else TimestampAndOffset(local[1], local[0], local[2])
    except RemoteMetadataNotReadyError:
        return errors.REPLICA_NOT_AVAILABLE, None
    except InvalidRecordError as e:
        log.warning("ListOffsets by timestamp %d on %s: %s", target, plog.name, e.message)
        return errors.CORRUPT_MESSAGE, None
    except (RemoteStorageError, ValueError, OSError, concurrent.futures.CancelledError):
        return errors.UNKNOWN_SERVER_ERROR, None
    if found is not None and found.offset >= last_fetchable:
        found = None
    return errors.NONE, found
