"""The broker's remote log manager (Kafka's RemoteLogManager, KIP-405): it tiers the partitions this broker
leads whose topic sets ``remote.storage.enable`` (with ``remote.log.storage.system.enable`` on the broker).

Every ``remote.log.manager.task.interval.ms`` (:meth:`RemoteLogManager.tick`, on the event loop), for each
such partition it leads:

1. **Metadata** (Kafka's TopicBasedRemoteLogMetadataManager): the remote segments of a partition are the
   records of its partition of the internal ``__remote_log_metadata`` topic (``metadata_partition``:
   Kafka's partitioner; created with ``rlmm.config.remote.log.metadata.topic.*``: 50 partitions, delete
   policy, retention.ms -1). The first time, the partition's records are replayed from the local replica of
   that metadata partition into the metadata cache (``RemotePartitionMetadataStore``), and the log learns
   the highest offset copied (a restart, or a new leader). Records this broker writes go through the
   replica manager's internal append path (``append_internal``, as the coordinators write theirs) and into
   the cache at once, as Kafka's manager waits for its consumer to read its own write.
2. **Copy** (Kafka's RLMCopyTask): the next closed segment past the highest offset copied whose records are
   all below the last stable offset (``tiered.plan.copy_candidates``; never the active segment): a
   COPY_SEGMENT_STARTED record, then the copy through the RemoteStorageManager on a worker thread, with what
   Kafka's LogSegmentData carries (the ``.log``, offset, time and transaction indexes, the producer
   snapshot at the segment's end and the leader epochs up to its end in the checkpoint format), then a
   COPY_SEGMENT_FINISHED record, and the log's ``highest_offset_in_remote_storage`` moves to its end, which
   lets local retention (``local.retention.*``, ``Log.delete_old_segments``) delete it locally. A finished
   copy starts the next one at once. A failed copy is logged and retried at the next tick with a new
   segment id (its STARTED record stays, unreadable, as in Kafka).
3. **Remote retention** (Kafka's RLMExpirationTask): ``retention.ms`` / ``retention.bytes`` over the whole
   log, and the log start offset (``tiered.plan.remote_retention``): DELETE_SEGMENT_STARTED records, the log
   start offset moved past them (``Log.advance_log_start_offset``), the deletions on a worker thread, then
   DELETE_SEGMENT_FINISHED records.

Reads below the local log start offset (:meth:`RemoteLogManager.read_async`, from the replica manager's
fetch, Kafka's RemoteLogReader): the remote segment holding the offset is looked up on the loop; its offset
index (kept in a small cache) and a ranged fetch of the ``.log`` from the indexed position run on a reader
thread (``tiered.plan.read_batches``: whole batches up to the partition's byte limit); the fetch waits for it
in the purgatory (``replication.delayed_remote_fetch``). read_committed reads get the aborted transactions
from the transaction indexes of that remote segment and the later remote ones, then the local ones.

Every broker hosting a tiered partition, leader or follower, reads its metadata partition's records from its
own replica of it, or with Fetch requests to its leader where it holds none (:meth:`RemoteLogManager.tick`),
so followers know the highest offset copied (local retention) and a new leader copies on from there; records are appended where this broker leads the metadata
partition, else produced to its leader (acks=all). A follower below the leader's local log start builds its
state from the remote tier (:meth:`RemoteLogManager.build_remote_log_aux_state`, Kafka's TierStateMachine). A
deleted topic's leader deletes its remote segments (:meth:`RemoteLogManager.delete_remote_log_partition`), as
does the leader of a topic whose remote.storage.enable is turned off with remote.log.delete.on.disable (KIP-950;
the broker calls it), once a copy or deletion of the partition in flight is done.

ListOffsets by timestamp on a tiered log (:meth:`RemoteLogManager.find_offset_by_timestamp`, Kafka's
findOffsetByTimestamp) walks the remote segment metadata by leader epoch and reads the first fitting remote-only
segment's time index, offset index and batches on a reader thread.

Metrics (Kafka's RemoteStorageMetrics, KIP-963) go to the replica manager's BrokerTopicStats: copies, deletions and the
request count of remote reads on the loop, a remote read's bytes and errors on its reader thread in that thread's own
counters; the per-partition gauges (copy lag, remote size, delete lag) at each task and after each copy and deletion,
for the partitions this broker leads (docs/metrics.md).

Quotas (KIP-956, ``server.quota.remote_log``): before each segment copy the copy quota
(``remote.log.manager.copy.max.bytes.per.second``) is checked; while it is exceeded the copy waits (checked again
after the throttle time, at most a second, and at each task; other partitions' retention goes on), then the
segment's ``.log`` size is recorded and the copy starts, as Kafka's RLMCopyTask does. A consumer fetch below the
local log start is not sent to the remote tier while the fetch quota (``remote.log.manager.fetch.max.bytes.per.second``)
is exceeded (:meth:`RemoteLogManager.fetch_throttle_time_ms`, asked by the replica manager): that partition is
answered with no records and no error; a remote read's bytes count when it ends. Each throttle seen goes to
``remote-copy-throttle-time`` / ``remote-fetch-throttle-time`` (avg and max, Kafka's RLMQuotaMetrics).
``remote.log.copy.disable`` stops the copies and lets local segments go by ``retention.*`` (KIP-950).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import datetime
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.client.async_wire import AsyncWireClient, Connect
from odradek.config import ConfigError
from odradek.coordinator.runtime import TopicCreationGate, TopicCreator, create_internal_topic
from odradek.log.errors import OffsetOutOfRangeError
from odradek.log.fetch_isolation import FetchIsolation
from odradek.log.producer_state import snapshot_path
from odradek.log.txn_index import ENTRY_SIZE, AbortedTxn
from odradek.metrics.stats import TopicCounters, WorkerPoolStats, executor_queue
from odradek.protocol import errors
from odradek.protocol.records import (
    InvalidRecordError,
    build_batch,
    decode_records,
    iter_batches,
    read_inflate_limit,
)
from odradek.replication.delayed_fetch import RemoteFetchInfo, RemoteReadResult
from odradek.server.quota.remote_log import RLMQuotaManager, ThrottleTimeSensor
from odradek.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC,
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    deserialize,
    metadata_partition,
    serialize,
)
from odradek.tiered.metadata_cache import (
    RemoteMetadataNotReadyError,
    RemotePartitionMetadataStore,
    partition_of,
)
from odradek.tiered.plan import (
    TimestampAndOffset,
    copy_candidates,
    find_timestamp_in_batches,
    offset_index_position,
    read_batches,
    remote_retention,
    time_index_offset,
    timestamp_candidates,
)
from odradek.tiered.storage import (
    FileSystemRemoteStorage,
    IndexType,
    LogSegmentData,
    RemoteStorageError,
    RemoteStorageManager,
    S3RemoteStorage,
)

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicRegistry
    from odradek.log.log import Log
    from odradek.log.manager import LogManager
    from odradek.log.segment import LogSegment
    from odradek.server.replica_manager import ReplicaManager

log = logging.getLogger("odradek.remote")

S = RemoteLogSegmentState
TopicPartition = tuple[str, int]
PRODUCE_VERSION = 9
FETCH_VERSION = 12
PRODUCE_TIMEOUT_S = 30.0
INDEX_CACHE_ENTRIES = 64  # offset indexes of remote segments kept for reads (Kafka's RemoteIndexCache)
QUOTA_TIMEOUT_MS = 1000  # the longest a copy waits for the copy quota before checking again (Kafka's quotaTimeout)


def storage_from_config(config: BrokerConfig, log_dirs: list[Path]) -> RemoteStorageManager:
    """The store of ``remote.log.storage.manager.class.name`` (filesystem, the default, or s3) with its
    settings under ``remote.log.storage.manager.impl.prefix``."""
    kind = str(config.get("remote.log.storage.manager.class.name") or "filesystem").strip().lower()
    prefix = str(config.get("remote.log.storage.manager.impl.prefix"))

    def setting(name: str) -> str | None:
        return config.raw(prefix + name)[0]

    if kind == "s3":
        bucket = setting("bucket")
        if not bucket:
            raise ConfigError(f"remote.log.storage.manager.class.name=s3 needs {prefix}bucket")
        try:
            return S3RemoteStorage(
                bucket, setting("prefix") or "", endpoint_url=setting("endpoint.url"), region=setting("region"),
            )
        except ImportError as e:
            raise ConfigError(f"remote.log.storage.manager.class.name=s3 needs boto3 (odradek's s3 extra): {e}") from e
    root = setting("dir")
    return FileSystemRemoteStorage(Path(root) if root else log_dirs[0] / "remote-storage")


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) of a leader-epoch checkpoint (Kafka's LeaderEpochCheckpointFile: version 0, the
    number of entries, then ``epoch start`` per line)."""
    lines = data.decode("ascii").split("\n")
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"not a leader-epoch checkpoint: {data[:40]!r}")
    count = int(lines[1])
    out = []
    for line in lines[2: 2 + count]:
        epoch, start = line.split()
        out.append((int(epoch), int(start)))
    if len(out) != count:
        raise ValueError(f"a leader-epoch checkpoint of {count} entries holds {len(out)}")
    return out


class RemoteLogManager:
    """See the module docstring. Everything but the store's work runs on the event loop."""

    def __init__(
        self,
        config: BrokerConfig,
        node_id: int,
        replicas: ReplicaManager,
        logs: LogManager,
        topics: TopicRegistry,
        admin: TopicCreator,
        storage: RemoteStorageManager,
        now_ms: Callable[[], int],
        connect: Connect | None = None,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self.replicas = replicas
        self.logs = logs
        self.topics = topics
        self.admin = admin
        self.storage = storage
        self.now_ms = now_ms
        self.metadata = RemotePartitionMetadataStore()
        prefix = str(config.get("remote.log.metadata.manager.impl.prefix"))
        self.num_metadata_partitions = int(
            config.raw(prefix + "remote.log.metadata.topic.num.partitions")[0] or 50)
        self._rf = int(config.raw(prefix + "remote.log.metadata.topic.replication.factor")[0] or 3)
        self._retention = str(config.raw(prefix + "remote.log.metadata.topic.retention.ms")[0] or "-1")
        threads = int(config.get("remote.log.manager.thread.pool.size"))
        self._workers = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="remote-log-copy")
        self._readers = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="remote-log-reader")
        # Kafka's RemoteStorageMetrics: the meters and gauges in the broker's BrokerTopicMetrics, the pools' gauges
        self.stats = replicas.topic_stats
        self.copy_pool = WorkerPoolStats(threads, executor_queue(self._workers))
        self.reader_pool = WorkerPoolStats(threads, executor_queue(self._readers))
        self._gate = TopicCreationGate(topics, REMOTE_LOG_METADATA_TOPIC, now_ms)
        self._busy: set[TopicPartition] = set()  # a copy or a deletion in flight
        self.in_flight: set[asyncio.Future[Any]] = set()  # their futures (on the loop), until their callbacks ran
        # offset and time indexes of remote segments (Kafka's RemoteIndexCache), by segment id and kind
        self._indexes: collections.OrderedDict[tuple[uuid.UUID, IndexType], bytes] = collections.OrderedDict()
        self._indexes_lock = threading.Lock()
        self._not_replica_logged: set[int] = set()
        # Kafka's ConsumerTask: per user partition, the next offset of its metadata partition to read, and the
        # offsets of records this broker wrote and applied already (read-your-writes; skipped when consumed)
        self._positions: dict[TopicIdPartition, int] = {}
        self._applied_ahead: dict[TopicIdPartition, set[int]] = {}
        self._copying: set[uuid.UUID] = set()  # Kafka's segmentIdsBeingCopied
        self._connect = connect
        self._producers: dict[int, AsyncWireClient] = {}  # to the leaders of metadata partitions led elsewhere
        self._consumers: dict[int, AsyncWireClient] = {}  # fetching metadata partitions this broker holds no replica of
        self._tasks: set[asyncio.Task[Any]] = set()
        self._fetching: set[TopicIdPartition] = set()  # a Fetch of their metadata partition in flight
        self._partition_deletes: list[tuple[TopicIdPartition, list[RemoteLogSegmentMetadata]]] = []
        self.closed = False
        # counters (copied and deleted segments and bytes, remote reads)
        self.copied_segments = 0
        self.copied_bytes = 0
        self.deleted_segments = 0
        self.remote_reads = 0
        self.remote_offset_lookups = 0  # ListOffsets by timestamp answered from a remote segment
        self.follower_rebuilds = 0  # follower states built from the remote tier
        # KIP-956: the copy and fetch quotas (their bounds dynamic: read at each check) and Kafka's RLMQuotaMetrics
        self.copy_quota = RLMQuotaManager(
            lambda: int(config.get("remote.log.manager.copy.max.bytes.per.second")), now_ms,
            int(config.get("remote.log.manager.copy.quota.window.num")),
            int(config.get("remote.log.manager.copy.quota.window.size.seconds")))
        self.fetch_quota = RLMQuotaManager(
            lambda: int(config.get("remote.log.manager.fetch.max.bytes.per.second")), now_ms,
            int(config.get("remote.log.manager.fetch.quota.window.num")),
            int(config.get("remote.log.manager.fetch.quota.window.size.seconds")))
        samples, window = int(config.get("metrics.num.samples")), int(config.get("metrics.sample.window.ms"))
        self.copy_throttle_time = ThrottleTimeSensor(now_ms, samples, window)  # remote-copy-throttle-time
        self.fetch_throttle_time = ThrottleTimeSensor(now_ms, samples, window)  # remote-fetch-throttle-time
        self._quota_rechecks: dict[TopicPartition, asyncio.TimerHandle] = {}  # copies waiting for the copy quota

    # ------------------------------------------------------------------ the periodic task

    def tick(self) -> None:
        """Every tiered partition this broker hosts (leader or follower) reads its metadata partition's new
        records (Kafka's TopicBasedRemoteLogMetadataManager consumes the metadata partitions of the user
        partitions it hosts), so a follower knows the highest offset copied and applies local retention;
        then copy and remote retention for those it leads."""
        if self.closed:
            return
        waiting = []
        for tip, segments in self._partition_deletes:
            if (tip.topic, tip.partition) in self._busy:  # a copy or retention's deletion in flight: next time
                waiting.append((tip, segments))
                continue
            if self.metadata.is_initialized(tip):  # and what a copy in flight meanwhile finished
                known = {m.segment_id for m in segments}
                segments = segments + [m for m in self.metadata.list_remote_log_segments(tip)
                                       if m.state is not S.DELETE_SEGMENT_FINISHED and m.segment_id not in known]
            self._delete_partition(tip, segments)
        self._partition_deletes = waiting
        pending = {tip for tip, _ in waiting}
        hosted = self._hosted_tiered()
        tips = {self._tip(plog) for _, plog, _ in hosted}
        for tip in self.metadata.partitions():
            if tip not in tips and tip not in pending:  # no longer hosted here: replayed again if it comes back
                self.metadata.clear_topic_partition(tip)
                self._positions.pop(tip, None)
                self._applied_ahead.pop(tip, None)
        led = [(tp, plog) for tp, plog, leader in hosted if leader]
        if led and not self._ensure_topic():
            return
        for tp, plog, _ in hosted:
            try:
                self._consume(self._tip(plog), plog)
            except Exception:
                log.exception("reading the remote log metadata of %s-%d failed", *tp)
        for tp, plog in led:
            try:
                self._run(tp, plog)
                self._record_gauges(tp, self._tip(plog), plog)
            except Exception:
                log.exception("remote log manager task for %s-%d failed", *tp)
        self._drop_gauges({tp for tp, _ in led})

    # ------------------------------------------------------------------ metrics (Kafka's RemoteStorageMetrics)

    def _record_gauges(self, tp: TopicPartition, tip: TopicIdPartition, plog: Log) -> None:
        """The partition's gauges in BrokerTopicMetrics, where this broker leads it: RemoteCopyLagBytes and
        RemoteCopyLagSegments (Kafka's RLMCopyTask: the closed local segments past the highest offset copied;
        Kafka filters ``baseOffset >= highestOffsetInRemoteStorage``, which also counts a copied segment of one
        offset: here ``>``), RemoteLogSizeBytes and RemoteLogMetadataCount (Kafka's RLMExpirationTask: the
        partition's remote segments in any state but DELETE_SEGMENT_FINISHED) and the time that took."""
        g = self.stats.remote_partition(*tp)
        if plog.config.remote_storage_enable and plog.config.remote_copy_enabled:
            highest = plog.highest_offset_in_remote_storage
            closed = plog.segments[:-1]  # never the active segment
            lag = [s.size for s in closed if s.base_offset > highest]
            g.copy_lag_bytes, g.copy_lag_segments = sum(lag), len(lag)
        else:  # no copy task (KIP-950): Kafka resets the lag
            g.copy_lag_bytes = g.copy_lag_segments = 0
        if self.metadata.is_initialized(tip):
            start = self.now_ms()
            segments = self.metadata.list_remote_log_segments(tip)
            g.metadata_count = len(segments)
            g.log_size_bytes = sum(m.segment_size_in_bytes for m in segments)
            g.size_computation_time_ms = max(self.now_ms() - start, 0)

    def _counters(self, topic: str) -> TopicCounters:
        """The event loop's counters of ``topic``; a deleted topic's (its remote segments deleted after it) count
        in the all-topics sums only, as its series are gone."""
        return self.stats.topic(topic) if self.topics.get(topic) is not None else self.stats.removed

    def _drop_gauges(self, led: set[TopicPartition]) -> None:
        """The gauges of partitions no longer led here go (Kafka resets the copy lag when leadership moves and
        drops a partition's gauges when it stops)."""
        for topic, parts in list(self.stats.remote.items()):
            for partition in [p for p in parts if (topic, p) not in led]:
                self.stats.remove_remote_partition(topic, partition)

    def _hosted_tiered(self) -> list[tuple[TopicPartition, Log, bool]]:
        out = []
        for tp, part in list(self.replicas.partitions.items()):
            plog = self.logs.get_log(*tp)
            if plog is not None and plog.config.remote_storage_enable and plog.topic_id is not None:
                out.append((tp, plog, part.is_leader(self.node_id)))
        return out

    def _led_tiered(self) -> list[tuple[TopicPartition, Log]]:
        return [(tp, plog) for tp, plog, leader in self._hosted_tiered() if leader]

    def _ensure_topic(self) -> bool:
        cfg = self

        def create() -> bool:
            return create_internal_topic(
                cfg.topics, cfg.admin, REMOTE_LOG_METADATA_TOPIC, cfg.num_metadata_partitions,
                "rlmm.config.remote.log.metadata.topic.replication.factor", cfg._rf,
                # Kafka's TopicBasedRemoteLogMetadataManager.createRemoteLogMetadataTopicRequest
                lambda _rf: {"cleanup.policy": "delete", "retention.ms": cfg._retention,
                             "remote.storage.enable": "false"},
            )

        return self._gate.ensure(create)

    def _run(self, tp: TopicPartition, plog: Log) -> None:
        # remote.storage.enable turned off (KIP-950): no more copies nor retention (Kafka cancels the tasks)
        if tp in self._busy or not plog.config.remote_storage_enable:
            return
        tip = self._tip(plog)
        if not self._ensure_loaded(tip, plog):
            return
        if self._expire(tp, tip, plog):
            return
        self._copy_next(tp, tip, plog)

    @staticmethod
    def _tip(plog: Log) -> TopicIdPartition:
        assert plog.topic_id is not None
        return TopicIdPartition(plog.topic_id, plog.topic, plog.partition)

    # ------------------------------------------------------------------ metadata

    def _metadata_log(self, tip: TopicIdPartition) -> tuple[int, Log | None]:
        meta = self.topics.get(REMOTE_LOG_METADATA_TOPIC)  # its partitions as created, whatever the setting now
        p = metadata_partition(tip, len(meta.partitions) if meta is not None else self.num_metadata_partitions)
        return p, self.logs.get_log(REMOTE_LOG_METADATA_TOPIC, p)

    def _ensure_loaded(self, tip: TopicIdPartition, plog: Log) -> bool:
        """The partition's records read (the first time, from the start of its metadata partition)."""
        return self._consume(tip, plog) and self.metadata.is_initialized(tip)

    def _consume(self, tip: TopicIdPartition, plog: Log) -> bool:
        """Read the new records of the partition's metadata partition (Kafka's ConsumerTask) from this broker's
        replica of it (up to its high watermark, or its log end where this broker leads it: its own writes), or,
        where this broker holds no replica of it, with Fetch requests to its leader (a consumer's, up to the high
        watermark, in a task of its own); apply those of ``tip``; then the log learns the highest offset copied.
        False while the partition's records were never read (a fetch in flight)."""
        p, mlog = self._metadata_log(tip)
        first_time = not self.metadata.is_initialized(tip)
        position = 0 if first_time else self._positions.get(tip, 0)
        if mlog is None:
            if tip not in self._fetching:
                self._fetch_metadata(tip, plog, p, position, first_time)
            return not first_time
        leading = self.replicas.leading(REMOTE_LOG_METADATA_TOPIC, p) is not None
        upper = mlog.log_end_offset if leading else mlog.high_watermark
        values = self._metadata_values(mlog, max(position, mlog.log_start_offset), upper) if position < upper else []
        self._apply_values(tip, plog, p, values, first_time)
        return True

    def _apply_values(
        self, tip: TopicIdPartition, plog: Log, p: int, values: list[tuple[int, bytes]], first_time: bool,
    ) -> None:
        if first_time:
            self.metadata.clear_topic_partition(tip)
            self.metadata.maybe_load_partition(tip)
            self._applied_ahead[tip] = set()
            self._positions[tip] = 0
        elif not self.metadata.is_initialized(tip):
            return  # cleared meanwhile (no longer hosted)
        ahead = self._applied_ahead.setdefault(tip, set())
        position = self._positions.get(tip, 0)
        applied = 0
        for off, value in values:
            if off < position:
                continue
            position = off + 1
            if off in ahead:
                ahead.discard(off)
                continue
            try:
                m = deserialize(value)
                if partition_of(m) != tip:
                    continue
                self.metadata.handle(m)
            except (ValueError, KeyError, RemoteStorageError) as e:  # one bad record does not stop the rest
                log.warning("skipping record %d of %s-%d: %s", off, REMOTE_LOG_METADATA_TOPIC, p, e)
                continue
            applied += 1
        self._positions[tip] = position
        if first_time:
            self.metadata.mark_initialized(tip)
        if applied or first_time:
            self._learn(tip, plog, first_time, applied)

    def _fetch_metadata(self, tip: TopicIdPartition, plog: Log, p: int, position: int, first_time: bool) -> None:
        """Fetch the metadata partition's records from ``position`` from its leader, as a consumer (Kafka's
        ConsumerTask's consumer), then apply them on the loop."""
        meta = self.replicas.partitions.get((REMOTE_LOG_METADATA_TOPIC, p))
        leader = meta.leader if meta is not None else self._metadata_leader(p)
        node = self.replicas.live_broker(leader) if leader >= 0 else None
        if node is None:
            if p not in self._not_replica_logged:
                self._not_replica_logged.add(p)
                log.warning("%s-%d has no live leader known here: the remote log metadata of %s is read later",
                            REMOTE_LOG_METADATA_TOPIC, p, tip)
            return

        async def fetch() -> None:
            values: list[tuple[int, bytes]] = []
            offset = position
            try:
                client = self._client(leader, node)
                while not self.closed:
                    resp = await client.request(1, FETCH_VERSION, {
                        "cluster_id": None, "replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0,
                        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                        "topics": [{"topic": REMOTE_LOG_METADATA_TOPIC, "partitions": [{
                            "partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                        "forgotten_topics_data": [], "rack_id": "",
                    })
                    part = resp.responses[0].partitions[0]
                    code = int(part.error_code)
                    if code == errors.OFFSET_OUT_OF_RANGE and offset < int(part.log_start_offset):
                        offset = int(part.log_start_offset)
                        continue
                    if code != errors.NONE:
                        log.info("fetching %s-%d from broker %d: error %d", REMOTE_LOG_METADATA_TOPIC, p, leader, code)
                        return
                    records = bytes(part.records or b"")
                    progressed = False
                    for pos, h in iter_batches(records):
                        if pos + h.size > len(records):
                            break
                        progressed = True
                        offset = h.next_offset
                        if h.is_control:
                            continue
                        for r in decode_records(memoryview(records)[pos: pos + h.size]):
                            if r.offset >= position and r.value is not None:
                                values.append((r.offset, bytes(r.value)))
                    if not progressed or offset >= int(part.high_watermark):
                        break
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the connection is dropped, the read retried at the next task
                log.warning("fetching %s-%d from broker %d failed: %r", REMOTE_LOG_METADATA_TOPIC, p, leader, e)
                self._drop_client(leader)
                return
            finally:
                self._fetching.discard(tip)
            if not self.closed and self.logs.get_log(plog.topic, plog.partition) is plog:
                self._apply_values(tip, plog, p, values, first_time)

        self._fetching.add(tip)
        self._spawn(fetch())

    def _metadata_leader(self, p: int) -> int:
        """The leader of metadata partition ``p`` by this broker's metadata cache (-1: none known)."""
        meta = self.topics.get(REMOTE_LOG_METADATA_TOPIC)
        if meta is None or p >= len(meta.partitions) or meta.partitions[p] is None:
            return -1
        return int(meta.partitions[p].leader)

    def _client(self, broker: int, node: Mapping[str, Any]) -> AsyncWireClient:
        """The connection the consumer side fetches on (one request at a time; the producer side has its own)."""
        client = self._consumers.get(broker)
        if client is None:
            client = self._consumers[broker] = AsyncWireClient(
                str(node["host"]), int(node["port"]), f"rlmm-consumer-{self.node_id}", PRODUCE_TIMEOUT_S,
                self._connect)
        return client

    def _drop_client(self, broker: int) -> None:
        bad = self._consumers.pop(broker, None)
        if bad is not None:
            bad.close()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _metadata_values(mlog: Log, start: int, upper: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        offset = start
        while offset < upper:
            try:
                data = mlog.read(offset, 1 << 20, upper, True)
            except OffsetOutOfRangeError:
                return out
            if not data.size:
                return out
            chunk = bytearray()
            for region in data.regions:
                chunk += os.pread(region.file.fileno(), region.length, region.position)
            progressed = False
            for pos, h in iter_batches(chunk):
                offset = h.next_offset
                progressed = True
                if h.is_control:
                    continue
                for r in decode_records(memoryview(chunk)[pos: pos + h.size]):
                    if start <= r.offset < upper and r.value is not None:
                        out.append((r.offset, bytes(r.value)))
            if not progressed:
                return out
        return out

    def _learn(self, tip: TopicIdPartition, plog: Log, first_time: bool, applied: int) -> None:
        done = [m for m in self.metadata.list_remote_log_segments(tip) if m.state is S.COPY_SEGMENT_FINISHED]
        plog.highest_offset_in_remote_storage = max([plog.highest_offset_in_remote_storage,
                                                     *[m.end_offset for m in done]])
        # the log starts at the earliest remote segment (Kafka's updateLogStartOffsetFromRemoteTier): a log
        # start offset checkpoint lost in a crash would point at records remote retention deleted
        plog.advance_log_start_offset(min([m.start_offset for m in done], default=plog.local_log_start_offset))
        if first_time:
            log.info("loaded the remote log metadata of %s: %d records, %d remote segments, highest offset "
                     "copied %d", tip, applied, len(done), plog.highest_offset_in_remote_storage)

    def _write(self, records: Sequence[RemoteLogMetadata], tip: TopicIdPartition, then: Callable[[bool], None]) -> None:
        """Records to the partition's metadata partition, then into the cache, then ``then(ok)``: appended
        here when this broker leads that metadata partition, else produced to its leader with acks=all
        (Kafka's producer of TopicBasedRemoteLogMetadataManager)."""
        p, mlog = self._metadata_log(tip)
        part = self.replicas.leading(REMOTE_LOG_METADATA_TOPIC, p)
        now = self.now_ms()
        batch = build_batch([(None, serialize(m)) for m in records], timestamp=now)
        if mlog is not None and part is not None:
            info = self.replicas.append_internal(part, mlog, batch, now)
            self._applied(tip, records, info.first_offset)
            then(True)
            return
        meta = self.replicas.partitions.get((REMOTE_LOG_METADATA_TOPIC, p))
        leader = meta.leader if meta is not None else self._metadata_leader(p)
        node = self.replicas.live_broker(leader) if leader >= 0 else None
        if node is None:
            log.warning("cannot write %s: %s-%d has no live leader", type(records[0]).__name__,
                        REMOTE_LOG_METADATA_TOPIC, p)
            then(False)
            return

        async def produce() -> None:
            ok = False
            try:
                client = self._producers.get(leader)
                if client is None:
                    client = self._producers[leader] = AsyncWireClient(
                        str(node["host"]), int(node["port"]), f"rlmm-producer-{self.node_id}", PRODUCE_TIMEOUT_S,
                        self._connect)
                resp = await client.request(0, PRODUCE_VERSION, {
                    "transactional_id": None, "acks": -1, "timeout": datetime.timedelta(seconds=PRODUCE_TIMEOUT_S),
                    "topic_data": [{"name": REMOTE_LOG_METADATA_TOPIC,
                                    "partition_data": [{"index": p, "records": bytes(batch)}]}],
                })
                pr = resp.responses[0].partition_responses[0]
                if int(pr.error_code) != errors.NONE:
                    log.warning("producing to %s-%d on broker %d: error %d", REMOTE_LOG_METADATA_TOPIC, p, leader,
                                int(pr.error_code))
                elif not self.closed:
                    self._applied(tip, records, int(pr.base_offset))
                    ok = True
            except asyncio.CancelledError:
                raise
            except Exception as e:  # WireError, OSError, a timeout: the connection is dropped, the step retried
                log.warning("producing to %s-%d on broker %d failed: %r", REMOTE_LOG_METADATA_TOPIC, p, leader, e)
                bad = self._producers.pop(leader, None)
                if bad is not None:
                    bad.close()
            if not self.closed:
                then(ok)

        task = asyncio.get_running_loop().create_task(produce())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _applied(self, tip: TopicIdPartition, records: Sequence[RemoteLogMetadata], first_offset: int) -> None:
        """Records this broker wrote at ``first_offset``...: into the cache now, unless consumed already."""
        if not self.metadata.is_initialized(tip):
            return  # no longer hosted here (its topic deleted): read again from the start if it comes back
        position = self._positions.get(tip, 0)
        ahead = self._applied_ahead.setdefault(tip, set())
        for i, m in enumerate(records):
            off = first_offset + i
            if off < position:
                continue  # read back already
            ahead.add(off)
            self.metadata.handle(m)

    # ------------------------------------------------------------------ copy (RLMCopyTask)

    def _copy_next(self, tp: TopicPartition, tip: TopicIdPartition, plog: Log) -> None:
        if not plog.config.remote_copy_enabled:  # remote.log.copy.disable (KIP-950): the remote tier is read-only
            return
        segments = plog.segments
        candidates = copy_candidates(
            [s.base_offset for s in segments], plog.log_end_offset, plog.last_stable_offset,
            plog.highest_offset_in_remote_storage, plog.local_log_start_offset,
        )
        if not candidates:
            return
        base, end = candidates[0]
        seg = next(s for s in segments if s.base_offset == base)
        if self._copy_throttled(tp):
            return
        prepared = self._segment_data(plog, seg, end)
        if prepared is None:
            return
        self.copy_quota.record(seg.size)  # the segment's bytes count once the wait is over (Kafka's RLMCopyTask)
        data, epochs, txn_empty, cleanup = prepared
        now = self.now_ms()
        started = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(tip), base, end, seg.max_timestamp, self.node_id, now, seg.size,
            tuple(sorted(epochs.items())), None, S.COPY_SEGMENT_STARTED, txn_empty,
        )
        self._busy.add(tp)

        def copy(ok: bool) -> None:
            if not ok or self.closed:
                if not ok:  # the COPY_SEGMENT_STARTED record was not written (Kafka counts it as a failed copy)
                    self.stats.topic(tp[0]).remote_copy_errors += 1
                self._busy.discard(tp)
                cleanup()
                return
            self._copying.add(started.segment_id.id)
            self.stats.topic(tp[0]).remote_copy_requests += 1  # RemoteCopyRequestsPerSec, as the copy starts
            fut = asyncio.get_running_loop().run_in_executor(
                self._workers, self.copy_pool.wrap(self.storage.copy_log_segment_data), started, data)
            self._track(fut)
            fut.add_done_callback(lambda f: self._copied(tp, tip, plog, started, f, cleanup))

        self._write([started], tip, copy)

    def _copy_throttled(self, tp: TopicPartition) -> bool:
        """Whether the copy quota (KIP-956) holds the partition's next copy back: Kafka's RLMCopyTask waits while
        ``getThrottleTimeMs`` is positive, recording each throttle time it sees, and checks again after at most
        a second (its quotaTimeout; sooner when another copy passes). Here the check runs again after the
        throttle time, at most a second, on the loop (and at each task), and the copy starts once it is 0."""
        throttle_ms = self.copy_quota.throttle_time_ms()
        if throttle_ms <= 0:
            return False
        self.copy_throttle_time.record(throttle_ms)
        if tp not in self._quota_rechecks:
            log.debug("remote copy quota exceeded: the copy of %s-%d waits %d ms", *tp, throttle_ms)
            delay_s = min(throttle_ms, QUOTA_TIMEOUT_MS) / 1000
            self._quota_rechecks[tp] = asyncio.get_running_loop().call_later(delay_s, self._recheck_copy, tp)
        return True

    def _recheck_copy(self, tp: TopicPartition) -> None:
        self._quota_rechecks.pop(tp, None)
        self._run_if_led(tp)

    def fetch_throttle_time_ms(self) -> int:
        """Kafka's getFetchThrottleTimeMs, with the throttle time recorded in remote-fetch-throttle-time when
        positive (as ReplicaManager does): while positive, the replica manager starts no remote read."""
        throttle_ms = self.fetch_quota.throttle_time_ms()
        if throttle_ms > 0:
            self.fetch_throttle_time.record(throttle_ms)
        return throttle_ms

    def _segment_data(
        self, plog: Log, seg: LogSegment, end: int
    ) -> tuple[LogSegmentData, dict[int, int], bool, Callable[[], None]] | None:
        """What Kafka's LogSegmentData carries for the segment [base, end], its leader epochs, whether its
        transaction index is empty, and what to clean up after the copy."""
        _ = seg.offset_index  # a lazily opened segment's indexes exist on disk once loaded
        if not seg.offset_index_path.exists() or not seg.time_index_path.exists():
            log.info("the indexes of segment %d of %s are not on disk yet; copying it later",
                     seg.base_offset, plog.name)
            return None
        txn = seg.txn_index_path
        txn_empty = not txn.exists() or txn.stat().st_size == 0
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
        snapshot = snapshot_path(plog.dir, end + 1)
        if not snapshot.exists():
            # Kafka copies the producer snapshot taken when the next segment was rolled; one that is gone
            # (a crash before it was written) is copied empty: only a follower rebuilding its producer
            # state from the remote tier reads it
            log.warning("no producer snapshot at %d in %s: copying an empty one", end + 1, plog.name)
            tmp = tempfile.NamedTemporaryFile(prefix="odradek-empty-snapshot-", delete=False)  # noqa: SIM115
            tmp.close()
            snapshot = Path(tmp.name)
            cleanup = snapshot.unlink
        entries = [e for e in plog.leader_epoch_cache.entries if e.start_offset <= end]
        epochs: dict[int, int] = {}
        for e in entries:
            if e.start_offset <= seg.base_offset:
                epochs = {e.epoch: seg.base_offset}
            else:
                epochs[e.epoch] = e.start_offset
        if not epochs:
            epochs = {max(self.replicas.leader_epoch(plog.topic, plog.partition), 0): seg.base_offset}
        checkpoint = ("0\n" + f"{len(entries)}\n" + "".join(f"{e.epoch} {e.start_offset}\n" for e in entries))
        data = LogSegmentData(
            seg.log.path, seg.offset_index_path, seg.time_index_path, None if txn_empty else txn, snapshot,
            checkpoint.encode("ascii"),
        )
        return data, epochs, txn_empty, cleanup

    def _copied(
        self, tp: TopicPartition, tip: TopicIdPartition, plog: Log, started: RemoteLogSegmentMetadata,
        fut: asyncio.Future[Any], cleanup: Callable[[], None],
    ) -> None:
        cleanup()
        if fut.cancelled() or self.closed:
            self._busy.discard(tp)
            return
        e = fut.exception()
        if e is not None:
            self.stats.topic(tp[0]).remote_copy_errors += 1
            self._busy.discard(tp)
            self._copying.discard(started.segment_id.id)
            log.error("copying segment %d-%d of %s to the remote store failed (retried at the next task): %s",
                      started.start_offset, started.end_offset, plog.name, e)
            return
        if self.replicas.leading(*tp) is None or self.logs.get_log(*tp) is not plog:
            self._busy.discard(tp)
            self._copying.discard(started.segment_id.id)
            log.info("no longer leading %s: the copy of %d-%d is left unfinished", plog.name,
                     started.start_offset, started.end_offset)
            return
        custom = fut.result()
        update = RemoteLogSegmentMetadataUpdate(
            started.segment_id, self.now_ms(), custom, S.COPY_SEGMENT_FINISHED, self.node_id)

        def finished(ok: bool) -> None:
            self._busy.discard(tp)
            self._copying.discard(started.segment_id.id)
            if not ok:
                self.stats.topic(tp[0]).remote_copy_errors += 1
                return
            plog.highest_offset_in_remote_storage = max(plog.highest_offset_in_remote_storage, started.end_offset)
            self.copied_segments += 1
            self.copied_bytes += started.segment_size_in_bytes
            self.stats.topic(tp[0]).remote_copy_bytes += started.segment_size_in_bytes
            self._record_gauges(tp, tip, plog)  # the copy lag and remote size after the copy, as Kafka records them
            log.info("copied segment %d-%d of %s (%d bytes) to the remote store", started.start_offset,
                     started.end_offset, plog.name, started.segment_size_in_bytes)
            asyncio.get_running_loop().call_soon(self._run_if_led, tp)

        self._write([update], tip, finished)

    def _track(self, fut: asyncio.Future[Any]) -> None:
        self.in_flight.add(fut)
        fut.add_done_callback(self.in_flight.discard)

    def _run_if_led(self, tp: TopicPartition) -> None:
        plog = self.logs.get_log(*tp)
        if self.closed or plog is None or self.replicas.leading(*tp) is None:
            return
        try:
            self._run(tp, plog)
        except Exception:
            log.exception("remote log manager task for %s-%d failed", *tp)

    # ------------------------------------------------------------------ remote retention (RLMExpirationTask)

    def _expire(self, tp: TopicPartition, tip: TopicIdPartition, plog: Log) -> bool:
        """Start the deletion of the remote segments retention no longer keeps, of the copies a former
        leader started and never finished (dangling segments: COPY_SEGMENT_STARTED not being copied here),
        and the retry of deletions that did not finish; True if it started."""
        cfg = plog.config
        highest = plog.highest_offset_in_remote_storage
        segments = self.metadata.list_remote_log_segments(tip)
        doomed = remote_retention(
            segments,
            now_ms=self.now_ms(),
            retention_ms=cfg.retention_ms if cfg.delete_enabled else -1,
            retention_bytes=cfg.retention_bytes if cfg.delete_enabled else -1,
            log_start_offset=plog.log_start_offset,
            local_only_bytes=sum(s.size for s in plog.segments if s.base_offset > highest),
        )
        dangling = [m for m in segments
                    if m.state is S.COPY_SEGMENT_STARTED and m.segment_id.id not in self._copying]
        retry = [m for m in segments if m.state is S.DELETE_SEGMENT_STARTED]
        if not doomed and not dangling and not retry:
            return False
        now = self.now_ms()
        starting = [RemoteLogSegmentMetadataUpdate(m.segment_id, now, None, S.DELETE_SEGMENT_STARTED, self.node_id)
                    for m in doomed + dangling]
        self._busy.add(tp)
        victims = doomed + dangling + retry

        def delete(ok: bool) -> None:
            if not ok or self.closed:
                self._busy.discard(tp)
                return
            if doomed:
                plog.advance_log_start_offset(max(m.end_offset for m in doomed) + 1)
            for m in dangling:
                log.info("deleting the unfinished copy %d-%d of %s (segment %s)", m.start_offset, m.end_offset,
                         tip, m.segment_id.id)
            self._deleting(tip, victims)
            fut = asyncio.get_running_loop().run_in_executor(self._workers, self.copy_pool.wrap(self._delete_all), victims)
            self._track(fut)
            fut.add_done_callback(lambda f: self._deleted(tp, tip, f, len(victims)))

        if starting:
            self._write(starting, tip, delete)
        else:
            delete(True)
        return True

    def _delete_all(self, doomed: list[RemoteLogSegmentMetadata]) -> list[RemoteLogSegmentMetadata]:
        gone = []
        for m in doomed:
            try:
                self.storage.delete_log_segment_data(m)
                gone.append(m)
            except RemoteStorageError as e:
                log.error("deleting remote segment %s failed: %s", m.segment_id, e)
        return gone

    def _deleting(self, tip: TopicIdPartition, victims: list[RemoteLogSegmentMetadata]) -> None:
        """RemoteDeleteRequestsPerSec per segment, and the delete lag (Kafka's RemoteDeleteLagSegments / Bytes:
        the segments being deleted) while they are."""
        self.stats.topic(tip.topic).remote_delete_requests += len(victims)
        if self.metadata.is_initialized(tip):
            g = self.stats.remote_partition(tip.topic, tip.partition)
            g.delete_lag_segments = len(victims)
            g.delete_lag_bytes = sum(m.segment_size_in_bytes for m in victims)

    def _delete_counted(self, tip: TopicIdPartition, fut: asyncio.Future[Any], asked: int) -> None:
        """RemoteDeleteErrorsPerSec: the segments the store did not delete; the delete lag back to 0."""
        if fut.cancelled():
            return
        failed = asked if fut.exception() is not None else asked - len(fut.result())
        self._counters(tip.topic).remote_delete_errors += failed
        g = self.stats.remote.get(tip.topic, {}).get(tip.partition)
        if g is not None:
            g.delete_lag_segments = g.delete_lag_bytes = 0

    def _deleted(self, tp: TopicPartition, tip: TopicIdPartition, fut: asyncio.Future[Any], asked: int) -> None:
        self._delete_counted(tip, fut, asked)
        if fut.cancelled() or self.closed or fut.exception() is not None or not fut.result():
            self._busy.discard(tp)
            return
        now = self.now_ms()
        gone: list[RemoteLogSegmentMetadata] = fut.result()

        def finished(ok: bool) -> None:
            self._busy.discard(tp)
            if not ok:
                return
            for m in gone:
                self.deleted_segments += 1
                log.info("deleted remote segment %d-%d of %s", m.start_offset, m.end_offset, tip)
            plog = self.logs.get_log(*tp)
            if plog is not None:
                self._record_gauges(tp, tip, plog)  # the remote size after the deletion
            asyncio.get_running_loop().call_soon(self._run_if_led, tp)

        self._write([RemoteLogSegmentMetadataUpdate(m.segment_id, now, None, S.DELETE_SEGMENT_FINISHED, self.node_id)
                     for m in gone], tip, finished)

    # ------------------------------------------------------------------ topic deletion

    def delete_remote_log_partition(self, plog: Log) -> None:
        """The topic of ``plog`` is deleted and this broker led it (Kafka's RemoteLogManager.stopPartitions
        with deleteRemoteLog): every remote segment of the partition gets DELETE_SEGMENT_STARTED, is deleted
        from the store, then DELETE_SEGMENT_FINISHED (Kafka's deleteRemoteLogPartition). The segments are
        listed now (the log is deleted next); the deletion runs at the next task."""
        if plog.topic_id is None:
            return
        tip = self._tip(plog)
        try:
            if not self._ensure_loaded(tip, plog):
                log.warning("%s is deleted but its remote log metadata cannot be read here: its remote segments "
                            "stay", tip)
                return
            segments = [m for m in self.metadata.list_remote_log_segments(tip)
                        if m.state is not S.DELETE_SEGMENT_FINISHED]
        except RemoteStorageError as e:
            log.warning("listing the remote segments of deleted %s failed: %s", tip, e)
            return
        log.info("%s is deleted: deleting its %d remote segments", tip, len(segments))
        self._partition_deletes.append((tip, segments))

    def _delete_partition(self, tip: TopicIdPartition, segments: list[RemoteLogSegmentMetadata]) -> None:
        if not segments:
            return
        now = self.now_ms()

        def delete(ok: bool) -> None:
            if not ok or self.closed:
                return
            self._counters(tip.topic).remote_delete_requests += len(segments)
            fut = asyncio.get_running_loop().run_in_executor(self._workers, self.copy_pool.wrap(self._delete_all), segments)
            self._track(fut)
            fut.add_done_callback(finished)

        def finished(fut: asyncio.Future[Any]) -> None:
            self._delete_counted(tip, fut, len(segments))
            if fut.cancelled() or self.closed or fut.exception() is not None:
                return
            gone: list[RemoteLogSegmentMetadata] = fut.result()
            self.deleted_segments += len(gone)
            if gone:
                self._write([RemoteLogSegmentMetadataUpdate(m.segment_id, self.now_ms(), m.custom_metadata,
                                                            S.DELETE_SEGMENT_FINISHED, self.node_id) for m in gone],
                            tip, lambda ok: None)

        starting = [RemoteLogSegmentMetadataUpdate(m.segment_id, now, m.custom_metadata, S.DELETE_SEGMENT_STARTED,
                                                   self.node_id)
                    for m in segments if m.state is not S.DELETE_SEGMENT_STARTED]
        if starting:
            self._write(starting, tip, delete)
        else:
            delete(True)

    # ------------------------------------------------------------------ followers (TierStateMachine)

    async def build_remote_log_aux_state(
        self, plog: Log, leader_local_start: int, leader_epoch: int, leader_log_start: int,
    ) -> bool:
        """A follower told OFFSET_MOVED_TO_TIERED_STORAGE (Kafka's TierStateMachine.buildRemoteLogAuxState):
        the leader epochs and producer state at ``leader_local_start`` come from the leader-epoch checkpoint
        and producer snapshot of the remote segment holding ``leader_local_start - 1``; the log restarts empty
        at ``leader_local_start``. False (retried by the fetcher) while that segment is not known here."""
        if self.closed or plog.topic_id is None:
            return False
        tip = self._tip(plog)
        if not self._ensure_loaded(tip, plog):
            return False
        previous = leader_local_start - 1
        epochs: list[tuple[int, int]] = []
        snapshot = b""
        if leader_local_start > max(leader_log_start, 0):
            found = [m for m in self.metadata.list_remote_log_segments(tip)
                     if m.state is S.COPY_SEGMENT_FINISHED and m.start_offset <= previous <= m.end_offset]
            if not found:
                log.info("%s: no remote segment holds offset %d yet (leader epoch %d); retrying", plog.name,
                         previous, leader_epoch)
                return False
            m = found[-1]
            loop = asyncio.get_running_loop()
            counters = self.stats.topic(plog.topic)
            counters.build_remote_log_aux_state_requests += 1  # BuildRemoteLogAuxStateRequestsPerSec
            try:
                checkpoint, snapshot = await loop.run_in_executor(self._readers, self.reader_pool.wrap(self._aux_state), m)
                epochs = parse_epoch_checkpoint(checkpoint)
            except (RemoteStorageError, ValueError) as e:
                counters.build_remote_log_aux_state_errors += 1
                log.warning("%s: reading the state of remote segment %s failed: %s", plog.name, m.segment_id, e)
                return False
        if self.closed or self.logs.get_log(plog.topic, plog.partition) is not plog:
            return False
        plog.rebuild_from_remote_tier(leader_local_start, leader_log_start, epochs, snapshot, self.now_ms())
        self.follower_rebuilds += 1
        log.info("%s: state built from the remote tier at %d (log start %d, %d leader epochs, producer snapshot "
                 "of %d bytes)", plog.name, leader_local_start, plog.log_start_offset, len(epochs), len(snapshot))
        return True

    def _aux_state(self, m: RemoteLogSegmentMetadata) -> tuple[bytes, bytes]:
        with self.storage.fetch_index(m, IndexType.LEADER_EPOCH) as s:
            checkpoint = s.readall()
        with self.storage.fetch_index(m, IndexType.PRODUCER_SNAPSHOT) as s:
            snapshot = s.readall()
        return checkpoint, snapshot

    # ------------------------------------------------------------------ reads (RemoteLogReader)

    def fetch_max_wait_ms(self) -> int:
        return int(self.config.get("remote.fetch.max.wait.ms"))

    def read_async(self, info: RemoteFetchInfo, plog: Log) -> concurrent.futures.Future[RemoteReadResult]:
        """The read of ``info`` from the remote segment holding its offset, on a reader thread."""
        tip = self._tip(plog)
        fut: concurrent.futures.Future[RemoteReadResult]
        counters = self.stats.topic(info.topic)
        counters.remote_fetch_requests += 1  # Kafka's RemoteLogReader marks it as the read is asked for
        try:
            # a read before the task's first run (just after a restart): the metadata is replayed now
            if not self.metadata.is_initialized(tip) and not self._ensure_loaded(tip, plog):
                raise RemoteMetadataNotReadyError(f"the remote log metadata of {tip} cannot be read here yet")
            m = self._segment_for(tip, plog, info.fetch_offset)
        except RemoteStorageError as e:  # not loaded or not ready: retriable for the client
            log.info("fetch of %s-%d at %d from the remote tier: %s", info.topic, info.partition, info.fetch_offset, e)
            m = None
            code = errors.REPLICA_NOT_AVAILABLE
            counters.remote_fetch_errors += 1  # a failed read for Kafka's RemoteLogReader (not an offset out of range)
        else:
            code = errors.OFFSET_OUT_OF_RANGE
        if m is None:
            fut = concurrent.futures.Future()
            fut.set_result(RemoteReadResult(b"", error_code=code))
            return fut
        later: list[RemoteLogSegmentMetadata] = []
        local_aborted: list[tuple[int, int]] = []
        if info.isolation is FetchIsolation.TXN_COMMITTED:
            later = sorted((x for x in self.metadata.list_remote_log_segments(tip)
                            if x.state is S.COPY_SEGMENT_FINISHED and x.start_offset > m.start_offset
                            and not x.txn_idx_empty), key=lambda x: x.start_offset)
            local_aborted = [(a.producer_id, a.first_offset)
                             for a in plog.collect_aborted_transactions(info.fetch_offset, m.end_offset + 1)]
        self.remote_reads += 1
        return self._readers.submit(self.reader_pool.wrap(self._read), m, info, later, local_aborted)

    def _segment_for(self, tip: TopicIdPartition, plog: Log, offset: int) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset``: by the leader epoch of the offset (Kafka's
        fetchRemoteLogSegmentMetadata), else any finished copy holding it."""
        epoch = plog.leader_epoch_cache.epoch_for_offset(offset)
        if epoch >= 0:
            m = self.metadata.remote_log_segment_metadata(tip, epoch, offset)
            if m is not None:
                return m
        found = [x for x in self.metadata.list_remote_log_segments(tip)
                 if x.state is S.COPY_SEGMENT_FINISHED and x.start_offset <= offset <= x.end_offset]
        return found[-1] if found else None

    def _offset_index(self, m: RemoteLogSegmentMetadata) -> bytes:
        return self._index(m, IndexType.OFFSET)

    def _index(self, m: RemoteLogSegmentMetadata, kind: IndexType) -> bytes:
        """An index of a remote segment, from the cache of the last ones read or from the store."""
        key = (m.segment_id.id, kind)
        with self._indexes_lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return index
        with self.storage.fetch_index(m, kind) as s:
            index = s.readall()
        with self._indexes_lock:
            self._indexes[key] = index
            while len(self._indexes) > INDEX_CACHE_ENTRIES:
                self._indexes.popitem(last=False)
        return index

    def _read(
        self, m: RemoteLogSegmentMetadata, info: RemoteFetchInfo, later: list[RemoteLogSegmentMetadata],
        local_aborted: list[tuple[int, int]],
    ) -> RemoteReadResult:
        """On a reader thread: the batches of ``m`` from ``info.fetch_offset``; read_committed: the aborted
        transactions they overlap (Kafka's collectAbortedTransactions over remote, then local, segments)."""
        try:
            position = offset_index_position(self._offset_index(m), m.start_offset, info.fetch_offset)
            with self.storage.fetch_log_segment(m, position) as stream:
                records = read_batches(stream.read, info.fetch_offset, info.max_bytes, info.min_one_message)
            aborted: list[tuple[int, int]] = []
            if info.isolation is FetchIsolation.TXN_COMMITTED and records:
                upper = m.end_offset + 1
                complete = False
                for seg in ([] if m.txn_idx_empty else [m]) + later:
                    with self.storage.fetch_index(seg, IndexType.TRANSACTION) as s:
                        raw = s.readall()
                    for pos in range(0, len(raw) - ENTRY_SIZE + 1, ENTRY_SIZE):
                        a = AbortedTxn.decode(raw, pos)
                        if a.last_offset >= info.fetch_offset and a.first_offset < upper:
                            aborted.append((a.producer_id, a.first_offset))
                        if a.last_stable_offset >= upper:
                            complete = True
                    if complete:
                        break
                if not complete:
                    aborted += local_aborted
            # RemoteFetchBytesPerSec, on this reader thread: in its own counters
            self.stats.for_thread(info.topic).remote_fetch_bytes += len(records)
            self.fetch_quota.record(len(records))  # KIP-956: the bytes read count against the fetch quota
            return RemoteReadResult(records, list(dict.fromkeys(aborted)))  # a segment both remote and local
        except (RemoteStorageError, ValueError) as e:
            self.stats.for_thread(info.topic).remote_fetch_errors += 1
            log.error("reading %s-%d at offset %d from remote segment %s failed: %s", info.topic, info.partition,
                      info.fetch_offset, m.segment_id, e)
            raise
        except Exception:  # counted too; the fetch answers UNKNOWN_SERVER_ERROR
            self.stats.for_thread(info.topic).remote_fetch_errors += 1
            raise

    # ------------------------------------------------------------------ ListOffsets by timestamp

    def find_offset_by_timestamp(
        self, plog: Log, timestamp: int, starting_offset: int,
    ) -> concurrent.futures.Future[TimestampAndOffset | None]:
        """Kafka's RemoteLogManager.findOffsetByTimestamp (through asyncOffsetRead): the first record with a
        timestamp at or past ``timestamp`` and an offset at or past ``starting_offset`` (the log start offset),
        in the first remote segment that can hold it (``tiered.plan.timestamp_candidates``: by the log's leader
        epochs from the starting offset's on, the finished segments within its leader-epoch lineage whose max
        timestamp reaches the target). A segment also in the local log is searched there, on the loop (the
        first local segment whose largest timestamp reaches the target; none: the next candidate); a segment
        only in the remote tier on a reader thread: its time index, offset index, then its batches from there
        (Kafka's lookupTimestamp). The future's result is None when no remote segment answers: the caller then
        searches the local log from its local log start offset (Kafka's RemoteLogOffsetReader). It fails with
        ``RemoteStorageError`` (``RemoteMetadataNotReadyError`` while the metadata is being read) or
        ``InvalidRecordError``."""
        fut: concurrent.futures.Future[TimestampAndOffset | None] = concurrent.futures.Future()
        try:
            tip = self._tip(plog)
            if not self.metadata.is_initialized(tip) and not self._ensure_loaded(tip, plog):
                raise RemoteMetadataNotReadyError(f"the remote log metadata of {tip} cannot be read here yet")
            limit = read_inflate_limit(plog.config.max_message_bytes)
            local = plog.segments
            candidates = timestamp_candidates(
                [(e.epoch, e.start_offset) for e in plog.leader_epoch_cache.entries],
                lambda epoch: self.metadata.list_remote_log_segments(tip, epoch),
                timestamp, starting_offset, plog.log_end_offset,
            )
            for m in candidates:
                if not local or m.start_offset < local[0].base_offset:  # only in the remote tier
                    self.remote_offset_lookups += 1
                    return self._readers.submit(self.reader_pool.wrap(self._lookup_timestamp), m, timestamp, starting_offset, limit)
                for seg in local:  # also in the local log: searched there
                    if seg.largest_timestamp() >= timestamp:
                        found = seg.find_timestamp_and_offset(timestamp, starting_offset, limit)
                        fut.set_result(None if found is None else TimestampAndOffset(found[1], found[0], found[2]))
                        return fut
            fut.set_result(None)
        except (RemoteStorageError, InvalidRecordError) as e:
            fut.set_exception(e)
        return fut

    def _lookup_timestamp(
        self, m: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int, limit: int,
    ) -> TimestampAndOffset | None:
        """On a reader thread (Kafka's RemoteLogManager.lookupTimestamp): the time index gives the offset to
        start from, the offset index its position in the ``.log``, and the batches from there the record."""
        try:
            start = time_index_offset(self._index(m, IndexType.TIMESTAMP), m.start_offset, timestamp)
            position = offset_index_position(self._offset_index(m), m.start_offset, max(start, starting_offset))
            with self.storage.fetch_log_segment(m, position) as stream:
                return find_timestamp_in_batches(stream.read, timestamp, starting_offset, limit)
        except (RemoteStorageError, ValueError) as e:
            log.error("looking up timestamp %d in remote segment %s failed: %s", timestamp, m.segment_id, e)
            raise

    # ------------------------------------------------------------------ lifecycle

    def shutdown(self) -> None:
        """Stop: copies and deletions in flight finish (their last records are not written), reads are
        cancelled."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        for handle in self._quota_rechecks.values():
            handle.cancel()
        self._quota_rechecks.clear()
        for client in [*self._producers.values(), *self._consumers.values()]:
            client.close()
        self._readers.shutdown(wait=False, cancel_futures=True)
        self._workers.shutdown(wait=True, cancel_futures=True)
        self.storage.close()
